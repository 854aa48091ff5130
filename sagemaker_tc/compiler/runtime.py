"""The compiled training step at run time: guarded regions, fallback to eager, and the policy's trials.

:meth:`CompilerRuntime.attach` compiles a model's regions in place (each repeated block, or the whole
model) by installing a guard as each region's compiled call — the slot ``Module.compile()`` fills
(:func:`sagemaker_tc._internals.set_compiled_call`), so ``state_dict()`` keys and hooks stay as they
are. One runtime per compiler session (:class:`sagemaker_tc.compiler.session.CompilerSession`).
Every call of a region goes through its guard, which:

- runs the region eagerly while the current variant is eager (baseline steps, an ``auto`` trial, or
  after a fallback);
- otherwise runs the compiled function; when that raises, reruns the call eagerly: if eager works,
  the compiler failed (``policy="fallback"``: every region switches to eager for the rest of the job,
  with a loud warning and the reason in the report; ``"strict"``: :class:`CompilerError`); if eager
  fails too, the error is the model's own and is raised as it is.

Compiler errors surface at the first compiled call (dynamo compiles lazily), so that is where they
are caught; the session has the backward graph compiled together with the forward
(:func:`sagemaker_tc._internals.compile_backward_with_forward`) so a failing backward compile is
caught there too instead of in ``loss.backward()``.

Between optimizer steps (:meth:`CompilerRuntime.on_step_end`) the runtime moves through its schedule:
``baseline_steps`` eager steps to measure the eager step time, then compiled; under
``policy="auto"`` also the optimizer's fused kernel, eager and compiled, keeping the fastest variant
by median steady step time.
"""

from __future__ import annotations

import logging
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler import optimizers
from sagemaker_tc.compiler.regions import CompilePlan, compile_kwargs, compile_region, describe, regions_for
from sagemaker_tc.compiler.shapes import BucketStats
from sagemaker_tc.compiler.steps import StepRecord, steady_median
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import CompilerError, CompilerFallbackWarning

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# Steps each trial of the auto policy runs: the first is warm-up, the rest are measured.
TRIAL_STEPS = 3
# The first compiled trial also pays the compile: two more steps. Trial lengths are fixed step counts,
# so every rank of a distributed job switches variants at the same step.
COMPILED_TRIAL_STEPS = 5


@dataclass(frozen=True)
class Variant:
    """One way to run the training step: compiled or eager, with the optimizer as the user built it
    or switched to its fused kernel."""

    compiled: bool
    fused: bool = False

    @property
    def label(self) -> str:
        """``eager``, ``compiled``, ``eager+fused`` or ``compiled+fused``."""
        return ("compiled" if self.compiled else "eager") + ("+fused" if self.fused else "")


EAGER = Variant(compiled=False)
COMPILED = Variant(compiled=True)


@dataclass
class _Phase:
    variant: Variant
    min_steps: int
    trial: bool  # measured for the auto decision


class _GuardedRegion:
    """Installed as a region's compiled call: compiled call with eager fallback."""

    def __init__(self, runtime: CompilerRuntime, module: torch.nn.Module, compiled: Any, static: Any) -> None:
        self.runtime = runtime
        self.module_ref = weakref.ref(module)
        self.compiled = compiled
        self.static = static

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module = self.module_ref()
        runtime = self.runtime
        if not runtime.compiled_active:
            return _internals.uncompiled_call(module)(*args, **kwargs)
        function = self.static if (runtime.static_training and module.training) else self.compiled
        try:
            return function(*args, **kwargs)
        except Exception as error:
            # Eager decides whose error it is: if the same call fails eagerly, it is the model's.
            result = _internals.uncompiled_call(module)(*args, **kwargs)
            runtime.compiler_failed(error)
            return result


class CompilerRuntime:
    """A session's compiled regions and policy state.

    Args:
        buckets: the session's bucketing statistics: while a bucketing collator feeds training,
            training calls run the static-shape compile (one graph per bucket).
    """

    def __init__(self, buckets: BucketStats | None = None) -> None:
        self.buckets = buckets or BucketStats()
        self._lock = threading.Lock()
        self.config: TrainingCompilerConfig | None = None
        self.plans: list[CompilePlan] = []
        self.compiled_active = False
        self.fallback_reason: str | None = None
        self.variant = EAGER
        self.chosen: Variant | None = None
        self._phases: list[_Phase] = []
        self._phase_records: list[StepRecord] = []
        self._measured: dict[Variant, float | None] = {}
        self._optimizers: weakref.WeakSet = weakref.WeakSet()
        self.attention: str | None = None

    # -- setup ---------------------------------------------------------------------------------
    def attach(self, model: torch.nn.Module, config: TrainingCompilerConfig) -> CompilePlan:
        """Compile ``model``'s regions in place under ``config`` and start the schedule.

        Regional when ``config.regional`` and the model has repeated blocks, else the whole model.
        A region that already has a compiled call (compiled before) is left as it is. The first
        attach in a process sets the schedule (baseline, trials); later ones add regions to it.

        Returns:
            What was compiled.
        """
        self.attention = _internals.attention_implementation(model) or self.attention
        kwargs = compile_kwargs(config)
        regions, regional = regions_for(model, config)
        for region in regions:
            if _internals.compiled_call(region) is not None:
                continue
            compiled = compile_region(region, **kwargs)
            # Bucketed training batches compile one static graph per bucket (see shapes.py).
            static = compiled
            if kwargs["dynamic"] is None:
                static = compile_region(region, **{**kwargs, "dynamic": False})
            _internals.set_compiled_call(region, _GuardedRegion(self, region, compiled, static))
        plan = describe(regions, regional)
        with self._lock:
            first = self.config is None
            self.config = config
            self.plans.append(plan)
            if first:
                self._phases = _schedule(config)
                self._phase_records = []
                self._apply(self._phases[0].variant if self._phases else COMPILED)
        return plan

    def track_optimizer(self, optimizer: Any) -> None:
        """Remember an optimizer the job steps (for fused trials under ``policy="auto"``)."""
        inner = optimizers.unwrap(optimizer)
        if optimizers.is_torch_optimizer(inner):
            self._optimizers.add(inner)

    @property
    def static_training(self) -> bool:
        """True when a bucketing collator feeds training (one static graph per bucket)."""
        return self.buckets.active

    # -- failure ---------------------------------------------------------------------------------
    def compiler_failed(self, error: BaseException) -> None:
        """A compiled call failed while the same call ran eagerly: fall back or raise by policy.

        Raises:
            CompilerError: under ``policy="strict"``, with ``error`` as the cause.
        """
        reason = f"{type(error).__name__}: {_first_lines(str(error))}"
        if self.config is not None and self.config.policy == "strict":
            raise CompilerError(f"the compiler failed and policy='strict' does not fall back: {reason}") from error
        with self._lock:
            already = self.fallback_reason is not None
            if not already:
                self.fallback_reason = f"compiler failed at the first compiled call; training continues eager: {reason}"
            self.compiled_active = False
            self.variant = Variant(compiled=False, fused=self.variant.fused)
        if not already:
            logger.error("COMPILER FAILED, CONTINUING UNCOMPILED (policy='fallback'): %s", reason)
            warnings.warn(f"sagemaker-tc: {self.fallback_reason}", CompilerFallbackWarning, stacklevel=2)

    # -- schedule ----------------------------------------------------------------------------------
    def on_step_end(self, record: StepRecord) -> None:
        """Advance the schedule after an optimizer step (called by the step recorder)."""
        with self._lock:
            if not self._phases:
                return
            self._phase_records.append(record)
            phase = self._phases[0]
            failed = phase.variant.compiled and self.fallback_reason is not None
            if not failed and len(self._phase_records) < phase.min_steps:
                return
            if phase.trial and not failed:
                self._measured[phase.variant] = steady_median(self._phase_records)
            self._phases.pop(0)
            self._phase_records = []
            while self._phases and not self._runnable(self._phases[0].variant):
                self._phases.pop(0)
            if self._phases:
                self._apply(self._phases[0].variant)
                return
            final = self._decide()
        logger.info("Compiler policy: running %s from here on (measured: %s)", final.label, self.trials())

    def _runnable(self, variant: Variant) -> bool:
        if variant.compiled and self.fallback_reason is not None:
            return False
        return not variant.fused or any(optimizers.switchable(o) for o in self._optimizers)

    def _decide(self) -> Variant:
        """Pick the final variant: under ``auto`` the fastest measured one, else compiled (unless it
        failed). Ranks agree on rank 0's choice."""
        config = self.config
        if config is not None and config.policy == "auto":
            measured = {v: s for v, s in self._measured.items() if s is not None and self._runnable(v)}
            choice = min(measured, key=measured.get) if measured else EAGER
            choice = _agree_across_ranks(choice)
        else:
            choice = COMPILED if self.fallback_reason is None else EAGER
        self.chosen = choice
        self._apply(choice)
        return choice

    def _apply(self, variant: Variant) -> None:
        compiled = variant.compiled and self.fallback_reason is None
        self.variant = Variant(compiled=compiled, fused=variant.fused)
        self.compiled_active = compiled
        for optimizer in list(self._optimizers):
            if variant.fused and optimizers.switchable(optimizer):
                optimizers.set_fused(optimizer, True)
            elif not variant.fused:
                optimizers.set_fused(optimizer, False)

    def current_label(self) -> str:
        """The variant the next step runs (a step record's label)."""
        return self.variant.label

    def trials(self) -> list[dict[str, Any]]:
        """Each measured trial, ``{"variant": label, "steady_step_seconds": s or None}``, including
        the one under way when the job ended (measured over the steps it had)."""
        measured = dict(self._measured)
        with self._lock:
            if self._phases and self._phases[0].trial and self._phase_records:
                measured.setdefault(self._phases[0].variant, steady_median(self._phase_records))
        return [{"variant": v.label, "steady_step_seconds": s} for v, s in measured.items()]

    def eager_step_seconds(self) -> float | None:
        """Median steady step of the eager baseline (seconds), None when not measured."""
        return self._measured.get(EAGER)

    def final_label(self) -> str:
        """The variant the job runs at the end (``chosen``, else the current one)."""
        return (self.chosen or self.variant).label


def _schedule(config: TrainingCompilerConfig) -> list[_Phase]:
    """The phases a job goes through, in order; the last one's variant stays (unless auto decides)."""
    phases = []
    if config.policy == "auto":
        phases.append(_Phase(EAGER, max(TRIAL_STEPS, config.baseline_steps), trial=True))
        phases.append(_Phase(Variant(compiled=False, fused=True), TRIAL_STEPS, trial=True))
        phases.append(_Phase(COMPILED, COMPILED_TRIAL_STEPS, trial=True))
        phases.append(_Phase(Variant(compiled=True, fused=True), TRIAL_STEPS, trial=True))
        return phases
    if config.baseline_steps > 0:
        phases.append(_Phase(EAGER, config.baseline_steps, trial=True))
    phases.append(_Phase(COMPILED, COMPILED_TRIAL_STEPS, trial=True))
    return phases


def _first_lines(text: str, limit: int = 600) -> str:
    """The first lines of an error message, without torch's "Set TORCHDYNAMO_VERBOSE=1 ..." advice."""
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("Set TORCHDYNAMO_")]
    return " ".join(lines[:3])[:limit] if lines else "(no message)"


def _agree_across_ranks(choice: Variant) -> Variant:
    """Rank 0's choice on every rank when torch.distributed is initialized (else ``choice``)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return choice
    box = [choice]
    dist.broadcast_object_list(box, src=0)
    return box[0]

