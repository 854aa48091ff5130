"""A trial of the whole step recorded as CUDA graphs, measured by its replays (issue 42, point 4).

A plan that records the whole step (:mod:`.captured_step`) pays three costs before it runs steady:
its compile, and for every bucket key two uncaptured warm-up steps and a recording. A trial of
:data:`~.schedule.TRIAL_STEPS` steps would time mostly those, not the replays the job runs for the
rest of its steps. So a captured trial is read apart (pure, no torch):

- its **steady step** is the median of the replayed steps that compiled nothing;
- its **capture cost per bucket** is what a bucket's warm-up and recording steps took beyond that
  steady step, the median over the buckets the trial met; the compiling steps of the first bucket
  are left out (the plan's own compile, paid once), a later bucket's recompiles count;
- its **pending seconds** are that cost for each bucket the job has seen and the trial has not met
  yet (:meth:`~.shapes.ShapePolicy.expected_buckets`): the projection for the rest of the job adds
  them to ``remaining steps x steady step``.

A trial that replayed fewer than :data:`MIN_REPLAYS` steps is extended by the schedule, up to
:data:`MAX_TRIAL_STEPS` steps in all (:func:`wants_more_steps`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sagemaker_tc.compiler.steps import StepRecord

MIN_REPLAYS = 3
"""Replayed steps a captured trial needs before its steady step is trusted."""
MAX_TRIAL_STEPS = 36
"""A captured trial ends after this many steps even with fewer replays (a job whose batches keep
opening new buckets): it is then measured over what it has, or not at all."""


@dataclass(frozen=True)
class CapturedTrial:
    """What a trial of a captured plan measured.

    Attributes:
        replays: replayed steps that compiled nothing (the steady steps).
        steady_step_seconds: their median, seconds (None without one).
        buckets_met: bucket keys the trial recorded or warmed up.
        capture_seconds_per_bucket: a bucket's warm-ups and recording beyond the steady step,
            seconds, median over the buckets met (0.0 when not measurable).
    """

    replays: int
    steady_step_seconds: float | None
    buckets_met: int
    capture_seconds_per_bucket: float

    def pending_seconds(self, expected_buckets: int | None) -> float:
        """Capture seconds still to pay: one capture for each of ``expected_buckets`` (the buckets the
        job has seen; None: unknown, nothing projected) beyond those the trial met."""
        if expected_buckets is None:
            return 0.0
        return max(0, expected_buckets - self.buckets_met) * self.capture_seconds_per_bucket

    def to_dict(self, expected_buckets: int | None) -> dict[str, Any]:
        """The report's ``capture`` fields of a trial."""
        return {
            "replays": self.replays,
            "buckets_met": self.buckets_met,
            "buckets_expected": expected_buckets,
            "capture_seconds_per_bucket": self.capture_seconds_per_bucket,
            "pending_seconds": self.pending_seconds(expected_buckets),
        }


def is_captured(records: Sequence[StepRecord]) -> bool:
    """True when any of ``records`` ran the whole step through its recordings."""
    return any(record.capture is not None for record in records)


def read_trial(records: Sequence[StepRecord]) -> CapturedTrial:
    """The captured trial ``records`` (one plan's steps of one trial, in order) measured, module
    docstring. Steps that ran outside the recordings (the job's first step, an epoch's short last
    batch) count toward neither the steady step nor a bucket's cost."""
    replayed = [r.seconds for r in records if r.capture == "replayed" and not r.compiled_during]
    steady = statistics.median(replayed) if replayed else None
    capturing = [r for r in records if r.capture in ("warm-up", "recorded")]
    first_bucket = capturing[0].bucket if capturing else None
    per_bucket: dict[Any, float] = {}
    for record in capturing:
        plan_compile = record.compiled_during and record.bucket == first_bucket
        extra = 0.0 if plan_compile or steady is None else max(0.0, record.seconds - steady)
        per_bucket[record.bucket] = per_bucket.get(record.bucket, 0.0) + extra
    cost = statistics.median(per_bucket.values()) if per_bucket and steady is not None else 0.0
    return CapturedTrial(len(replayed), steady, len(per_bucket), cost)


def wants_more_steps(records: Sequence[StepRecord], steps_so_far: int) -> bool:
    """True when a captured trial of ``steps_so_far`` steps (``records``: its plan's steps) should
    run longer: fewer than :data:`MIN_REPLAYS` replays and under :data:`MAX_TRIAL_STEPS` steps."""
    if steps_so_far >= MAX_TRIAL_STEPS or not is_captured(records):
        return False
    return read_trial(records).replays < MIN_REPLAYS
