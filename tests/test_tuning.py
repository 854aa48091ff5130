"""Batch size and learning rate tuned with the compiler: the search (fake memory-limited step), the
scaling rules (exact values), the finder on a real tiny BERT with a CPU memory budget, and the
Trainer path (``batch_size`` in the config, no script change)."""

from __future__ import annotations

import json
import math
import os

import pytest

from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import BatchSizeSearchError, ConfigError, TuningError
from sagemaker_tc.tuning.decision import plan_tuning
from sagemaker_tc.tuning.scaling import (
    lr_scale_factor,
    scale_learning_rate,
    scale_max_steps,
    scale_warmup_steps,
    steps_per_epoch,
)
from sagemaker_tc.tuning.search import Trial, search_max_batch

MIB = 1024**2


class FakeStep:
    """A training step whose memory is ``base + per_sample * batch`` bytes, held to ``budget``."""

    def __init__(self, budget: int, base: int = 10, per_sample: int = 3) -> None:
        self.budget, self.base, self.per_sample = budget, base, per_sample
        self.tried: list[int] = []

    def __call__(self, batch: int) -> Trial:
        self.tried.append(batch)
        peak = self.base + self.per_sample * batch
        return Trial(batch, peak <= self.budget, peak, None if peak <= self.budget else "over budget")


# -- the search --------------------------------------------------------------------------------
@pytest.mark.parametrize("budget, expected", [(100, 30), (13, 1), (3010, 1000), (1000, 330)])
def test_search_finds_the_largest_batch_within_the_budget(budget, expected):
    step = FakeStep(budget)
    result = search_max_batch(step, max_batch=1024)
    assert result.batch_size == expected
    assert result.exact and result.first_too_large == expected + 1
    assert len(step.tried) == len(set(step.tried))  # no batch tried twice
    # Doubling 1..1024 is 11 tries, bisection at most 10 more.
    assert len(step.tried) <= 21


def test_search_starting_too_large_comes_down():
    step = FakeStep(budget=100)
    result = search_max_batch(step, start=512, max_batch=1024)
    assert result.batch_size == 30 and result.exact
    assert step.tried[0] == 512


def test_search_stops_at_the_cap_and_says_so():
    step = FakeStep(budget=10**9)
    result = search_max_batch(step, start=8, max_batch=100)
    assert step.tried == [8, 16, 32, 64, 100]
    assert result.batch_size == 100 and result.capped and result.first_too_large is None


def test_search_in_multiples():
    result = search_max_batch(FakeStep(budget=100), max_batch=1024, multiple_of=8)
    assert result.batch_size == 24 and result.first_too_large == 32 and result.exact
    assert all(t.batch_size % 8 == 0 for t in result.trials)


def test_search_bounded_by_max_tries_is_not_exact():
    step = FakeStep(budget=1000)
    result = search_max_batch(step, max_batch=1024, max_tries=5)
    assert len(step.tried) == 5 and result.batch_size == 16 and not result.exact


def test_search_when_nothing_fits():
    with pytest.raises(BatchSizeSearchError, match="no batch size fits") as caught:
        search_max_batch(FakeStep(budget=5), start=4)
    assert [t.batch_size for t in caught.value.trials] == [4, 2, 1]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"start": 0}, "start must be a positive int"),
        ({"max_batch": 4, "multiple_of": 8}, "smaller than multiple_of"),
        ({"max_tries": 1}, "max_tries must be an int >= 2"),
        ({"multiple_of": True}, "multiple_of must be a positive int"),
    ],
)
def test_search_rejects_bad_bounds_before_any_try(kwargs, message):
    step = FakeStep(budget=100)
    with pytest.raises(TuningError, match=message):
        search_max_batch(step, **kwargs)
    assert step.tried == []


# -- the scaling rules -------------------------------------------------------------------------
def test_linear_and_sqrt_rules_exact_values():
    assert scale_learning_rate(5e-5, 32, 128, "linear") == pytest.approx(2e-4, rel=1e-15)
    assert scale_learning_rate(5e-5, 32, 128, "sqrt") == pytest.approx(1e-4, rel=1e-15)
    assert scale_learning_rate(5e-5, 32, 128, "none") == 5e-5
    assert scale_learning_rate(1e-4, 8, 55, "linear") == pytest.approx(6.875e-4, rel=1e-15)
    assert scale_learning_rate(1e-4, 64, 16, "sqrt") == pytest.approx(5e-5, rel=1e-15)  # smaller batch: lower
    assert lr_scale_factor(10, 40, "sqrt") == 2.0


def test_warmup_and_max_steps_cover_the_same_samples():
    assert scale_warmup_steps(100, 32, 128) == 25
    assert scale_warmup_steps(10, 8, 55) == 2  # ceil(80 / 55)
    assert scale_warmup_steps(1, 8, 1024) == 1  # never drops to 0
    assert scale_warmup_steps(0, 8, 64) == 0
    assert scale_warmup_steps(0.1, 8, 64) == 0.1  # a fraction of training is kept
    assert scale_warmup_steps(10, 64, 16) == 40
    assert scale_max_steps(20, 8, 55) == 3  # ceil(160 / 55): at least as many samples
    assert scale_max_steps(-1, 8, 55) == -1
    assert steps_per_epoch(6400, 32) == 200
    assert steps_per_epoch(6400, 32, world_size=2, accumulation=2) == 50
    assert steps_per_epoch(100, 32) == 4  # the last, short batch counts


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: scale_learning_rate(0.0, 8, 16, "linear"), "learning rate must be a finite number > 0"),
        (lambda: scale_learning_rate(float("nan"), 8, 16, "linear"), "finite number"),
        (lambda: scale_learning_rate(1e-4, 0, 16, "linear"), "old_batch must be a positive int"),
        (lambda: scale_learning_rate(1e-4, 8, 16, "cubic"), "unknown learning-rate scaling rule 'cubic'"),
        (lambda: scale_warmup_steps(-1, 8, 16), "warmup_steps must be a number >= 0"),
        (lambda: steps_per_epoch(-1, 8), "num_samples must be >= 0"),
    ],
)
def test_scaling_rejects_bad_inputs(call, message):
    with pytest.raises(TuningError, match=message):
        call()


def test_decision_reports_global_batch_and_schedule_before_and_after():
    decision = plan_tuning(
        requested="auto",
        new_batch=48,
        old_batch=16,
        learning_rate=3e-5,
        lr_scaling="sqrt",
        warmup_steps=30,
        max_steps=-1,
        world_size=2,
        gradient_accumulation_steps=4,
    )
    decision.describe_schedule(num_samples=6400, num_train_epochs=3, scheduler="linear", optimizer_steps_after=51)
    report = decision.to_dict()
    assert report["global_batch"] == {"before": 128, "after": 384}
    assert report["learning_rate"]["after"] == pytest.approx(3e-5 * math.sqrt(3), rel=1e-15)
    assert report["warmup_steps"] == {"before": 30, "after": 10}
    assert report["schedule"]["steps_per_epoch"] == {"before": 50, "after": 17}
    assert report["schedule"]["optimizer_steps"] == {"before": 150, "after": 51}
    line = decision.log_line()
    assert line.startswith("BATCH SIZE TUNED: per-device batch 16 -> 48")
    assert "global batch 128 -> 384" in line and "(sqrt)" in line


# -- config --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fields, message",
    [
        ({"batch_size": 0}, "batch_size: Value error, accepted: a positive int per-device batch"),
        ({"batch_size": "max"}, "batch_size: Value error, accepted: a positive int per-device batch"),
        ({"lr_scaling": "log"}, "lr_scaling: Input should be 'linear', 'sqrt' or 'none'"),
        ({"memory_budget_gib": -1.0}, "memory_budget_gib: Input should be greater than 0"),
        ({"max_batch_size": 0}, "max_batch_size: Input should be greater than or equal to 1"),
        ({"tune_seq_len": 0}, "tune_seq_len: Input should be greater than or equal to 1"),
        ({"memory_budget_gib": float("inf")}, "memory_budget_gib: Input should be a finite number"),
        ({"batch_size": True}, "accepted: a positive int per-device batch, 'auto', or None"),
        ({"batch_size": 3.5}, "accepted: a positive int per-device batch, 'auto', or None"),
    ],
)
def test_bad_tuning_config_is_a_config_error(fields, message):
    with pytest.raises(ConfigError, match=message):
        TrainingCompilerConfig(**fields)


# -- the finder on a real tiny BERT, CPU memory budget -----------------------------------------
def _tiny_bert_and_batches(seq_len: int = 32):
    import torch

    from sagemaker_tc_bench.data import tokenize_sst2
    from sagemaker_tc_bench.suite import build_model, make_batches

    torch.manual_seed(0)
    model = build_model("bert-base-uncased", "tiny")
    rows = make_batches(model, "bert-base-uncased", tokenize_sst2(256, seq_len), 256)[0]
    return model, lambda b: {key: value[:b].clone() for key, value in rows.items()}


def _peak_of_training(model, make_batch, batch_size: int) -> int:
    """Peak tensor bytes of two AdamW training steps at ``batch_size``, measured afresh."""
    import torch

    from sagemaker_tc.tuning.memory import PeakMemory, tensor_bytes

    base = tensor_bytes(list(model.parameters()) + list(model.buffers()))
    with PeakMemory(torch.device("cpu"), base) as peak:
        batch = make_batch(batch_size)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        for _ in range(2):
            optimizer.zero_grad(set_to_none=True)
            model(**batch).loss.backward()
            optimizer.step()
    for param in model.parameters():
        param.grad = None
    return peak.peak_bytes


def test_finder_on_tiny_bert_returns_the_batch_that_fits_and_the_next_does_not():
    import torch

    from sagemaker_tc.tuning.finder import find_max_batch

    model, make_batch = _tiny_bert_and_batches()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    rng = torch.random.get_rng_state()
    budget_gib = 24 / 1024  # 24 MiB of tensors: parameters ~1 MiB, so activations decide
    result = find_max_batch(model, make_batch, compiled=False, budget_gib=budget_gib, max_batch=256)
    found = result.batch_size
    assert 8 < found < 256 and result.search.exact and result.search.first_too_large == found + 1
    by_batch = {t.batch_size: t for t in result.search.trials}
    assert by_batch[found].fits and not by_batch[found + 1].fits
    assert by_batch[found + 1].reason.startswith("peak ") and "> budget 24.0 MiB" in by_batch[found + 1].reason
    # The model, its gradients and the RNG are as before the search.
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.random.get_rng_state(), rng)
    # Measured again, independently: the found batch trains within the budget, one more sample does not.
    budget = result.budget.bytes
    assert _peak_of_training(model, make_batch, found) <= budget < _peak_of_training(model, make_batch, found + 1)
    assert _peak_of_training(model, make_batch, found) == by_batch[found].peak_bytes  # repeatable figure


def test_finder_refuses_a_model_it_cannot_make_inputs_for():
    import torch

    from sagemaker_tc.tuning.api import search_batch

    # Without make_batch, the first error names the real fix (pass make_batch), not the sequence length.
    with pytest.raises(TuningError, match="cannot build training inputs for Linear.*pass make_batch"):
        search_batch(torch.nn.Linear(4, 4), TrainingCompilerConfig())


def test_finder_refuses_a_make_batch_that_ignores_its_argument_or_is_not_a_function():
    from sagemaker_tc.tuning.finder import find_max_batch

    model, make_batch = _tiny_bert_and_batches(seq_len=16)
    with pytest.raises(TuningError, match=r"make_batch\(1\) returned a batch of 4 samples"):
        find_max_batch(model, lambda b: make_batch(4), compiled=False, budget_gib=0.05)
    with pytest.raises(TuningError, match="make_batch must be a function"):
        find_max_batch(model, make_batch(4), compiled=False)
    with pytest.raises(TuningError, match=r"make_batch\(1\) raised KeyError"):
        find_max_batch(model, lambda b: {}["x"], compiled=False)


def test_finder_with_a_budget_nothing_fits_raises_with_the_tries():
    from sagemaker_tc.tuning.finder import find_max_batch

    model, make_batch = _tiny_bert_and_batches(seq_len=16)
    with pytest.raises(BatchSizeSearchError, match="no batch size fits") as caught:
        find_max_batch(model, make_batch, compiled=False, budget_gib=1 / 1024, start=2)
    assert [t.batch_size for t in caught.value.trials] == [2, 1]


# -- the Trainer path ----------------------------------------------------------------------------
def _trainer(job_session, config: TrainingCompilerConfig, **arguments):
    """A Trainer over 320 real SST-2 rows (tiny BERT from tests' conftest), built after the job's
    compiler session is open, as inside a job."""
    import torch
    from conftest import tiny_bert
    from transformers import Trainer, TrainingArguments

    from sagemaker_tc_bench.data import tokenize_sst2

    job_session(config)
    data = tokenize_sst2(320, 32)
    rows = [
        {"input_ids": torch.tensor(i), "attention_mask": torch.tensor(m), "labels": torch.tensor(label)}
        for i, m, label in zip(data.input_ids, data.attention_mask, data.labels, strict=True)
    ]
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=str(arguments.pop("output_dir")),
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        **arguments,
    )
    return Trainer(model=tiny_bert(), args=args, train_dataset=rows)


@pytest.fixture
def job_session():
    """Opens a job's compiler session (with the Trainer callback) for a config; closes it after."""
    from sagemaker_tc.compiler.session import CompilerSession
    from sagemaker_tc.integrations.transformers import install

    opened = []

    def open_session(config: TrainingCompilerConfig) -> CompilerSession:
        session = CompilerSession(config).open()
        install(session.trainer_parts())
        opened.append(session)
        return session

    yield open_session
    for session in opened:
        session.close()


def _batch_tuning() -> dict:
    """The open session's batch-size decision, as the report holds it."""
    from sagemaker_tc.compiler.session import current_session

    return current_session().report()["batch_tuning"]


def test_trainer_with_a_fixed_batch_scales_lr_warmup_and_max_steps(tmp_path, job_session):
    config = TrainingCompilerConfig(backend="eager", batch_size=32, lr_scaling="sqrt")
    trainer = _trainer(
        job_session,
        config,
        output_dir=tmp_path,
        per_device_train_batch_size=8,
        learning_rate=1e-4,
        warmup_steps=8,
        max_steps=12,
    )
    trainer.train()
    tuning = _batch_tuning()
    assert tuning["applied"] is True and tuning["requested"] == 32 and tuning["search"] is None
    assert tuning["per_device_batch"] == {"before": 8, "after": 32}
    assert tuning["learning_rate"]["after"] == pytest.approx(2e-4, rel=1e-15)  # sqrt(32 / 8) = 2
    assert tuning["warmup_steps"] == {"before": 8, "after": 2}
    assert tuning["max_steps"] == {"before": 12, "after": 3}
    # What the Trainer really did.
    assert trainer.state.train_batch_size == 32 and trainer.state.global_step == 3
    assert tuning["schedule"]["trainer_batch_size"] == 32
    assert tuning["schedule"]["learning_rate_applied"] == pytest.approx(2e-4, rel=1e-12)
    assert tuning["schedule"]["steps_per_epoch"] == {"before": 40, "after": 10}
    assert tuning["schedule"]["warmup_steps_resolved"] == {"before": 8, "after": 2}


def test_trainer_search_failure_keeps_the_scripts_batch_and_says_why(tmp_path, job_session, caplog):
    config = TrainingCompilerConfig(backend="eager", batch_size="auto", memory_budget_gib=1e-4, tune_seq_len=32)
    trainer = _trainer(
        job_session, config, output_dir=tmp_path, per_device_train_batch_size=8, learning_rate=1e-4, max_steps=2
    )
    with caplog.at_level("ERROR", logger="sagemaker_tc"):
        trainer.train()
    tuning = _batch_tuning()
    assert tuning["applied"] is False and tuning["note"].startswith("search failed: BatchSizeSearchError")
    assert tuning["per_device_batch"] == {"before": 8, "after": 8} and trainer.state.train_batch_size == 8
    assert [t["batch_size"] for t in tuning["search"]["trials"]] == [8, 4, 2, 1]  # from the script's batch down
    assert "BATCH SIZE NOT TUNED" in caplog.text and "BATCH SIZE TUNED" not in caplog.text


def test_trainer_search_failure_raises_under_strict_policy(tmp_path, job_session):
    config = TrainingCompilerConfig(
        backend="eager", policy="strict", batch_size="auto", memory_budget_gib=1e-4, tune_seq_len=32
    )
    with pytest.raises(BatchSizeSearchError):
        _trainer(job_session, config, output_dir=tmp_path, per_device_train_batch_size=8, learning_rate=1e-4)
    tuning = _batch_tuning()  # recorded before raising: the job's report says what failed
    assert tuning["applied"] is False and tuning["note"].startswith("search failed: BatchSizeSearchError")
    assert [t["batch_size"] for t in tuning["search"]["trials"]] == [8, 4, 2, 1]


@pytest.mark.slow
def test_hf_trainer_job_with_auto_batch_trains_with_the_found_batch_and_scaled_lr(tmp_path, tiny_bert_dir, capsys):
    from test_shapes import _epoch

    config = TrainingCompilerConfig(
        plan="regional",
        buckets=[64],  # one static graph: the job's 2-3 steps are one compile and steady steps after it
        batch_size="auto",
        memory_budget_gib=0.03125,
        tune_seq_len=64,
        max_batch_size=256,
        baseline_steps=0,
    )
    report, results = _epoch(tmp_path, tiny_bert_dir, config, train_batch_size=8, learning_rate=1e-4, max_steps=20)
    log = capsys.readouterr().out
    tuning = report["batch_tuning"]
    found = tuning["search"]["batch_size"]
    assert tuning["applied"] is True and tuning["search"]["compiled"] is True and tuning["search"]["exact"]
    assert 8 < found < 256 and tuning["per_device_batch"] == {"before": 8, "after": found}
    assert tuning["learning_rate"]["after"] == pytest.approx(1e-4 * found / 8, rel=1e-12)  # linear
    assert tuning["warmup_steps"] == {"before": 10, "after": math.ceil(10 * 8 / found)}
    assert tuning["max_steps"] == {"before": 20, "after": math.ceil(20 * 8 / found)}
    # The job trained with them: the Trainer's batch, the scheduler's starting LR, the step count.
    assert tuning["schedule"]["trainer_batch_size"] == found
    assert tuning["schedule"]["learning_rate_applied"] == pytest.approx(1e-4 * found / 8, rel=1e-12)
    assert report["steps"] == math.ceil(20 * 8 / found) and report["compiled"] is True
    # The search's own compile leaves no trace: training's compiles are counted and timed.
    assert report["training_compiles"] >= 1 and report["compile_seconds"] > 0
    assert tuning["search"]["trials"][0]["batch_size"] == 8  # the search starts at the script's batch
    assert f"BATCH SIZE TUNED: per-device batch 8 -> {found}" in log
    # The model trained with the tuned batch is the one saved: evaluation scores as it does uncompiled.
    assert results["eval_loss"] == pytest.approx(results["eager_loss"], rel=1e-3)


@pytest.mark.slow
def test_a_tuned_max_steps_inside_the_baseline_is_reported_uncompiled(tmp_path, tiny_bert_dir, capsys):
    from test_shapes import _epoch

    config = TrainingCompilerConfig(plan="regional", batch_size=32)  # 12 steps of 8 -> 3 of 32 = baseline_steps
    report, _ = _epoch(tmp_path, tiny_bert_dir, config, train_batch_size=8, max_steps=12)
    log = capsys.readouterr().out
    assert report["batch_tuning"]["max_steps"] == {"before": 12, "after": 3} and report["steps"] == 3
    assert report["compiled"] is False and report["fallback_reason"].startswith("no training step ran compiled")
    assert "max_steps is now 3, no more than baseline_steps=3" in log


def test_the_tuning_modules_that_need_no_torch_import_without_it():
    import subprocess
    import sys

    code = (
        "import sys; import sagemaker_tc.tuning.search, sagemaker_tc.tuning.scaling, sagemaker_tc.tuning.decision; "
        "import sagemaker_tc_bench.commands; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


# -- sagemaker-tc tune: the tested-models table --------------------------------------------------
def test_tune_command_writes_the_tested_models_table(tmp_path, capsys):
    from sagemaker_tc.cli import main

    argv = ["tune", "--models", "distilbert-base-uncased", "--modes", "eager", "--device", "cpu", "--seq-len", "32"]
    argv += ["--memory-budget-gib", "0.01", "--max-batch-size", "128", "--steps", "3", "--out", str(tmp_path)]
    assert main([*argv, "--name", "table"]) == 0
    out = capsys.readouterr().out
    document = json.loads((tmp_path / "table.json").read_text())
    cell = document["rows"][0]["eager"]
    assert cell["status"] == "ok" and cell["exact"] and cell["first_too_large"] == cell["max_batch"] + 1
    assert cell["peak_bytes_at_max"] <= 0.01 * 1024**3 and cell["samples_per_s"] > 0
    assert document["environment"]["versions"]["torch"] and document["device"]["type"] == "cpu"
    markdown = (tmp_path / "table.md").read_text()
    assert f"| distilbert-base-uncased | cpu | 32 | {cell['max_batch']} | - |" in markdown
    assert "torch " in markdown and f"distilbert-base-uncased: eager max batch {cell['max_batch']}" in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--modes", "fast"], "TuningError: unknown mode 'fast'; accepted: eager, compiled"),
        (["--multiple-of", "64", "--max-batch-size", "32"], "multiple_of (64) is larger than max_batch (32)"),
        (["--models", "bart"], "BenchError: unknown model 'bart'"),
    ],
)
def test_tune_command_rejects_bad_options_before_any_work(tmp_path, capsys, extra, message):
    from sagemaker_tc.cli import main

    assert main(["tune", "--device", "cpu", "--out", str(tmp_path), *extra]) == 1
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_finder_restores_eval_mode():
    from sagemaker_tc.tuning.finder import find_max_batch

    model, make_batch = _tiny_bert_and_batches(seq_len=16)
    model.eval()
    find_max_batch(model, make_batch, compiled=False, budget_gib=8 / 1024, start=4, max_batch=8)
    assert not model.training and not any(m.training for m in model.modules())


def test_tune_batch_size_for_a_plain_loop_with_synthetic_batches(job_session):
    import torch
    from conftest import tiny_bert

    import sagemaker_tc

    torch.manual_seed(0)
    model = tiny_bert()
    config = TrainingCompilerConfig(
        backend="eager", batch_size="auto", tune_seq_len=32, memory_budget_gib=0.03, batch_size_multiple=4
    )
    job_session(config)
    decision = sagemaker_tc.tune_batch_size(
        model, batch_size=8, learning_rate=1e-4, warmup_steps=10, num_samples=6400, num_epochs=2, config=config
    )
    found = decision.per_device_batch[1]
    assert decision.search["batch_size"] == found and decision.search["seq_len"] == 32
    assert decision.search["compiled"] is False and decision.search["exact"]
    assert found % 4 == 0 and decision.search["first_too_large"] == found + 4
    assert all(t["batch_size"] % 4 == 0 for t in decision.search["trials"])
    assert decision.learning_rate == (1e-4, pytest.approx(1e-4 * found / 8, rel=1e-15))
    assert decision.warmup_steps == (10, math.ceil(80 / found))
    assert decision.schedule["steps_per_epoch"] == {"before": 800, "after": math.ceil(6400 / found)}
    assert decision.schedule["optimizer_steps"] == {"before": 1600, "after": 2 * math.ceil(6400 / found)}
    assert _batch_tuning() == decision.to_dict()
    # The synthetic batches are the model's task: token ids and class labels.
    from sagemaker_tc.tuning.synthetic import batch_maker

    batch = batch_maker(model, 32)(3)
    assert batch["input_ids"].shape == (3, 32) and batch["labels"].shape == (3,)
    assert int(batch["input_ids"].max()) < model.config.vocab_size


def test_tune_batch_size_refuses_a_config_that_is_not_one_before_any_session():
    from conftest import tiny_bert

    import sagemaker_tc
    from sagemaker_tc.compiler.session import current_session

    with pytest.raises(ConfigError, match=r"config must be a sagemaker_tc\.TrainingCompilerConfig, got builtins\.dict"):
        sagemaker_tc.tune_batch_size(tiny_bert(), batch_size=8, learning_rate=1e-4, config={"batch_size": "auto"})
    assert current_session() is None
