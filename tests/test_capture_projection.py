"""A trial of the whole step recorded as CUDA graphs is measured by its replays and projects the
recordings still to pay (sagemaker_tc/compiler/capture_projection.py; issue 42 point 4): the step
timer's marks, the figures read from given step times, the schedule's longer trial, the choices made
from given timings, and the gate that keeps ``auto`` from recording without a GPU result."""

from __future__ import annotations

import pytest

from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler import capture_projection, planner
from sagemaker_tc.compiler.capture_projection import MAX_TRIAL_STEPS, read_trial
from sagemaker_tc.compiler.schedule import TRIAL_STEPS, Schedule
from sagemaker_tc.compiler.shapes import BucketStats, ShapePolicy
from sagemaker_tc.compiler.steps import StepRecord, StepTimer


def _record(seconds, capture=None, bucket=None, compiled=False, variant="step"):
    return StepRecord(seconds, 8, compiled, variant, capture, bucket)


def test_the_timer_keeps_what_the_whole_step_did_on_its_step():
    timer = StepTimer(use_cuda=False)
    timer.mark_capture("replayed", ("b", 16))  # outside a step: ignored
    timer.begin_step()
    timer.end_step(8)
    timer.begin_step()
    timer.mark_capture("recorded", ("b", 32))
    timer.end_step(8)
    timer.begin_step()  # a new step starts unmarked
    timer.end_step(8)
    records = timer.flush()
    assert [(r.capture, r.bucket) for r in records] == [(None, None), ("recorded", ("b", 32)), (None, None)]


def test_a_captured_trial_is_read_by_its_replays_and_a_buckets_recording_cost():
    records = [
        _record(9.0, compiled=True),  # the Trainer's own first step: the plan's compile
        _record(3.0, "warm-up", 16, compiled=True),  # the first bucket's compile: the plan's, paid once
        _record(1.5, "warm-up", 16),
        _record(2.0, "recorded", 16),
        _record(1.0, "replayed", 16),
        _record(2.5, "warm-up", 32),
        _record(1.5, "warm-up", 32),
        _record(2.0, "recorded", 32),
        _record(1.2, "replayed", 32),
        _record(0.8, "replayed", 16),
        _record(4.0, "replayed", 32, compiled=True),  # compiled: not a steady replay
    ]
    trial = read_trial(records)
    assert trial.replays == 3 and trial.steady_step_seconds == 1.0
    assert trial.buckets_met == 2
    # bucket 16: 0 (compile) + 0.5 + 1.0 = 1.5; bucket 32: 1.5 + 0.5 + 1.0 = 3.0; median 2.25
    assert trial.capture_seconds_per_bucket == pytest.approx(2.25)
    assert trial.pending_seconds(5) == pytest.approx(3 * 2.25)
    assert trial.pending_seconds(2) == 0.0 and trial.pending_seconds(None) == 0.0
    assert trial.to_dict(5)["pending_seconds"] == pytest.approx(6.75)


def test_a_trial_without_replays_has_no_steady_step_and_no_cost():
    trial = read_trial([_record(3.0, "warm-up", 16, compiled=True), _record(1.5, "warm-up", 16)])
    assert trial.steady_step_seconds is None and trial.replays == 0
    assert trial.capture_seconds_per_bucket == 0.0


def test_more_steps_only_for_a_captured_trial_short_of_replays():
    few = [_record(2.0, "warm-up", 16), _record(1.0, "replayed", 16)]
    assert capture_projection.wants_more_steps(few, TRIAL_STEPS)
    assert not capture_projection.wants_more_steps(few, MAX_TRIAL_STEPS)
    assert not capture_projection.wants_more_steps([_record(1.0), _record(1.0)], TRIAL_STEPS)  # not captured
    enough = few + [_record(1.0, "replayed", 16), _record(1.0, "replayed", 16)]
    assert not capture_projection.wants_more_steps(enough, TRIAL_STEPS)


def _run_schedule(schedule, outcomes, seconds=1.0):
    """Drive ``schedule`` through steps whose records carry ``outcomes`` (the plan the schedule names,
    each step's capture outcome); returns the plans it switched to."""
    records: list[StepRecord] = []
    plan = schedule.first_plan("eager")
    switches = []
    for outcome in outcomes:
        capture, bucket = outcome if outcome else (None, None)
        records.append(StepRecord(seconds if capture != "warm-up" else 3 * seconds, 8, False, plan, capture, bucket))
        nxt = schedule.after_step(lambda: records, lambda: ["step"])
        if nxt is not None:
            switches.append((len(records), nxt))
            plan = nxt
    return switches


def test_an_explicit_step_trial_runs_on_until_it_replayed_enough():
    schedule = Schedule(TrainingCompilerConfig(plan="step", baseline_steps=0), planner.Workload("cuda", {}))
    # three buckets, each two warm-ups and a recording, then replays: 9 steps before the first replay
    warm = [(kind, b) for b in (16, 32, 48) for kind in ("warm-up", "warm-up", "recorded")]
    outcomes = [None] + warm + [("replayed", 16)] * 10
    switches = _run_schedule(schedule, outcomes)
    # 6 steps: no replay; 12: two; 18: eight, enough: two extensions of TRIAL_STEPS, then the plan
    assert switches == [(3 * TRIAL_STEPS, "step")]
    trial = schedule.trials([])[0]
    assert trial["plan"] == "step" and trial["steady_step_seconds"] == 1.0
    assert trial["capture"]["replays"] == 8 and trial["capture"]["buckets_met"] == 3


def test_a_trial_that_keeps_meeting_new_buckets_ends_at_the_cap():
    schedule = Schedule(TrainingCompilerConfig(plan="step", baseline_steps=0), planner.Workload("cuda", {}))
    outcomes = [("warm-up", n) for n in range(MAX_TRIAL_STEPS + 5)]
    switches = _run_schedule(schedule, outcomes)
    assert switches == [(MAX_TRIAL_STEPS, "step")]
    assert schedule.measured["step"].steady_step_seconds is None  # no replay: nothing to trust


def test_auto_keeps_a_captured_plan_only_where_its_pending_recordings_pay():
    fast = planner.Measured("step", 0.010, compile_seconds=30.0, pending_seconds=40.0)
    eager = planner.Measured("eager", 0.025)
    assert planner.choose([eager, fast], remaining_steps=1000)[0] == "eager"  # 50 s vs 25 s
    assert planner.choose([eager, fast], remaining_steps=10000)[0] == "step"  # 140 s vs 250 s
    slower = planner.Measured("step", 0.030, pending_seconds=0.0)
    assert planner.choose([eager, slower], remaining_steps=10**6)[0] == "eager"  # never slower than eager


def test_the_schedules_measurement_adds_the_buckets_the_trial_did_not_meet():
    schedule = Schedule(TrainingCompilerConfig(plan="step", baseline_steps=0), planner.Workload("cuda", {}))
    schedule.expected_buckets = lambda: 4
    outcomes = [None, ("warm-up", 16), ("warm-up", 16), ("recorded", 16)] + [("replayed", 16)] * 8
    _run_schedule(schedule, outcomes)
    measured = schedule.measured["step"]
    # the first bucket's warm-ups are not compiles here: 2 + 2 + 0 = 4 s beyond a 1 s replay
    assert measured.pending_seconds == pytest.approx(3 * 4.0)
    assert schedule.trials([])[0]["capture"]["buckets_expected"] == 4


def test_auto_records_the_whole_step_only_with_a_gpu_result_for_it(monkeypatch):
    assert not planner.whole_step_under_auto("cuda")  # no committed result backs it today
    evidence = planner.GpuEvidence(
        "step", "benchmarks/results/x.json", "bert-base-uncased", "sagemaker-tc", "eager-tuned", 1.6
    )
    monkeypatch.setitem(planner.GPU_EVIDENCE, "step", evidence)
    assert planner.whole_step_under_auto("cuda") and not planner.whole_step_under_auto("cpu")
    monkeypatch.setitem(planner.GPU_EVIDENCE, "step", planner.GpuEvidence("step", "x", "m", "v", "b", 0.9))
    assert not planner.whole_step_under_auto("cuda")


def test_the_whole_step_is_named_under_auto_only_with_that_result(monkeypatch):
    from sagemaker_tc.compiler.parts import whole_step_named

    auto = TrainingCompilerConfig(plan="auto")
    assert not whole_step_named(auto, "cuda")
    evidence = planner.GpuEvidence("step", "x", "m", "sagemaker-tc", "eager-tuned", 1.6)
    monkeypatch.setitem(planner.GPU_EVIDENCE, "step", evidence)
    assert whole_step_named(auto, "cuda") and not whole_step_named(auto, "cpu")
    assert whole_step_named(TrainingCompilerConfig(plan="step"), "cpu")
    assert not whole_step_named(TrainingCompilerConfig(plan="step", mode="reduce-overhead"), "cuda")


def test_expected_buckets_count_the_lengths_the_job_met():
    policy = ShapePolicy([16, 32, 64], stats=BucketStats())
    assert policy.expected_buckets() is None  # nothing met yet
    for length in (5, 12, 20, 30):
        policy.bucket({"input_ids": _ids(length), "attention_mask": _ids(length)})
    assert policy.expected_buckets() == 2  # 16 and 32
    assert ShapePolicy(None).expected_buckets() is None


def _ids(length):
    import torch

    return torch.ones(2, length, dtype=torch.long)
