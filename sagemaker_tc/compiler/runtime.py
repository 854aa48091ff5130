"""The compiled training step at run time: which plan runs each step, measured and decided on the job.

:meth:`CompilerRuntime.attach` prepares the compile plans on a model (:mod:`.plans`: ``regional``,
``model``, ``step``; each compiled in place, lazily) and sets the schedule. Between optimizer steps
(:meth:`CompilerRuntime.after_step`) the runtime moves through it:

- an explicit ``plan``: ``baseline_steps`` eager steps (the eager step for ``break_even_steps``),
  then the plan for the rest of the job;
- ``plan="auto"``: eager steps first (at least 5), then, cheapest compile first, each plan whose
  estimate can still beat the best projection (:mod:`.planner`), for a trial of
  :data:`TRIAL_STEPS` real training steps; then the option with the lowest projected time for the
  rest of the job, eager included, for good. Phase lengths are step counts and decisions are rank
  0's, broadcast, so every rank switches at the same step.

Step times are read at phase ends only (:meth:`StepTimer.flush`: one host sync per decision, none
per step). A compiled call that raises is rerun eagerly: if eager works the compiler failed
(``policy="fallback"``: every compiled plan is dropped, the job continues eager with a loud warning
and the reason in the report; ``"strict"``: :class:`CompilerError`); if eager fails too, the error
is the model's own. The shape policy (:class:`~sagemaker_tc.compiler.shapes.ShapePolicy`) pads
training batches to bucket lengths only while a compiled plan runs: eager never pads.
"""

from __future__ import annotations

import logging
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.optimizers import StepPlanOptimizer
from sagemaker_tc.compiler.plans import PlanSlots, build_slots, leaf_modules, plan_modules
from sagemaker_tc.compiler.regions import CompilePlan, compile_kwargs
from sagemaker_tc.compiler.shape_policy import ShapePolicy
from sagemaker_tc.compiler.shapes import BucketStats
from sagemaker_tc.compiler.steps import StepTimer, steady_median
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import CompilerError, CompilerFallbackWarning

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("sagemaker_tc.compiler")

EAGER_TRIAL_STEPS = 5
"""Eager steps ``auto`` measures first: the first is warm-up, the median of the rest is the eager step."""
TRIAL_STEPS = 6
"""Steps of a compiled trial: the first compiles, later ones may compile a new bucket; the steady
step is the median of those that compiled nothing."""


@dataclass
class _Phase:
    plan: str
    steps: int | None  # None: the rest of the job
    trial: bool


@dataclass
class _Attached:
    model: Any
    slots: dict[str, PlanSlots]
    hook: Any = None  # the forward pre-hook while the model itself is not compiled


class CompilerRuntime:
    """A session's compile plans, schedule and measurements.

    Args:
        buckets: the session's bucketing statistics.
        timer: the session's step timer (phases are measured from its records).
    """

    def __init__(self, buckets: BucketStats | None = None, timer: StepTimer | None = None) -> None:
        self.buckets = buckets or BucketStats()
        self.timer = timer
        self._lock = threading.Lock()
        self.config: TrainingCompilerConfig | None = None
        self.plans: list[CompilePlan] = []
        self.attention: str | None = None
        self.shapes: ShapePolicy | None = None
        self.active = planner.EAGER
        self.fallback_reason: str | None = None
        self.chosen: str | None = None
        self.decision: dict[str, Any] | None = None
        self.job_steps: int | None = None
        self.job_steps_source = "unknown"
        self.workload: planner.Workload | None = None
        self.device = "cpu"
        self.forwards_per_step = 1
        self._attached: list[_Attached] = []
        self._listeners: list[Any] = []
        self._phases: list[_Phase] = []
        self._phase_start = 0
        self._steps = 0
        self._measured: dict[str, planner.Measured] = {}
        self._projections: list[dict[str, Any]] = []
        self._optimizers: weakref.WeakSet = weakref.WeakSet()
        self._optimizer_plans: dict[int, StepPlanOptimizer] = {}
        self.optimizer_kind: str | None = None
        self.history_source: Any = None  # () -> {plan: measured in an earlier job}, set by the session
        self.device_name = "cpu"

    # -- setup ---------------------------------------------------------------------------------
    def attach(self, model: torch.nn.Module, config: TrainingCompilerConfig) -> CompilePlan:
        """Prepare ``model``'s compile plans under ``config`` (compiled lazily, in place) and, on the
        first attach, set the schedule. Returns what the configured plan compiles (``auto``: the
        ``regional`` plan's regions, the cheapest)."""
        self.attention = _internals.attention_implementation(model) or self.attention
        first = self.config is None
        self.config = config
        if first:
            self.device, self.device_name = _device(model)
            self.shapes = ShapePolicy(config.buckets, model, self.buckets)
        attached = _Attached(model, {})
        if config.compiles:
            for plan in self._candidates(config):
                attached.slots[plan] = self._build(model, plan, config)
        self._attached.append(attached)
        shown = config.resolved_plan if config.resolved_plan != "auto" else "regional"
        regions = plan_modules(model, shown)
        regional = shown == "regional" and regions[0] is not model
        plan = CompilePlan(
            regional=regional, block_class=type(regions[0]).__name__ if regional else None, num_regions=len(regions)
        )
        self.plans.append(plan)
        if first:
            self.workload = planner.Workload(
                device=self.device, modules={p: _modules(model, p) for p in planner.COMPILED_PLANS}
            )
            self._phases = self._schedule(config)
        self._activate(self._phases[0].plan if self._phases else self.active)
        return plan

    def add_model_call_listener(self, listener: Any) -> None:
        """Call ``listener(module, args, kwargs)`` before each call of an attached model (outside any
        compiled graph; the plain-loop step watcher)."""
        self._listeners.append(listener)

    def track_optimizer(self, optimizer: Any) -> None:
        """Remember an optimizer the job steps (the ``step`` plan switches its update)."""
        from sagemaker_tc.compiler.optimizers import is_torch_optimizer, unwrap

        inner = unwrap(optimizer)
        if is_torch_optimizer(inner) and inner not in self._optimizers:
            self._optimizers.add(inner)
            if self.active == "step":
                self._enter_step_optimizer(inner)

    def set_job_length(self, steps: int | None, source: str) -> None:
        """The job's optimizer steps in all (``Trainer``'s ``max_steps``, ``expected_steps``)."""
        if steps is not None and steps > 0:
            self.job_steps, self.job_steps_source = int(steps), source

    def _candidates(self, config: TrainingCompilerConfig) -> list[str]:
        plan = config.resolved_plan
        return list(planner.COMPILED_PLANS) if plan == "auto" else [plan]

    def _schedule(self, config: TrainingCompilerConfig) -> list[_Phase]:
        plan = config.resolved_plan
        if not config.compiles:
            return []
        if plan == "auto":
            return [_Phase(planner.EAGER, max(EAGER_TRIAL_STEPS, config.baseline_steps), trial=True)]
        phases = [_Phase(planner.EAGER, config.baseline_steps, trial=True)] if config.baseline_steps else []
        return [*phases, _Phase(plan, TRIAL_STEPS, trial=True), _Phase(plan, None, trial=False)]

    def _build(self, model: Any, plan: str, config: TrainingCompilerConfig) -> PlanSlots:
        kwargs = compile_kwargs(config)
        static = {**kwargs, "dynamic": False}
        if plan == "step" and self.device == "cuda" and kwargs["mode"] is None:
            static["mode"] = "reduce-overhead"  # CUDA graphs on bucketed (static) shapes
        return build_slots(
            model,
            plan,
            kwargs,
            self._static_shapes,
            self.compiler_failed,
            self._before_model_call,
            static_kwargs=static,
        )

    # -- per call and per step ----------------------------------------------------------------------
    def _static_shapes(self) -> bool:
        """Training calls have bucketed (static) shapes now: padded by the policy or a collator."""
        padded_by_policy = self.shapes is not None and self.shapes.padding
        return padded_by_policy or (self.buckets.active and self.pads_training_batches)

    @property
    def pads_training_batches(self) -> bool:
        """True while a compiled plan runs (eager never pads)."""
        return self.active != planner.EAGER

    def _before_model_call(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        for listener in self._listeners:
            listener(module, args, kwargs)
        if module.training and self.shapes is not None:
            kwargs = self.shapes.apply(kwargs)
        return args, kwargs

    def _pre_hook(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        new_args, new_kwargs = self._before_model_call(module, args, kwargs)
        return (new_args, new_kwargs) if new_kwargs is not kwargs or new_args is not args else None

    def current_label(self) -> str:
        """The plan the next step runs (a step record's label)."""
        return self.active

    def after_step(self) -> None:
        """Count an optimizer step and move through the schedule (called by the step timer after
        each step; reads step times only when a phase ends)."""
        with self._lock:
            self._steps += 1
            if not self._phases or self._phases[0].steps is None:
                return
            if self._steps - self._phase_start < self._phases[0].steps:
                return
            self._end_phase()

    def _end_phase(self) -> None:
        phase = self._phases.pop(0)
        if phase.trial:
            self._measure(phase)
        self._phase_start = self._steps
        if self.config is not None and self.config.resolved_plan == "auto" and not self._phases:
            self._plan_next()
        next_plan = self._phases[0].plan if self._phases else (self.chosen or self.active)
        if next_plan != planner.EAGER and self.fallback_reason is not None:
            next_plan = planner.EAGER
        self._activate(next_plan)

    def _measure(self, phase: _Phase) -> None:
        records = self.timer.flush() if self.timer is not None else []
        ran = [r for r in records[self._phase_start : self._steps] if r.variant == phase.plan]
        failed = phase.plan != planner.EAGER and self.fallback_reason is not None
        steady = None if failed else steady_median(ran)
        compile_seconds = sum(max(0.0, r.seconds - steady) for r in ran if r.compiled_during) if steady else 0.0
        self._measured[phase.plan] = planner.Measured(phase.plan, steady, compile_seconds)

    def _plan_next(self) -> None:
        """``auto``: the next trial, or the final choice (rank 0's, on every rank)."""
        remaining = (self.job_steps or planner.ASSUMED_JOB_STEPS) - self._steps
        candidates = [p for p in self._available_plans() if p not in self._measured]
        if self.history_source is not None and not self.workload.history:
            self.workload.history = self.history_source() or {}
        plan, projections = (None, [])
        if self.fallback_reason is None:
            plan, projections = planner.next_trial(list(self._measured.values()), candidates, self.workload, remaining)
        if plan is not None:
            plan = _agree_across_ranks(plan)
            self._projections = [p.to_dict() for p in projections]
            self._phases.append(_Phase(plan, TRIAL_STEPS, trial=True))
            logger.info("Compile plan trial: %s next (projections: %s)", plan, _describe(projections))
            return
        choice, final = planner.choose(list(self._measured.values()), remaining)
        self.chosen = _agree_across_ranks(choice)
        self._record_decision(final + [p for p in projections if p.basis != "measured"], remaining)

    def _available_plans(self) -> list[str]:
        plans = [p for p in planner.COMPILED_PLANS if any(p in a.slots for a in self._attached)]
        if "regional" in plans and all(plan_modules(a.model, "regional") == [a.model] for a in self._attached):
            plans.remove("regional")  # no repeated blocks: regional would compile the whole model again
        return plans

    def _record_decision(self, projections: list, remaining: int) -> None:
        by_plan = {p.plan: p for p in projections}
        self.decision = {
            "chosen": self.chosen,
            "job_steps": self.job_steps,
            "job_steps_source": self.job_steps_source if self.job_steps else f"assumed {planner.ASSUMED_JOB_STEPS}",
            "decided_at_step": self._steps,
            "remaining_steps": remaining,
            "projections": [p.to_dict() for p in sorted(by_plan.values(), key=lambda p: p.seconds)],
            "reason": _reason(self.chosen, list(by_plan.values()), remaining),
        }
        logger.info("COMPILE PLAN: %s", self.decision["reason"])

    # -- activation ---------------------------------------------------------------------------------
    def _activate(self, plan: str) -> None:
        """Make ``plan`` the one that runs: fill its slots, empty the others, switch the optimizer,
        and turn bucket padding on for compiled plans only."""
        for attached in self._attached:
            for name, slots in attached.slots.items():
                if name != plan:
                    slots.uninstall()
            if plan in attached.slots:
                attached.slots[plan].install()
            whole = plan in attached.slots and attached.slots[plan].modules == [attached.model]
            self._set_pre_hook(attached, enabled=not whole)
        if self.shapes is not None:  # before the optimizer: CUDA graphs need the static shapes it sets
            self.shapes.set_padding(plan != planner.EAGER)
        if plan == "step" and self.active != "step":
            for optimizer in list(self._optimizers):
                self._enter_step_optimizer(optimizer)
        elif plan != "step" and self.active == "step":
            for state in self._optimizer_plans.values():
                state.restore()
            self._optimizer_plans.clear()
        self.active = plan

    def _set_pre_hook(self, attached: _Attached, *, enabled: bool) -> None:
        if enabled and attached.hook is None:
            import torch

            hook = torch.compiler.disable(self._pre_hook)
            attached.hook = attached.model.register_forward_pre_hook(hook, with_kwargs=True, prepend=True)
        elif not enabled and attached.hook is not None:
            attached.hook.remove()
            attached.hook = None

    def _enter_step_optimizer(self, optimizer: Any) -> None:
        state = StepPlanOptimizer(optimizer)
        capture = self.device == "cuda" and self._captures()
        self.optimizer_kind = state.enter(
            capture=capture, compile_kwargs={"mode": "reduce-overhead"} if capture else {}
        )
        self._optimizer_plans[id(optimizer)] = state

    def _captures(self) -> bool:
        """CUDA graphs for the ``step`` plan: static shapes, one process, no gradient accumulation."""
        import torch.distributed as dist

        distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        return self._static_shapes() and not distributed and self.forwards_per_step == 1

    def prepared_plans(self) -> list[str]:
        """The compile plans prepared on the attached models (compiled lazily, installed when active)."""
        return [plan for plan in planner.COMPILED_PLANS if any(plan in a.slots for a in self._attached)]

    def first_model(self) -> Any:
        """The first model attached (None before any)."""
        return self._attached[0].model if self._attached else None

    def detach(self) -> None:
        """Take every plan out (the models run uncompiled) and give the optimizers back as built."""
        self._activate(planner.EAGER)
        for attached in self._attached:
            self._set_pre_hook(attached, enabled=False)

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
            self._activate(planner.EAGER)
            self.chosen = planner.EAGER
            self._phases = [p for p in self._phases if p.plan == planner.EAGER and p.steps is not None]
        if not already:
            logger.error("COMPILER FAILED, CONTINUING UNCOMPILED (policy='fallback'): %s", reason)
            warnings.warn(f"sagemaker-tc: {self.fallback_reason}", CompilerFallbackWarning, stacklevel=2)

    # -- what the report reads -------------------------------------------------------------------
    def trials(self) -> list[dict[str, Any]]:
        """Each measured option: ``{"plan", "variant", "steady_step_seconds", "compile_seconds"}``,
        including a phase under way when the job ended (measured over the steps it had)."""
        measured = dict(self._measured)
        if self._phases and self._phases[0].trial and self.timer is not None and self._steps > self._phase_start:
            plan = self._phases[0].plan
            ran = [r for r in self.timer.records[self._phase_start : self._steps] if r.variant == plan]
            measured.setdefault(plan, planner.Measured(plan, steady_median(ran)))
        return [
            {
                "plan": m.plan,
                "variant": "eager" if m.plan == planner.EAGER else "compiled",
                "steady_step_seconds": m.steady_step_seconds,
                "compile_seconds": m.compile_seconds if m.plan != planner.EAGER else None,
            }
            for m in measured.values()
        ]

    def eager_step_seconds(self) -> float | None:
        """Median steady step of the eager baseline (seconds), None when not measured."""
        measured = self._measured.get(planner.EAGER)
        return measured.steady_step_seconds if measured else None

    def final_label(self) -> str:
        """The plan the job runs at the end."""
        return self.chosen or self.active


def _device(model: Any) -> tuple[str, str]:
    """The model's device type (``"cpu"``, ``"cuda"``) and name (the GPU's, e.g. ``"NVIDIA H200"``)."""
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cuda":
        return (parameter.device.type if parameter is not None else "cpu"), "cpu"
    import torch

    return "cuda", torch.cuda.get_device_name(parameter.device)


def _modules(model: Any, plan: str) -> int:
    modules = plan_modules(model, plan)
    return leaf_modules(modules[0]) if modules else 0


def _describe(projections: list) -> str:
    return ", ".join(f"{p.plan} {p.seconds:.1f} s ({p.basis})" for p in projections) or "none"


def _reason(chosen: str, projections: list, remaining: int) -> str:
    """One line: the choice and the projections behind it."""
    return (
        f"{chosen} for the remaining {remaining} steps: lowest projected time "
        f"({_describe(sorted(projections, key=lambda p: p.seconds))})"
    )


def _first_lines(text: str, limit: int = 600) -> str:
    """The first lines of an error message, without torch's "Set TORCHDYNAMO_VERBOSE=1 ..." advice."""
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("Set TORCHDYNAMO_")]
    return " ".join(lines[:3])[:limit] if lines else "(no message)"


def _agree_across_ranks(choice: str) -> str:
    """Rank 0's choice on every rank when torch.distributed is initialized (else ``choice``)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return choice
    box = [choice]
    dist.broadcast_object_list(box, src=0)
    return box[0]
