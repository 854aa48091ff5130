"""The compiled training step at run time: the compile plans on the models, and which one runs.

:meth:`CompilerRuntime.attach` prepares the compile plans on a model (:mod:`.plans`: ``regional``,
``model``, ``step``; each compiled in place, lazily) and starts the job's
:class:`~sagemaker_tc.compiler.schedule.Schedule`; after each optimizer step
(:meth:`CompilerRuntime.after_step`) the schedule may name another plan, and the runtime installs it
(:meth:`CompilerRuntime._activate`): the plan's compiled calls in their slots, the others' emptied,
the optimizer's update switched for ``step``, bucket padding on for compiled plans only (the shape
policy, :class:`~sagemaker_tc.compiler.shape_policy.ShapePolicy`: eager never pads).

A compiled call that raises is rerun eagerly: if eager works the compiler failed
(``policy="fallback"``: every compiled plan is dropped, the job continues eager with a loud warning
and the reason in the report; ``"strict"``: :class:`CompilerError`); if eager fails too, the error
is the model's own.
"""

from __future__ import annotations

import copy
import logging
import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.dynamo import DynamoStats, dynamo_stats
from sagemaker_tc.compiler.optimizers import StepPlanOptimizer
from sagemaker_tc.compiler.plans import PlanSlots, build_slots, leaf_modules, plan_modules
from sagemaker_tc.compiler.regions import CompilePlan, compile_kwargs
from sagemaker_tc.compiler.schedule import Schedule
from sagemaker_tc.compiler.shape_policy import ShapePolicy
from sagemaker_tc.compiler.shapes import BucketStats
from sagemaker_tc.compiler.steps import StepTimer
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import CompilerError, CompilerFallbackWarning

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("sagemaker_tc.compiler")


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
        self.schedule: Schedule | None = None
        self.device = "cpu"
        self.device_name = "cpu"
        self.forwards_per_step = 1
        self.optimizer_kind: str | None = None
        self._job_length: tuple[int | None, str] = (None, "unknown")
        self._attached: list[_Attached] = []
        self._listeners: list[Any] = []
        self._optimizers: weakref.WeakSet = weakref.WeakSet()
        self._optimizer_plans: dict[int, StepPlanOptimizer] = {}

    # -- setup ---------------------------------------------------------------------------------
    def attach(self, model: torch.nn.Module, config: TrainingCompilerConfig) -> CompilePlan:
        """Prepare ``model``'s compile plans under ``config`` (compiled lazily, in place) and, on the
        first attach, set the schedule. Returns what the configured plan compiles (``auto``: the
        ``regional`` plan's regions, the cheapest).

        All or nothing: when it raises, the runtime is as it was before the call (``model``'s slots
        emptied, its forward pre-hook removed), so a later attach of a good model works.

        Raises:
            Exception: whatever preparing the plans raised (a model whose parameters cannot be read).
        """
        saved = {
            name: copy.copy(value) if isinstance(value, (list, dict)) else value for name, value in vars(self).items()
        }
        try:
            return self._attach(model, config)
        except BaseException:
            for attached in self._attached[len(saved["_attached"]) :]:
                for slots in attached.slots.values():
                    slots.uninstall()
                self._set_pre_hook(attached, enabled=False)
            vars(self).update(saved)
            raise

    def _attach(self, model: torch.nn.Module, config: TrainingCompilerConfig) -> CompilePlan:
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
            workload = planner.Workload(
                device=self.device, modules={p: _modules(model, p) for p in planner.COMPILED_PLANS}
            )
            self.schedule = Schedule(config, workload)
            self.schedule.set_job_length(*self._job_length)
        self._activate(self.schedule.first_plan(self.active))
        return plan

    def add_model_call_listener(self, listener: Any) -> Callable[[], None]:
        """Call ``listener(module, args, kwargs)`` before each call of an attached model (outside any
        compiled graph; the plain-loop step watcher). Returns the listener's removal."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

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
        if self.schedule is not None:
            self.schedule.set_job_length(steps, source)
        elif steps is not None and steps > 0:
            self._job_length = (int(steps), source)

    @property
    def workload(self) -> planner.Workload | None:
        """What ``plan="auto"``'s estimates depend on (None before the first attach)."""
        return self.schedule.workload if self.schedule is not None else None

    @property
    def decision(self) -> dict[str, Any] | None:
        """``plan="auto"``'s decision once made (None before, and for explicit plans)."""
        return self.schedule.decision if self.schedule is not None else None

    def _candidates(self, config: TrainingCompilerConfig) -> list[str]:
        plan = config.resolved_plan
        return list(planner.COMPILED_PLANS) if plan == "auto" else [plan]

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

    def finish_step(self) -> None:
        """Right after ``optimizer.step()`` in a plain loop, before the step's end is recorded: nothing
        to do for Inductor (:class:`~sagemaker_tc.compiler.xla.XlaRuntime` marks the XLA step here)."""

    def current_label(self) -> str:
        """The plan the next step runs (a step record's label)."""
        return self.active

    def after_step(self) -> None:
        """Count an optimizer step and install the plan the schedule names next, if any (called by
        the step timer after each step; step times are read only when a phase ends)."""
        if self.schedule is None:
            return
        with self._lock:
            records = (lambda: self.timer.flush()) if self.timer is not None else list
            plan = self.schedule.after_step(records, self._available_plans())
            if plan is not None:
                self._activate(planner.EAGER if self.fallback_reason is not None else plan)

    def _available_plans(self) -> list[str]:
        plans = self.prepared_plans()
        if "regional" in plans and all(plan_modules(a.model, "regional") == [a.model] for a in self._attached):
            plans.remove("regional")  # no repeated blocks: regional would compile the whole model again
        return plans

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
            if self.schedule is not None:
                self.schedule.fail()
        if not already:
            logger.error("COMPILER FAILED, CONTINUING UNCOMPILED (policy='fallback'): %s", reason)
            warnings.warn(f"sagemaker-tc: {self.fallback_reason}", CompilerFallbackWarning, stacklevel=2)

    # -- what the report reads -------------------------------------------------------------------
    def trials(self) -> list[dict[str, Any]]:
        """Each measured option (:meth:`~sagemaker_tc.compiler.schedule.Schedule.trials`)."""
        if self.schedule is None:
            return []
        return self.schedule.trials(self.timer.records if self.timer is not None else [])

    def eager_step_seconds(self) -> float | None:
        """Median steady step of the eager phase (seconds), None when not measured."""
        return self.schedule.eager_step_seconds() if self.schedule is not None else None

    def compiled_graphs(self) -> DynamoStats:
        """What was compiled, for the report's ``graphs``, ``recompiles`` and graph breaks: dynamo's
        counts (:class:`~sagemaker_tc.compiler.xla.XlaRuntime`: XLA's)."""
        return dynamo_stats()

    def compile_stats(self) -> dict[str, Any] | None:
        """The backend's own section of the report: None for Inductor (``xla`` for XLA)."""
        return None

    def write_debug(self, folder: Any) -> list[str]:
        """Debug mode: the backend's own debug files into ``folder``; returns their names (none for
        Inductor, whose logs :class:`~sagemaker_tc.compiler.debug.DebugCapture` writes)."""
        return []

    def final_label(self) -> str:
        """The plan the job runs at the end."""
        chosen = self.schedule.chosen if self.schedule is not None else None
        return chosen or self.active


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


def _first_lines(text: str, limit: int = 600) -> str:
    """The first lines of an error message, without torch's "Set TORCHDYNAMO_VERBOSE=1 ..." advice."""
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("Set TORCHDYNAMO_")]
    return " ".join(lines[:3])[:limit] if lines else "(no message)"
