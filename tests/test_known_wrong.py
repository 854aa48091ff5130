"""Numerical safety in plan="auto": the known-wrong table (data, with a strict-xfail repro in make test
for each entry), auto never trying a plan it lists, an explicit plan still running with a warning, and
the report naming the verify test behind the plan a job ran."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import pytest
import torch
from conftest import REPO, tiny_bert

from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler import known_wrong
from sagemaker_tc.compiler.known_wrong import KNOWN_WRONG, VERIFIED, KnownWrong, plans_known_wrong

T5_REGIONAL = "tests/test_verify.py::test_t5_decoder_block_compiled_alone_gets_the_relative_bias_gradient"
T5_MODEL = "tests/test_verify.py::test_each_plan_trains_like_eager[t5-base-model] (torch 2.13.0)"

COLLECT_PLUGIN = '''
import json, os


def pytest_collection_modifyitems(session, config, items):
    """Write each collected node id and its xfail mark: None, or whether it is strict."""
    marks = {}
    for item in items:
        mark = item.get_closest_marker("xfail")
        if mark is not None and mark.args and not mark.args[0]:
            mark = None  # a condition that does not hold here: a plain test
        marks[item.nodeid] = None if mark is None else bool(mark.kwargs.get("strict", config.getini("xfail_strict")))
    with open(os.environ["KNOWN_WRONG_COLLECTED"], "w") as handle:
        json.dump(marks, handle)
'''


def tiny_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_decoder_layers=2, num_heads=2, vocab_size=64)
    config.decoder_start_token_id, config.use_cache = 0, False
    return T5ForConditionalGeneration(config)


def t5_batch(seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 64, (2, 12), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.randint(1, 64, (2, 3))}


def small_bert():
    model = tiny_bert(vocab_size=64, hidden_size=16, num_hidden_layers=2, max_position_embeddings=64)
    model.config.use_cache = False
    return model


def bert_batch(seed: int) -> dict:
    ids = torch.randint(1, 64, (4, 12), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 1, 0, 1])}


def collected(tmp_path, files: set[str]) -> dict[str, bool | None]:
    """The node ids pytest collects from ``files`` (repository-relative), each with its xfail mark."""
    (tmp_path / "known_wrong_collect.py").write_text(COLLECT_PLUGIN)
    out = tmp_path / "collected.json"
    env = {
        **os.environ,
        "KNOWN_WRONG_COLLECTED": str(out),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "known_wrong_collect", *sorted(files)]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text())


@pytest.fixture
def t5_regional_known_wrong(monkeypatch):
    """The T5 entry, applying on the installed torch: in a lane outside its range (torch 2.8 trains T5
    under regional like eager) the same entry is moved to start at the installed torch, since these
    tests check what auto, an explicit plan and the report do with an entry, not the entry itself."""
    import dataclasses

    (entry,) = [e for e in KNOWN_WRONG if e.architecture == "t5"]
    if not entry.applies_to(torch.__version__):
        moved = dataclasses.replace(entry, first_seen=torch.__version__.split("+")[0], fixed_in=None)
        monkeypatch.setattr(known_wrong, "KNOWN_WRONG", (moved,))
        return moved
    return entry


def _applies_here(entry: KnownWrong) -> bool:
    import transformers

    return entry.applies_to(torch.__version__, transformers.__version__)


def test_every_repro_is_a_strict_xfail_and_every_evidence_test_a_plain_one(tmp_path):
    """Each KNOWN_WRONG entry's repro (and its plain-torch repro) is collected, as a strict xfail where the
    entry covers the installed versions and as a plain test elsewhere; each test the report may name as
    evidence exists and is expected to pass where no entry covers it."""
    here = [entry for entry in KNOWN_WRONG if _applies_here(entry)]
    repros = [r for entry in KNOWN_WRONG for r in (entry.repro, entry.upstream_repro) if r]
    evidence = [
        known_wrong.VERIFY_TEST.format(model=model, plan=plan)
        for model in VERIFIED.values()
        for plan in ("regional", "model", "step")
    ]
    marks = collected(tmp_path, {node.split("::")[0] for node in [*repros, *evidence]})
    assert T5_REGIONAL in repros
    for entry in KNOWN_WRONG:
        for node in (r for r in (entry.repro, entry.upstream_repro) if r):
            expected = True if entry in here else None
            assert marks.get(node, "missing") is expected, f"{node}: not collected as {expected}"
    for node in evidence:
        wrong = any(e.repro == node and e.feature is None for e in here)
        assert marks.get(node, "missing") is (True if wrong else None), node


def test_tested_torch_is_the_version_make_test_pins():
    """The torch the report's evidence names is the one constraints.txt pins for make test."""
    pins = re.findall(r"^torch==(\S+)$", (REPO / "constraints.txt").read_text(), re.MULTILINE)
    assert pins == [known_wrong.TESTED_TORCH]


def test_entries_match_by_architecture_and_torch_version_range():
    """T5 under regional is known wrong from torch 2.13 on (still open); every T5 head shares the
    model_type; a fixed entry stops applying at its fix, not at the fix's pre-releases."""
    from transformers import T5Config, T5EncoderModel

    t5 = tiny_t5()
    assert set(plans_known_wrong(t5, "2.13.0+cpu")) == {"regional"}
    assert plans_known_wrong(t5, "2.13.0+cpu")["regional"].repro == T5_REGIONAL
    assert set(plans_known_wrong(T5EncoderModel(T5Config(d_model=32, d_ff=64, num_layers=1, vocab_size=64)), "2.15"))
    assert plans_known_wrong(t5, "2.12.1") == {}  # never run there: no claim either way
    assert plans_known_wrong(small_bert(), "2.13.0") == {}
    fixed = KnownWrong("t5", ("model",), "2.13", "2.14", "a reason", "tests/x.py::test_y")
    assert [fixed.applies_to(v) for v in ("2.12.9", "2.13.0", "2.13.1+cu128", "2.14.0a0+git1234", "2.14.0")] == [
        False,
        True,
        True,
        True,
        False,
    ]
    assert fixed.torch_range() == ">=2.13,<2.14"


def test_an_entry_with_a_feature_or_a_transformers_range_applies_only_there():
    """An entry that needs gradient checkpointing marks the plan wrong only for a model training with it;
    a transformers range limits it like the torch range."""
    entry = KnownWrong(
        "bert", ("regional",), "2.6", None, "a reason", "tests/x.py::test_y", feature="gradient_checkpointing"
    )
    model = small_bert()
    version = torch.__version__
    original = known_wrong.KNOWN_WRONG
    try:
        known_wrong.KNOWN_WRONG = (entry,)
        assert plans_known_wrong(model, version) == {}
        model.gradient_checkpointing_enable()
        assert set(plans_known_wrong(model, version)) == {"regional"}
    finally:
        known_wrong.KNOWN_WRONG = original
    ranged = KnownWrong("bert", ("model",), "2.6", None, "r", "tests/x.py::t", transformers=("4.56", "5.0"))
    assert [ranged.applies_to("2.8.0", v) for v in ("4.55.0", "4.56.2", "5.3.0")] == [False, True, False]
    assert ranged.to_dict("model")["transformers"] == ">=4.56,<5.0"
    assert entry.to_dict("regional")["feature"] == "gradient_checkpointing"


def test_t5_under_auto_never_tries_regional_and_the_report_says_why(t5_regional_known_wrong):
    """A plain loop under plan="auto" on a job long enough that auto tries regional first for BERT: T5's
    first trial after the eager steps is model, regional is listed as excluded with its reason and repro."""
    import sagemaker_tc
    from sagemaker_tc.compiler.session import current_session

    next_trial = {}
    for name, build, batch in (("bert", small_bert, bert_batch), ("t5", tiny_t5, t5_batch)):
        model = build()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        sagemaker_tc.compile_model(model, TrainingCompilerConfig(expected_steps=10_000_000))
        session = current_session()
        for step in range(5):  # auto's eager steps; the next trial is named at the end of the fifth
            model(**batch(step)).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        next_trial[name] = session.runtime.schedule.phases[0].plan
        ran = {record.variant for record in session.timer.records}
        report = session.report()
        session.close()
    assert next_trial == {"bert": "regional", "t5": "model"}
    assert ran == {"eager"} and [t["plan"] for t in report["trials"]] == ["eager"]
    assert report["plan"] == "model"  # installed for its trial: the verify run of T5 under model backs it
    assert report["plan_decision"]["verified"]["evidence"] == {"t5": T5_MODEL}
    (excluded,) = report["plan_decision"]["excluded"]
    assert excluded["plan"] == "regional" and excluded["architecture"] == "t5" and excluded["repro"] == T5_REGIONAL
    assert (
        "relative_attention_bias" in excluded["reason"] and excluded["torch"] == t5_regional_known_wrong.torch_range()
    )


def test_t5_auto_schedule_keeps_a_plan_that_is_not_regional(t5_regional_known_wrong):
    """The whole auto schedule on T5 (step times given, nothing compiled) on a job long enough to try every
    plan: regional's blocks are never installed; model and step are tried, and step is kept."""
    from sagemaker_tc import _internals
    from sagemaker_tc.compiler.plans import plan_modules
    from sagemaker_tc.compiler.runtime import CompilerRuntime
    from sagemaker_tc.compiler.steps import StepRecord, StepTimer

    model = tiny_t5()
    blocks = plan_modules(model, "regional")
    runtime = CompilerRuntime(timer=StepTimer())
    runtime.attach(model, TrainingCompilerConfig(expected_steps=10_000))
    runtime.set_job_length(10_000, "expected_steps")
    seconds = {"eager": 1.0, "model": 0.97, "step": 0.7}
    seen = []
    for _ in range(5 + 6 + 6 + 4):
        label = runtime.current_label()
        seen.append(label)
        assert len(blocks) == 4 and all(_internals.compiled_call(block) is None for block in blocks)
        runtime.timer.records.append(StepRecord(seconds[label], 2, seen.count(label) == 1, label))
        runtime.after_step()
    assert "regional" not in seen and seen[5:11] == ["model"] * 6 and seen[11:17] == ["step"] * 6
    assert runtime.decision["chosen"] == "step"
    assert {p["plan"] for p in runtime.decision["projections"]} == {"eager", "model", "step"}
    runtime.detach()


def test_an_explicit_known_wrong_plan_runs_with_a_warning_naming_the_evidence(caplog, t5_regional_known_wrong):
    """plan="regional" on T5: installed as asked, a warning names the failing verify test, and the report's
    verified section says no test backs it and which entry marks it wrong; nothing is excluded."""
    import sagemaker_tc
    from sagemaker_tc.compiler.session import current_session

    with caplog.at_level(logging.WARNING, logger="sagemaker_tc.compiler"):
        sagemaker_tc.compile_model(tiny_t5(), TrainingCompilerConfig(plan="regional", baseline_steps=0))
    session = current_session()
    assert session.runtime.active == "regional"
    assert "PLAN KNOWN WRONG: plan='regional'" in caplog.text and T5_REGIONAL in caplog.text
    decision = session.report()["plan_decision"]
    assert decision["excluded"] == []
    assert decision["verified"]["evidence"] == {"t5": None}
    assert decision["verified"]["known_wrong"]["repro"] == T5_REGIONAL


def test_the_report_names_the_verify_test_behind_the_plan():
    """BERT under plan="model": the evidence is the committed verify run of tiny BERT under model."""
    import sagemaker_tc
    from sagemaker_tc.compiler.session import current_session

    sagemaker_tc.compile_model(small_bert(), TrainingCompilerConfig(plan="model", baseline_steps=0))
    decision = current_session().report()["plan_decision"]
    assert decision["verified"] == {
        "plan": "model",
        "evidence": {
            "bert": "tests/test_verify.py::test_each_plan_trains_like_eager[bert-base-uncased-model] (torch 2.13.0)"
        },
    }
    assert decision["excluded"] == []


def test_a_checkpointed_bert_leaves_regional_out_where_its_compiled_backward_fails():
    """The known-broken entry (make test-stacks: torch 2.9 to 2.11 fail a checkpointed block's compiled
    backward): it applies only with gradient checkpointing on, only in its torch range, and says it is
    broken, not wrong."""
    from transformers import BertConfig, BertForSequenceClassification

    model = BertForSequenceClassification(
        BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    )
    assert "regional" not in plans_known_wrong(model, "2.10.0")
    model.gradient_checkpointing_enable()
    entry = plans_known_wrong(model, "2.10.0")["regional"]
    assert entry.kind == "broken" and entry.to_dict("regional")["kind"] == "broken"
    assert entry.feature == "gradient_checkpointing"
    assert [("regional" in plans_known_wrong(model, v)) for v in ("2.8.0", "2.9.0", "2.11.0", "2.13.0")] == [
        False,
        True,
        True,
        False,
    ]
