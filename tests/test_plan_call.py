"""The plan call, the same on every supported torch (this file runs in the dev lane and the DLC lane):
every forward pre-hook and hook on every compiled block runs once per call under every plan, each
plan variant compiles a frame of its own with a budget of its own, a wrapper's instance ``forward`` is
what the plan compiles, a failure in a plan's compiled backward ends the plan without ending the job,
and gradient checkpointing trains like eager under ``regional``.

Plans compile with dynamo's ``aot_eager`` backend here (AOTAutograd's forward and backward graphs,
without Inductor's codegen), so each case costs seconds; what is under test is dynamo's tracing of
our call and the backward AOTAutograd builds, not the kernels."""

from __future__ import annotations

import types

import pytest
import torch
from conftest import count_block_hooks, tiny_bert

import sagemaker_tc
from sagemaker_tc import TrainingCompilerConfig, _internals
from sagemaker_tc.compiler import plan_call
from sagemaker_tc.compiler.known_wrong import KNOWN_WRONG
from sagemaker_tc.compiler.session import current_session
from sagemaker_tc.errors import CompiledBackwardError

PLANS = ("regional", "model", "step")


def four_layer_bert():
    torch.manual_seed(0)
    return tiny_bert(vocab_size=64, hidden_size=16, num_hidden_layers=4, max_position_embeddings=64)


def batch(seed: int, length: int = 16) -> dict:
    ids = torch.randint(1, 64, (4, length), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 1, 0, 1])}


@pytest.fixture
def plan_backend(monkeypatch):
    """``plan_backend(backend)``: every plan's compiled variants compile with ``backend``."""
    real_compile_forward = plan_call.compile_forward

    def use(backend) -> None:
        def compile_forward(tag, budget, **kwargs):
            return real_compile_forward(tag, budget, **{**kwargs, "backend": backend})

        monkeypatch.setattr(plan_call, "compile_forward", compile_forward)

    use("aot_eager")
    return use


def compiled_frames() -> dict[str, list[str]]:
    """Our plan frames dynamo compiled, by function name: their compile ids (``"N/k"``)."""
    frames: dict[str, list[str]] = {}
    for record in _internals.compilation_records():
        name = getattr(record, "co_name", None) or ""
        if name.startswith("plan_forward__") and getattr(record, "is_forward", True):
            frames.setdefault(name, []).append(record.compile_id)
    return frames


def loop(model, config: TrainingCompilerConfig, steps: int = 3) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sagemaker_tc.compile_model(model, config)
    losses = []
    for step in range(steps):
        loss = model(**batch(step)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("plan", PLANS)
def test_every_hook_on_every_block_runs_once_per_forward(plan, plan_backend):
    model = four_layer_bert()
    counts = count_block_hooks(model)

    def count_model(module, args, output) -> None:
        counts["post", -1] = counts.get(("post", -1), 0) + 1

    model.register_forward_hook(count_model)
    loop(model, TrainingCompilerConfig(plan=plan, baseline_steps=0), steps=3)
    assert counts == {(kind, index): 3 for kind in ("pre", "post") for index in range(4)} | {("post", -1): 3}
    assert any(name.startswith(f"plan_forward__{plan}_") for name in compiled_frames()), compiled_frames()


def test_each_plan_variant_compiles_a_frame_of_its_own_with_its_own_budget():
    default = _internals.recompile_limit()
    first = plan_call.compile_forward("first_static", 2, backend="eager", dynamic=False)
    second = plan_call.compile_forward("second_static", 3, backend="eager", dynamic=False)
    layer = torch.nn.Linear(4, 4)
    for rows in (1, 2, 3, 5):  # four shapes: the first variant's budget of two runs out
        first(layer, torch.ones(rows, 4))
    for rows in (1, 2, 3, 5):
        second(layer, torch.ones(rows, 4))
    frames = compiled_frames()
    ids = {name: {compile_id.split("/")[0] for compile_id in found} for name, found in frames.items()}
    assert len(frames["plan_forward__first_static"]) == 2  # the other shapes ran uncompiled
    assert len(frames["plan_forward__second_static"]) == 3  # its own budget, unspent by the first
    assert ids["plan_forward__first_static"].isdisjoint(ids["plan_forward__second_static"])
    assert _internals.recompile_limit() == default  # the scripts' own functions keep dynamo's limit


def test_a_wrappers_instance_forward_is_what_the_model_plan_compiles(plan_backend):
    model = four_layer_bert()
    reference = four_layer_bert()
    wrapped = []

    def forward(self, *args, **kwargs):  # as accelerate's mixed precision wraps a prepared model
        wrapped.append(1)
        output = type(self).forward(self, *args, **kwargs)
        output.loss = output.loss * 2
        return output

    model.forward = types.MethodType(forward, model)
    losses = loop(model, TrainingCompilerConfig(plan="model", baseline_steps=0), steps=2)
    assert losses == pytest.approx([2 * loss for loss in loop_eager(reference, steps=2)], rel=1e-5)
    assert model.forward.__func__ is forward  # put back after each call
    assert "plan_forward__model_dynamic" in compiled_frames() or "plan_forward__model_static" in compiled_frames()


def loop_eager(model, steps: int) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step in range(steps):
        loss = model(**batch(step)).loss
        (loss * 2).backward()  # the same gradients as the doubled loss above
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    return losses


class FailingBackward:
    """A dynamo backend: AOTAutograd's ``aot_eager`` graphs, whose outputs fail in backward at the
    ``n``-th backward call (as a backward kernel error would), counted over every graph it built."""

    def __init__(self, n: int = 1) -> None:
        self.n, self.backwards = n, 0

    def __call__(self, graph_module, example_inputs):
        from torch._dynamo.backends.registry import lookup_backend

        compiled = lookup_backend("aot_eager")(graph_module, example_inputs)
        backend = self

        class Fail(torch.autograd.Function):
            @staticmethod
            def forward(ctx, tensor):
                return tensor.clone()

            @staticmethod
            def backward(ctx, grad):
                backend.backwards += 1
                if backend.backwards == backend.n:
                    raise RuntimeError("injected backward kernel failure")
                return grad

        def run(*args):
            outputs = compiled(*args)
            flat = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
            for index, output in enumerate(flat):
                if isinstance(output, torch.Tensor) and output.requires_grad:
                    flat[index] = Fail.apply(output)
                    break
            return type(outputs)(flat) if isinstance(outputs, (list, tuple)) else flat[0]

        return run


@pytest.mark.parametrize("plan", PLANS)
def test_a_plain_loop_gets_an_error_naming_the_plan_and_the_history_records_it(plan, plan_backend):
    plan_backend(FailingBackward(n=1))
    model = four_layer_bert()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan=plan, baseline_steps=0))
    with pytest.raises(CompiledBackwardError, match=f"plan '{plan}' failed in its compiled backward") as caught:
        model(**batch(0)).loss.backward()
    assert "injected backward kernel failure" in str(caught.value)
    assert isinstance(caught.value.__cause__, RuntimeError)
    runtime = current_session().runtime
    assert runtime.active == caught.value.stepped_back_to != plan
    entry = runtime.history_entry("cold")
    assert entry["plans"][plan]["failed"].startswith("compiler_error: RuntimeError: injected backward kernel failure")
    model.zero_grad()
    model(**batch(0)).loss.backward()  # the loop can go on: the next plan trains


def test_under_strict_a_failed_backward_is_a_compiler_error(plan_backend):
    plan_backend(FailingBackward(n=1))
    model = four_layer_bert()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="regional", policy="strict", baseline_steps=0))
    with pytest.raises(sagemaker_tc.errors.CompilerError, match="plan 'regional' failed"):
        model(**batch(0)).loss.backward()


def sst2_rows(count: int = 48, length: int = 16) -> list[dict]:
    from sagemaker_tc_bench.data import tokenize_sst2

    data = tokenize_sst2(count, length)
    return [
        {"input_ids": torch.tensor(i) % 64, "attention_mask": torch.tensor(m), "labels": torch.tensor(label)}
        for i, m, label in zip(data.input_ids, data.attention_mask, data.labels, strict=True)
    ]


def trainer_losses(tmp_path, config: TrainingCompilerConfig | None, **arguments) -> tuple[list[float], dict | None]:
    """A ``Trainer`` over real SST-2 rows (6 steps of 8, a 4-layer tiny BERT), with a job's compiler
    session for ``config`` (None: no session, eager); returns each step's logged loss and the report."""
    from transformers import Trainer, TrainingArguments

    from sagemaker_tc.compiler.session import CompilerSession
    from sagemaker_tc.integrations.transformers import install

    session = None
    if config is not None:
        session = CompilerSession(config).open()
        install(session.trainer_parts())
    try:
        args = TrainingArguments(
            output_dir=str(tmp_path),
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            disable_tqdm=True,
            logging_steps=1,
            max_steps=6,
            per_device_train_batch_size=8,
            learning_rate=1e-3,
            seed=0,
            **arguments,
        )
        trainer = Trainer(model=four_layer_bert(), args=args, train_dataset=sst2_rows())
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        return losses, (session.report() if session is not None else None)
    finally:
        if session is not None:
            session.close()


@pytest.mark.parametrize("plan", PLANS)
def test_a_failed_compiled_backward_ends_the_plan_and_the_trainer_job_completes(plan, tmp_path, plan_backend):
    plan_backend(FailingBackward(n=2))  # the second backward a compiled graph runs
    losses, report = trainer_losses(tmp_path, TrainingCompilerConfig(plan=plan, baseline_steps=0))
    assert len(losses) == 6
    failures = report["plan_decision"]["failures"]
    assert [f["plan"] for f in failures] == [plan]
    assert "injected backward kernel failure" in failures[0]["reason"]
    assert report["plan"] == failures[0]["stepped_back_to"] != plan


CHECKPOINTED_REGIONAL = "tests/test_plan_call.py::test_a_checkpointed_block_trains_compiled_under_regional"
CHECKPOINTED_REGIONAL_BROKEN = next(
    (entry for entry in KNOWN_WRONG if entry.repro == CHECKPOINTED_REGIONAL and entry.applies_to(torch.__version__)),
    None,
)
"""The known_wrong entry for a checkpointed block's compiled backward, when it covers the installed torch
(2.9.0 with transformers 5.3.0: an ``AssertionError`` without a message; 2.10.0 with transformers 5.3.0
and 2.11.0 with transformers 5.17.0: ``Unexpected state: target_frame.early_stop is set``; ``make
test-stacks``); 2.7, 2.8 and 2.13 train it compiled. There the backward fallback ends the plan and the
job goes on eagerly, and ``plan="auto"`` does not try regional."""


@pytest.mark.xfail(
    CHECKPOINTED_REGIONAL_BROKEN is not None,
    reason=CHECKPOINTED_REGIONAL_BROKEN.reason if CHECKPOINTED_REGIONAL_BROKEN else "",
    strict=True,
)
def test_a_checkpointed_block_trains_compiled_under_regional(tmp_path, plan_backend):
    """The repro of the known_wrong entry (a strict xfail where it applies): regional's compiled
    backward of a checkpointed BERT block runs, no plan failure."""
    plan_backend("inductor")
    _, report = trainer_losses(
        tmp_path, TrainingCompilerConfig(plan="regional", baseline_steps=0), gradient_checkpointing=True
    )
    assert report["plan_decision"]["failures"] == []


def test_gradient_checkpointing_under_regional_trains_like_eager(tmp_path, plan_backend):
    plan_backend("inductor")
    eager, _ = trainer_losses(tmp_path / "eager", None, gradient_checkpointing=True)
    compiled, report = trainer_losses(
        tmp_path / "regional", TrainingCompilerConfig(plan="regional", baseline_steps=0), gradient_checkpointing=True
    )
    assert compiled == pytest.approx(eager, rel=1e-4)
    assert any(name.startswith("plan_forward__regional_") for name in compiled_frames())
    failures = report["plan_decision"]["failures"]
    if CHECKPOINTED_REGIONAL_BROKEN is not None:
        assert [(f["plan"], f["kind"], f["stepped_back_to"]) for f in failures] == [
            ("regional", "compiler_error", "eager")
        ]
    else:
        assert failures == []
