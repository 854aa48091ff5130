"""Which plan runs each optimizer step: the phases of a job, their measurements, ``plan="auto"``'s choice.

- An explicit ``plan``: ``baseline_steps`` eager steps (measured: the eager step for
  ``break_even_steps``), a trial of the plan (measured), then the plan for the rest of the job.
- ``plan="auto"``: :data:`EAGER_TRIAL_STEPS` eager steps, then, cheapest compile first, each plan
  whose estimate can still beat the best projection (:func:`sagemaker_tc.compiler.planner.next_trial`)
  for :data:`TRIAL_STEPS` real training steps, then the option with the lowest projected time for the
  rest of the job, eager included (:func:`~sagemaker_tc.compiler.planner.choose`).

Phase lengths are step counts, and each choice is rank 0's, broadcast to every rank, so all ranks
switch at the same step. Step times are read only when a phase ends (the caller's ``records()``:
one host sync on CUDA per decision, none per step). The runtime (:mod:`.runtime`) installs the plan
this schedule names; this module decides, and holds what the report shows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sagemaker_tc.compiler import capture_projection, planner
from sagemaker_tc.compiler.ranks import backend, process_group_size
from sagemaker_tc.compiler.steps import StepRecord, steady_median
from sagemaker_tc.config import TrainingCompilerConfig

logger = logging.getLogger("sagemaker_tc.compiler")

EAGER_TRIAL_STEPS = 5
"""Eager steps ``auto`` measures first: the first is warm-up, the median of the rest is the eager step."""
TRIAL_STEPS = 6
"""Steps of a compiled trial: the first compiles, later ones may compile a new bucket; the steady
step is the median of those that compiled nothing. A trial of the whole step recorded as CUDA graphs
runs longer, :data:`TRIAL_STEPS` at a time, until it replayed enough steps
(:mod:`.capture_projection`), and is measured by its replays."""


@dataclass
class Phase:
    """``plan`` for ``steps`` steps (None: the rest of the job); ``trial``: measured for the report
    and the decision."""

    plan: str
    steps: int | None
    trial: bool


class Schedule:
    """The phases of one job under ``config`` (module docstring).

    Args:
        config: the job's config.
        workload: what the planner's estimates depend on (device, modules per plan, history).
    """

    def __init__(self, config: TrainingCompilerConfig, workload: planner.Workload) -> None:
        self.config = config
        self.workload = workload
        self.auto = config.plan == "auto"
        self.phases = _phases(config)
        self.measured: dict[str, planner.Measured] = {}
        self.decision: dict[str, Any] | None = None
        self.chosen: str | None = None
        self.job_steps: int | None = None
        self.job_steps_source = "unknown"
        self.history_source: Callable[[], dict] | None = None
        self.steps = 0
        self.phase_start = 0
        self.invalid: dict[str, str] = {}
        self.model_device: Callable[[], Any] = lambda: None  # where the ranks' agreement is staged
        # buckets the job has seen (ShapePolicy.expected_buckets): a captured trial's pending captures
        self.expected_buckets: Callable[[], int | None] = lambda: None
        self.captured: dict[str, capture_projection.CapturedTrial] = {}

    def first_plan(self, default: str) -> str:
        """The plan the first step runs (``default`` when the config compiles nothing)."""
        return self.phases[0].plan if self.phases else default

    def set_job_length(self, steps: int | None, source: str) -> None:
        """The job's optimizer steps in all (``Trainer``'s ``max_steps``, ``expected_steps``)."""
        if steps is not None and steps > 0:
            self.job_steps, self.job_steps_source = int(steps), source

    def after_step(self, records: Callable[[], list[StepRecord]], available: Callable[[], Sequence[str]]) -> str | None:
        """Count a finished step; when it ends a phase, measure it and return the plan to run next
        (``available()``: the compiled plans ``auto`` may try, asked only then). None: keep the
        current plan. Between phase ends this is a counter and a comparison: nothing on the step's
        path walks the model or reads a step time."""
        self.steps += 1
        if not self.phases or self.phases[0].steps is None or self.steps - self.phase_start < self.phases[0].steps:
            return None
        if self._extend_captured_trial(records):
            return None
        phase = self.phases.pop(0)
        if phase.trial:
            self._measure(phase, records())
        self.phase_start = self.steps
        if self.auto and not self.phases:
            self._plan_next(available())
        return self.phases[0].plan if self.phases else self.chosen

    def resume(self, saved: dict[str, Any], available: Sequence[str]) -> bool:
        """Run the plan an interrupted job ran (``saved``: the plan file in its checkpoint,
        :func:`sagemaker_tc.checkpoints.plan_file`) from the first step, with no eager baseline
        and no trials (it measured those); :attr:`decision` then says ``source: "resumed"``. Only
        when the saved requested plan is this job's; for ``auto``, the plan ``auto`` chose, when it
        is one this job can run (``available``, or eager). Rank 0's file, on every rank (a
        collective). Returns False (and changes nothing) when it does not apply."""
        saved = agree_across_ranks(saved, self.model_device())
        requested = saved.get("requested")
        chosen = (saved.get("decision") or {}).get("chosen") if self.auto else requested
        runnable = chosen == planner.EAGER or chosen in available or not self.auto
        if requested != self.config.plan or not chosen or not runnable or not self.config.compiles:
            logger.info("Not resuming the compile plan of the checkpoint (%r): not one this job runs", chosen)
            return False
        self.phases, self.chosen = [Phase(chosen, None, trial=False)], chosen
        earlier = saved.get("decision") or {}
        self.decision = {
            **earlier,
            "chosen": chosen,
            "source": "resumed",
            "reason": f"{chosen}: the plan the interrupted job ran (resumed from its checkpoint; no new trials)",
        }
        logger.info("COMPILE PLAN: %s", self.decision["reason"])
        return True

    def invalidate(self, plan: str, reason: str) -> None:
        """``plan``'s measurements in this job are not to be trusted (it failed, or hit a recompile
        limit and ran partly eager): never timed, never chosen (the first reason is kept)."""
        self.invalid.setdefault(plan, reason)
        if plan in self.measured:
            self.measured[plan] = planner.Measured(plan, None)

    def _extend_captured_trial(self, records: Callable[[], list[StepRecord]]) -> bool:
        """A trial of the whole step recorded that replayed too few steps runs :data:`TRIAL_STEPS`
        more (:func:`.capture_projection.wants_more_steps`). No agreement across ranks is needed: the
        whole step is recorded in one-process jobs only (``captured_trainer.unmet_preconditions``), so
        with several ranks no step is marked and every rank answers False."""
        phase = self.phases[0]
        if not phase.trial or phase.plan == planner.EAGER:
            return False
        ran = [r for r in records()[self.phase_start : self.steps] if r.variant == phase.plan]
        more = capture_projection.wants_more_steps(ran, phase.steps or 0)
        if more:
            phase.steps = (phase.steps or 0) + TRIAL_STEPS
            logger.info(
                "Compile plan trial: %s replayed too few recorded steps; %d steps more", phase.plan, TRIAL_STEPS
            )
        return more

    def _measure(self, phase: Phase, records: list[StepRecord]) -> None:
        ran = [r for r in records[self.phase_start : self.steps] if r.variant == phase.plan]
        self.measured[phase.plan] = self._measured(phase.plan, ran)

    def _measured(self, plan: str, ran: list[StepRecord]) -> planner.Measured:
        """``plan``'s trial steps ``ran`` measured: a captured trial by its replays, with the captures
        still to pay (:mod:`.capture_projection`); any other by its steady steps."""
        compiling = sum(1 for r in ran if r.compiled_during)
        if not capture_projection.is_captured(ran):
            steady = None if plan in self.invalid else steady_median(ran)
            return planner.Measured(plan, steady, self._compile_seconds(ran, steady), compiling)
        trial = capture_projection.read_trial(ran)
        self.captured[plan] = trial
        steady = None if plan in self.invalid else trial.steady_step_seconds
        pending = trial.pending_seconds(self.expected_buckets())
        return planner.Measured(plan, steady, self._compile_seconds(ran, steady), compiling, pending)

    def _compile_seconds(self, ran: list[StepRecord], steady: float | None) -> float:
        """What the compiling steps of ``ran`` took beyond a steady step: the plan's own steady step,
        else (every step compiled, or the trial is invalid) the eager step, else nothing subtracted;
        never 0 for a trial that compiled (the report's top-level figure counts the same steps)."""
        eager = self.measured.get(planner.EAGER)
        reference = steady or (eager.steady_step_seconds if eager is not None else None) or 0.0
        return sum(max(0.0, r.seconds - reference) for r in ran if r.compiled_during)

    def _plan_next(self, available: Sequence[str]) -> None:
        """``auto``: the next trial, or the final choice: rank 0's, on every rank (one broadcast, so
        ranks whose measurements differ still take the same branch)."""
        remaining = (self.job_steps or planner.ASSUMED_JOB_STEPS) - self.steps
        candidates = [plan for plan in available if plan not in self.measured and plan not in self.invalid]
        if self.history_source is not None and not self.workload.history:
            self.workload.history = self.history_source() or {}
        failed_before = {plan for plan, past in self.workload.history.items() if (past or {}).get("failed")}
        candidates = [plan for plan in candidates if plan not in failed_before]  # failed for this workload
        measured = list(self.measured.values())
        plan, projections = planner.next_trial(measured, candidates, self.workload, remaining)
        choice, final = planner.choose(measured, remaining)
        plan, choice = agree_across_ranks((plan, choice), self.model_device())
        if plan is not None:
            self.phases.append(Phase(plan, TRIAL_STEPS, trial=True))
            logger.info("Compile plan trial: %s next (projections: %s)", plan, describe(projections))
            return
        self.chosen = choice
        self._record_decision(final + [p for p in projections if p.basis != "measured"], remaining)

    def _record_decision(self, projections: list[planner.Projection], remaining: int) -> None:
        by_plan = sorted({p.plan: p for p in projections}.values(), key=lambda p: p.seconds)
        assumed = f"assumed {planner.ASSUMED_JOB_STEPS}"
        self.decision = {
            "chosen": self.chosen,
            "job_steps": self.job_steps,
            "job_steps_source": self.job_steps_source if self.job_steps else assumed,
            "decided_at_step": self.steps,
            "remaining_steps": remaining,
            "projections": [p.to_dict() for p in by_plan],
            "source": "measured",
            "reason": f"{self.chosen} for the remaining {remaining} steps: lowest projected time ({describe(by_plan)})",
        }
        logger.info("COMPILE PLAN: %s", self.decision["reason"])

    def trials(self, records: list[StepRecord]) -> list[dict[str, Any]]:
        """Each measured option: ``{"plan", "variant", "steady_step_seconds", "compile_seconds"}``,
        including a trial under way when the job ended (measured over the steps it had)."""
        measured = dict(self.measured)
        if self.phases and self.phases[0].trial and self.steps > self.phase_start:
            plan = self.phases[0].plan
            ran = [r for r in records[self.phase_start : self.steps] if r.variant == plan]
            measured.setdefault(plan, self._measured(plan, ran))
        expected = self.expected_buckets() if self.captured else None
        return [
            {
                "plan": m.plan,
                "variant": "eager" if m.plan == planner.EAGER else "compiled",
                "steady_step_seconds": m.steady_step_seconds,
                "compile_seconds": m.compile_seconds if m.plan != planner.EAGER else None,
                "invalid": self.invalid.get(m.plan),
                **({"capture": self.captured[m.plan].to_dict(expected)} if m.plan in self.captured else {}),
            }
            for m in measured.values()
        ]

    def eager_step_seconds(self) -> float | None:
        """Median steady step of the eager phase (seconds), None when not measured."""
        measured = self.measured.get(planner.EAGER)
        return measured.steady_step_seconds if measured else None


def _phases(config: TrainingCompilerConfig) -> list[Phase]:
    plan = config.plan
    if not config.compiles:
        return []
    if plan == "auto":
        return [Phase(planner.EAGER, max(EAGER_TRIAL_STEPS, config.baseline_steps), trial=True)]
    baseline = [Phase(planner.EAGER, config.baseline_steps, trial=True)] if config.baseline_steps else []
    return [*baseline, Phase(plan, TRIAL_STEPS, trial=True), Phase(plan, None, trial=False)]


def describe(projections: Sequence[planner.Projection]) -> str:
    """``"eager 12.0 s (measured), regional 14.2 s (estimate (prior))"``."""
    return ", ".join(f"{p.plan} {p.seconds:.1f} s ({p.basis})" for p in projections) or "none"


def agree_across_ranks(choice: Any, device: Any = None) -> Any:
    """Rank 0's ``choice`` (any picklable value) on every rank when torch.distributed is initialized
    (else ``choice``). A collective: every rank must call it at the same step.

    Args:
        choice: the value to agree on.
        device: the ``torch.device`` the model trains on. On a backend other than gloo (NCCL) the
            object is staged there: left to itself ``broadcast_object_list`` stages it on the
            *current* CUDA device, GPU 0 on every rank of a script that never calls
            ``torch.cuda.set_device`` (torch's note on the function). gloo stages on the host.
    """
    import torch.distributed as dist

    if process_group_size() == 1:
        return choice
    box = [choice]
    on_host = device is None or getattr(device, "type", "cpu") == "cpu" or backend() == "gloo"
    dist.broadcast_object_list(box, src=0, device=None if on_host else device)
    return box[0]
