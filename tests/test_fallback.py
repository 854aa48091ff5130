"""Fallback and strict policies; break-even; the schedule: eager baseline, then a plan, or plan="auto"'s
trials and choice."""

import json
import tarfile

import pytest
import torch
from conftest import REPO, tiny_bert, write_sst2_slice

from sagemaker_tc import CompilerError, PyTorch, TrainingCompilerConfig, TrainingJobFailedError
from sagemaker_tc.compiler.report import break_even_steps
from sagemaker_tc.compiler.runtime import CompilerRuntime
from sagemaker_tc.compiler.steps import StepRecord


def small_bert():
    return tiny_bert(vocab_size=64, hidden_size=16, max_position_embeddings=32)


def step(model, optimizer):
    inputs = torch.randint(0, 64, (4, 8), generator=torch.Generator().manual_seed(0))
    model(input_ids=inputs, labels=torch.tensor([0, 1, 0, 1])).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def test_break_even_is_compile_overhead_over_the_per_step_saving():
    assert break_even_steps(10.0, 1.0, 0.75) == 40
    assert break_even_steps(10.0, 1.0, 0.7) == 34  # 33.3 rounded up
    assert break_even_steps(0.0, 1.0, 0.5) == 1
    assert break_even_steps(10.0, 1.0, 1.0) is None  # compiled is not faster
    assert break_even_steps(10.0, 1.0, 1.2) is None
    assert break_even_steps(None, 1.0, 0.5) is None and break_even_steps(10.0, None, 0.5) is None


def drive(runtime, timeline):
    """Run ``timeline``'s steps through ``runtime``: each step runs the plan the runtime says, takes the
    given (seconds, compiled-during) for that plan, and ends. Returns the plans the steps ran."""
    seen = []
    for step in range(len(timeline) if isinstance(timeline, list) else timeline["steps"]):
        label = runtime.current_label()
        seen.append(label)
        seconds, compiled = timeline[step] if isinstance(timeline, list) else timeline[label][seen.count(label) - 1]
        runtime.timer.records.append(StepRecord(seconds, 4, compiled, label))
        runtime.after_step()
    return seen


def runtime_with_timer():
    from sagemaker_tc.compiler.steps import StepTimer

    timer = StepTimer()
    return CompilerRuntime(timer=timer)


def test_fallback_schedule_runs_eager_baseline_then_compiled():
    model = small_bert()
    runtime = runtime_with_timer()
    runtime.attach(model, TrainingCompilerConfig(plan="regional", baseline_steps=2))
    timeline = [(0.5, False), (0.2, False), (9.0, True), (0.1, False), (0.2, False), (0.1, False), (0.1, False)]
    labels = drive(runtime, timeline)
    assert labels == ["eager", "eager"] + ["regional"] * 5
    assert runtime.eager_step_seconds() == 0.2  # the first eager step is warm-up
    assert runtime.trials()[1]["steady_step_seconds"] == 0.1 and runtime.trials()[1]["variant"] == "compiled"
    assert runtime.final_label() == "regional" and runtime.active == "regional"


def test_auto_plan_tries_plans_cheapest_first_and_keeps_the_lowest_projection():
    """plan="auto" on a long job (10,000 steps, this CPU's priors): eager measured; regional, model and
    step each tried because its best plausible step (eager / the prior's largest speedup) still beat
    the best measured one; the lowest projection is kept, and its optimizer switch with it."""
    model = small_bert()
    optimizer = torch.optim.AdamW(model.parameters(), foreach=True)
    runtime = runtime_with_timer()
    runtime.attach(model, TrainingCompilerConfig(expected_steps=10_000))
    runtime.set_job_length(10_000, "expected_steps")
    runtime.track_optimizer(optimizer)
    timeline = {
        "steps": 5 + 6 * 3 + 4,
        "eager": [(0.9, False)] + [(1.0, False)] * 4,
        "regional": [(12.0, True), (1.2, True)] + [(0.99, False)] * 4,  # < 1 / 1.05: model may still win
        "model": [(30.0, True)] + [(0.97, False)] * 5,  # > 1 / 1.05: step may still win
        "step": [(25.0, True)] + [(0.7, False)] * 9,
    }
    seen = drive(runtime, timeline)
    assert seen[:5] == ["eager"] * 5 and seen[5:11] == ["regional"] * 6
    assert seen[11:17] == ["model"] * 6 and seen[17:23] == ["step"] * 6 and set(seen[23:]) == {"step"}
    trials = {t["plan"]: t for t in runtime.trials()}
    assert trials["eager"]["steady_step_seconds"] == 1.0 and trials["step"]["steady_step_seconds"] == 0.7
    assert trials["regional"]["compile_seconds"] == pytest.approx((12.0 - 0.99) + (1.2 - 0.99))
    assert runtime.final_label() == "step" and runtime.decision["chosen"] == "step"
    assert runtime.decision["remaining_steps"] == 10_000 - 23
    assert optimizer.param_groups[0]["fused"] is True  # the step plan's update: the fused kernel on CPU
    runtime.detach()
    assert optimizer.param_groups[0]["fused"] is None and optimizer.param_groups[0]["foreach"] is True  # as built


def test_auto_plan_keeps_eager_when_no_plan_can_pay_off_in_the_steps_left():
    model = small_bert()
    runtime = runtime_with_timer()
    runtime.attach(model, TrainingCompilerConfig())
    runtime.set_job_length(40, "Trainer max_steps")
    seen = drive(runtime, [(0.5, False)] * 12)
    assert seen == ["eager"] * 12 and runtime.final_label() == "eager"
    assert runtime.decision["chosen"] == "eager" and runtime.decision["decided_at_step"] == 5
    assert runtime.decision["reason"].startswith("eager for the remaining 35 steps: lowest projected time")
    assert runtime.trials() == [
        {"plan": "eager", "variant": "eager", "steady_step_seconds": 0.5, "compile_seconds": None, "invalid": None}
    ]


def test_a_models_own_error_under_compile_is_raised_not_taken_for_a_compiler_failure():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    runtime = CompilerRuntime()
    runtime.attach(model, TrainingCompilerConfig(baseline_steps=0, plan="model"))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        model(torch.ones(2, 5))
    assert runtime.fallback_reason is None and runtime.active == "model"


def _no_cxx(tmp_path):
    # A C++ compiler that does not exist, and an empty Inductor folder (nothing compiled to reuse).
    return {"CXX": str(tmp_path / "no-such-compiler" / "c++"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}


def test_in_process_fallback_when_the_compiler_cannot_build(tmp_path, monkeypatch):
    import torch._inductor.config as inductor_config

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    # torch's own config patcher: it restores the setting (monkeypatch would delete it on undo).
    with inductor_config.patch({"cpp.cxx": (None, _no_cxx(tmp_path)["CXX"])}):
        model = small_bert()
        optimizer = torch.optim.AdamW(model.parameters())
        runtime = CompilerRuntime()
        runtime.attach(model, TrainingCompilerConfig(baseline_steps=0, plan="model"))
        with pytest.warns(UserWarning, match="training continues with regional"):
            step(model, optimizer)  # model fails: the next safer plan is regional ...
        assert runtime.active == "regional" and runtime.fallback_reason is None
        with pytest.warns(UserWarning, match="training continues with eager"):
            step(model, optimizer)  # ... which fails the same way: eager
        assert "No working C++ compiler" in runtime.fallback_reason and runtime.active == "eager"
        step(model, optimizer)  # later steps run eagerly

        strict = CompilerRuntime()
        strict_model = small_bert()
        strict.attach(strict_model, TrainingCompilerConfig(baseline_steps=0, plan="model", policy="strict"))
        with pytest.raises(CompilerError, match="policy='strict'"):
            step(strict_model, torch.optim.AdamW(strict_model.parameters()))
    assert inductor_config.cpp.cxx[1] != _no_cxx(tmp_path)["CXX"]  # restored for later tests


def loop_job(tmp_path, tiny_bert_dir, config, environment):
    write_sst2_slice(tmp_path / "train", "train", 64)
    estimator = PyTorch(
        "ddp_loop.py",
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        hyperparameters={"model_dir": str(tiny_bert_dir), "steps": 6, "global_batch": 8},
        environment=environment,
        compiler_config=config,
        output_path=str(tmp_path / "out"),
    )
    return estimator, {"train": str(tmp_path / "train")}


@pytest.mark.slow
def test_job_without_a_cxx_compiler_trains_uncompiled_and_says_why(tmp_path, tiny_bert_dir, capsys):
    estimator, channels = loop_job(tmp_path, tiny_bert_dir, TrainingCompilerConfig(plan="regional"), _no_cxx(tmp_path))
    estimator.fit(channels)
    log = capsys.readouterr().out
    job = estimator.latest_training_job
    with tarfile.open(job.output_artifacts.removeprefix("file://")) as tar:
        report = json.loads(tar.extractfile("compiler/report.json").read())
    assert job.status == "Completed" and report["steps"] == 6
    assert report["compiled"] is False and report["variant"] == "eager"
    assert "InvalidCxxCompiler" in report["fallback_reason"] and "training continues eager" in report["fallback_reason"]
    assert report["break_even_steps"] is None
    assert "COMPILER FAILED, CONTINUING UNCOMPILED" in log
    assert "[sagemaker-tc] compiled=0" in log
    with tarfile.open(estimator.model_data.removeprefix("file://")) as tar:
        assert "model.safetensors" in tar.getnames()


@pytest.mark.slow
def test_strict_policy_fails_the_job_with_the_compiler_error(tmp_path, tiny_bert_dir):
    config = TrainingCompilerConfig(plan="regional", policy="strict", baseline_steps=0)
    estimator, channels = loop_job(tmp_path, tiny_bert_dir, config, _no_cxx(tmp_path))
    with pytest.raises(TrainingJobFailedError) as failed:
        estimator.fit(channels)
    assert failed.value.failure_reason.startswith("CompilerError: plan 'regional' failed and policy='strict'")
    assert "InvalidCxxCompiler" in failed.value.failure_reason


@pytest.mark.slow
def test_debug_mode_writes_graph_breaks_recompiles_and_compile_times(tmp_path):
    estimator = PyTorch(
        "graph_break_loop.py",
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        compiler_config=TrainingCompilerConfig(plan="regional", debug=True, baseline_steps=0, dynamic=False),
        output_path=str(tmp_path / "out"),
    )
    estimator.fit()
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        report = json.loads(tar.extractfile("compiler/report.json").read())
        graph_breaks = tar.extractfile("compiler/graph_breaks.txt").read().decode()
        recompiles = tar.extractfile("compiler/recompiles.txt").read().decode()
        compiles = json.loads(tar.extractfile("compiler/compiles.json").read())
        names = tar.getnames()
    assert report["graph_breaks"] > 0 and report["debug_files"]["graph_breaks"]
    assert "graph_break_loop.py" in graph_breaks and "graph_break" in graph_breaks  # reason and location
    assert "size mismatch" in recompiles or "expected 4, actual 6" in recompiles  # the guard that failed
    assert report["debug_files"]["recompile_reasons"]
    assert compiles and all(entry["seconds"] is not None for entry in compiles if entry["failure"] is None)
    assert any(name.startswith("compiler/torch_trace") for name in names)


def test_a_plan_that_failed_for_this_workload_is_not_tried_again_by_the_next_job():
    """The plan history an earlier job with the same workload left says model failed there (and so
    step, the same graph): the next auto job tries regional only, then chooses."""

    earlier = runtime_with_timer()
    earlier.attach(small_bert(), TrainingCompilerConfig(expected_steps=10_000))
    earlier.failed.record("model", "compiler_error", "InductorError: boom", 11)
    entry = earlier.history_entry("cold")
    assert entry["plans"]["model"] == {"failed": "compiler_error: InductorError: boom"}
    assert entry["plans"]["step"]["failed"].startswith("compiler_error")
    earlier.detach()

    runtime = runtime_with_timer()
    runtime.attach(small_bert(), TrainingCompilerConfig(expected_steps=10_000))
    runtime.schedule.workload.history = entry["plans"]
    # regional measures 0.99 s: model's prior (1.0 s / 1.05) would still beat it over 10,000 steps
    timeline = {"steps": 5 + 6 + 3, "eager": [(1.0, False)] * 14, "regional": [(9.0, True)] + [(0.99, False)] * 8}
    seen = drive(runtime, timeline)
    assert set(seen) == {"eager", "regional"}  # model and step were never tried
    assert runtime.decision["chosen"] == "regional"
    runtime.detach()
