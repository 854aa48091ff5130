"""The device is the model's where it trains (issue 32, points 2 and 3), on the CPU: a model moved
after ``compile_model`` (to the meta device, standing for a GPU through a stub device name), and two
gloo ranks whose agreement is staged on the model's device, the backend injected as a NCCL-like one."""

from __future__ import annotations

import json
import multiprocessing

import torch

import sagemaker_tc
from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler import planner, runtime
from sagemaker_tc.compiler.session import current_session


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x).sum()


def _stub_device_of(model):
    """What ``device_of`` answers on a GPU, for a model on the meta device (the stand-in GPU)."""
    device = next(model.parameters()).device.type
    return ("cuda", "Stub GPU") if device == "meta" else (device, "cpu")


def test_compile_model_before_to_device_records_the_models_device_at_the_first_call(monkeypatch):
    """``model = compile_model(Model()); model.to(device)``: the device is read at the first training
    call, not at compile_model: auto's candidates, priors, CUDA graphs and the report follow it."""
    monkeypatch.setattr(runtime, "device_of", _stub_device_of)
    model = sagemaker_tc.compile_model(Stack(), TrainingCompilerConfig(expected_steps=100))
    session = current_session()
    try:
        state = session.runtime
        assert state.device == "cpu" and session.runtime.device_name == "cpu"  # nothing trained yet
        model.to("meta")
        model(torch.zeros(4, 8, device="meta")).backward()
        assert (state.device, session.runtime.device_name) == ("cuda", "Stub GPU")
        assert state.schedule.workload.device == "cuda"  # the planner's priors are the GPU's
        assert state.model_device == torch.device("meta") and state.schedule.model_device() == torch.device("meta")
        assert set(state._available_plans()) <= set(planner.auto_candidates("cuda"))
        assert "regional" not in state._available_plans()  # its committed GPU result did not pay
    finally:
        session.close()


def _rank(rank: int, folder: str) -> None:
    """One of two gloo ranks: auto's phases on rank-dependent step times, the agreement spied on."""
    import torch.distributed as dist

    from sagemaker_tc.compiler import schedule
    from sagemaker_tc.compiler.steps import StepRecord

    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    schedule.backend = lambda: "nccl"  # injected: a backend that stages objects on a device
    staged, real = [], dist.broadcast_object_list

    def broadcast(box, src=0, device=None):
        staged.append(str(device))
        return real(box, src=src)  # gloo itself moves it on the host

    dist.broadcast_object_list = broadcast
    config = TrainingCompilerConfig(expected_steps=10_000)
    plans = schedule.Schedule(config, planner.Workload(device="cuda", modules={p: 1 for p in planner.COMPILED_PLANS}))
    plans.model_device = lambda: torch.device("meta")  # the model's (a GPU other than the current one)
    seconds = {"eager": 1.0, "regional": 0.5 if rank == 0 else 2.0}  # alone, rank 1 would keep eager
    records, plan = [], plans.first_plan("eager")
    for _ in range(schedule.EAGER_TRIAL_STEPS + schedule.TRIAL_STEPS + 1):
        records.append(StepRecord(seconds[plan], 8, compiled_during=False, variant=plan))
        plan = plans.after_step(lambda: records, lambda: ["regional"]) or plan
    dist.destroy_process_group()
    (folder / f"rank{rank}.json").write_text(json.dumps({"chosen": plans.chosen, "staged": staged}))


def test_two_gloo_ranks_agree_on_the_models_device_not_the_current_one(tmp_path):
    """The ranks' agreement stages the object on the model's device (never left to the current
    device, GPU 0 on every rank of a script without ``set_device``) and every rank takes rank 0's
    choice."""
    context = multiprocessing.get_context("spawn")
    ranks = [context.Process(target=_rank, args=(rank, tmp_path)) for rank in range(2)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=300)
    assert [process.exitcode for process in ranks] == [0, 0]
    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert [r["chosen"] for r in results] == ["regional", "regional"]
    assert all(r["staged"] == ["meta", "meta"] for r in results)  # the trial, then the choice


# -- the report agrees with itself (issue 32, point 10) ---------------------------------------------------
def test_a_trial_whose_every_step_compiled_reports_its_compile_seconds():
    """A trial that compiled in each of its steps (no steady step of its own) reports what its steps
    took beyond the eager step, not 0.0 s (the report's top-level figure counts the same steps)."""
    from sagemaker_tc.compiler import schedule
    from sagemaker_tc.compiler.steps import StepRecord

    config = TrainingCompilerConfig(plan="regional", baseline_steps=3)
    plans = schedule.Schedule(config, planner.Workload(device="cpu", modules={p: 1 for p in planner.COMPILED_PLANS}))
    records, plan = [], plans.first_plan("eager")
    for _ in range(3 + schedule.TRIAL_STEPS):
        compiling = plan != "eager"
        records.append(StepRecord(11.0 if compiling else 1.0, 8, compiled_during=compiling, variant=plan))
        plan = plans.after_step(lambda: records, lambda: []) or plan
    trials = {t["plan"]: t for t in plans.trials(records)}
    assert trials["regional"]["steady_step_seconds"] is None
    assert trials["regional"]["compile_seconds"] == schedule.TRIAL_STEPS * 10.0


def test_a_script_that_fails_before_attaching_a_model_is_not_told_to_call_compile_model():
    from sagemaker_tc.compiler.session import CompilerSession

    session = CompilerSession(TrainingCompilerConfig())
    session.record.script_outcome = "failed"
    reason = session.report()["fallback_reason"]
    assert "failed before it attached a model" in reason and "compile_model" not in reason


def test_autos_log_line_lists_only_the_plans_it_may_try(caplog):
    """A model without repeated blocks: ``auto`` will not try regional (it would compile the whole
    model again), and its log line does not list it."""
    import logging

    with caplog.at_level(logging.INFO, logger="sagemaker_tc"):
        sagemaker_tc.compile_model(torch.nn.Linear(4, 4), TrainingCompilerConfig())
    try:
        line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiler for Linear"))
        assert "then model, step, as far as they can pay off" in line and "regional" not in line, line
        assert current_session().runtime.auto_plans() == ["model", "step"]
    finally:
        current_session().close()
