"""The compiled training step at run time: the compile plans on the models, and which one runs.

:meth:`CompilerRuntime.attach` prepares the compile plans on a model (:mod:`.plans`, compiled in
place and lazily, each with its own recompile budget) and starts the job's ``Schedule``; after each
optimizer step the schedule may name another plan, and the runtime installs it (:meth:`_activate`):
its compiled calls in their slots, the optimizer's update for ``step``, bucket padding (compiled only).

Every compiled callable is guarded (module slots by :class:`~.plan_call.GuardedCall`, the step plan's update by
:class:`~.optimizers.StepPlanOptimizer`): a call that raises is rerun eagerly; if eager works the plan failed
(:meth:`.failures.FailureHandling.plan_failed`) and never runs again in the job, which steps back to a safer
plan (:meth:`CompilerRuntime._step_back`), or under ``policy="strict"`` raises :class:`CompilerError` naming
it (an out-of-memory error ends the plan under either policy). If eager fails too, the error is the model's
own. CUDA graphs run only where torch supports them (:meth:`~.calls.ModelCalls.captures`), never on the
optimizer update alone.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _hf_internals
from sagemaker_tc.compiler import known_wrong, planner, sharding
from sagemaker_tc.compiler.calls import ModelCalls, RuntimeView
from sagemaker_tc.compiler.dynamo import DynamoStats, dynamo_stats
from sagemaker_tc.compiler.failures import FailureHandling, PlanFailures
from sagemaker_tc.compiler.optimizers import StepOptimizers
from sagemaker_tc.compiler.plans import (
    ModelPlans,
    PlanHooks,
    configured_regions,
    device_of,
    model_device,
    plan_leaf_modules,
    plan_modules,
)
from sagemaker_tc.compiler.regions import CompiledRegions
from sagemaker_tc.compiler.rollback import snapshot
from sagemaker_tc.compiler.runtime_state import RuntimeState
from sagemaker_tc.compiler.schedule import Schedule
from sagemaker_tc.compiler.shapes import BucketStats, ShapePolicy
from sagemaker_tc.compiler.steps import StepTimer
from sagemaker_tc.config import TrainingCompilerConfig

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("sagemaker_tc.compiler")


class CompilerRuntime(RuntimeState):
    """A session's compile plans, schedule and measurements.

    Args:
        buckets: the session's bucketing statistics.
        timer: the session's step timer (phases are measured from its records).
    """

    def __init__(self, buckets: BucketStats | None = None, timer: StepTimer | None = None) -> None:
        super().__init__(buckets, timer)  # device read at the first training call (_check_device)
        self._lock = threading.Lock()
        self._device_seen = False
        self._job_length: tuple[int | None, str] = (None, "unknown")
        self.failed = PlanFailures()
        self.resumed_decision: dict[str, Any] | None = None  # an interrupted job's plan file (resume_with)
        self.evaluation.follow(
            lambda: self.active, lambda: self.schedule.measured if self.schedule is not None else {},
            lambda: self.config.dynamic if self.config is not None else None,
        )  # fmt: skip
        self.failing = FailureHandling(  # how a failed plan ends; the step back is ours
            self.failed, on_end=self._step_back, active=lambda: self.active, invalidate=self._invalidate,
            steps=lambda: self.schedule.steps if self.schedule is not None else 0, lock=self._lock,
            strict=lambda: self.config is not None and self.config.policy == "strict",
            running=lambda: self.models.running[0] > 0, evaluation_failed=self.evaluation.compiled_call_failed,
        )  # fmt: skip
        self.plan_failed, self.eval_failed = self.failing.plan_failed, self.failing.eval_failed
        self.backward_failed, self.recompile_limit_hit = self.failing.backward_failed, self.failing.recompile_limit_hit
        self.end_evaluation_run = self.evaluation.end_run_now
        view = RuntimeView(
            active=lambda: self.active, shapes=lambda: self.shapes, device=lambda: self.device,
            budget=lambda plan: self.recompile_budgets.get(plan), invalidate=self._invalidate,
            training_call=self._training_call, evaluation_call=self._evaluation_call,
            evaluation_ended=self.evaluation.end_call, evaluates_compiled=self.evaluation.compiled_now,
        )  # fmt: skip
        self.calls = ModelCalls(view)  # each call of an attached model: padding, variant, listeners
        hooks = PlanHooks(self.calls.variant, self.plan_failed, self.calls.before_call, self.eval_failed)
        self.models = ModelPlans(hooks)  # the attached models and the plans prepared on each
        compile_update = lambda: bool(self.config is not None and self.config.compile_optimizer)  # noqa: E731
        self.optimizers = StepOptimizers(self.plan_failed, compile_update)  # what the step plan does to them

    @property
    def recompile_budgets(self) -> dict[str, int]:
        """Each prepared plan's recompile budget (:func:`~.plan_call.plan_functions`)."""
        return self.models.recompile_budgets

    @property
    def optimizer_kind(self) -> str | None:
        """The step plan's update (``"fused"``, ``"compiled"``, ``"as built"``; None: it never ran)."""
        return self.optimizers.kind

    # -- setup ---------------------------------------------------------------------------------
    def attach(self, model: torch.nn.Module, config: TrainingCompilerConfig) -> CompiledRegions:
        """Prepare ``model``'s compile plans under ``config`` (compiled lazily, in place) and, on the
        first attach, set the schedule. Returns what the configured plan compiles (``auto``: the
        ``regional`` plan's regions, the cheapest).

        All or nothing: when it raises, the runtime is as it was before the call (``model``'s slots
        emptied, its forward pre-hook removed), so a later attach of a good model works.

        Raises:
            Exception: whatever preparing the plans raised (a model whose parameters cannot be read).
        """
        restore, known = snapshot(self, self.calls, self.optimizers, self.models), len(self.models.attached)
        try:
            return self._attach(model, config)
        except BaseException:
            for attached in self.models.attached[known:]:
                for slots in attached.slots.values():
                    slots.uninstall()
                self.calls.set_pre_hook(attached, enabled=False)
                self.calls.set_after_hook(attached, enabled=False)
            restore()
            raise

    def _attach(self, model: torch.nn.Module, config: TrainingCompilerConfig) -> CompiledRegions:
        self.attention = _hf_internals.attention_implementation(model) or self.attention
        first = self.config is None
        self.config = config
        if first:
            self.device, self.device_name = device_of(model)  # a first guess: the model may move before it trains
            self.model_device = model_device(model)
            self.shapes = ShapePolicy(config.buckets, model, self.buckets)
        plans: tuple[str, ...] = ()
        if config.compiles:
            plans = tuple(planner.auto_candidates(self.device)) if config.plan == "auto" else (config.plan,)
        attached = self.models.add(model, plans, config)
        self.calls.set_after_hook(attached, enabled=config.compiles)
        if config.compiles:
            known_wrong.announce(model, config.plan)  # auto leaves such plans out; explicit: warn
        plan = configured_regions(model, config.plan)
        self.plans.append(plan)
        if first:
            workload = planner.Workload(
                device=self.device, modules={p: plan_leaf_modules(model, p) for p in planner.COMPILED_PLANS}
            )
            self.schedule = Schedule(config, workload)
            self.schedule.model_device = lambda: self.model_device
            self.schedule.expected_buckets = self.shapes.expected_buckets
            self.schedule.set_job_length(*self._job_length)
            if self.resumed_decision is not None:
                self.schedule.resume(self.resumed_decision, planner.auto_candidates(self.device))
        self._activate(self._effective(self.schedule.first_plan(self.active)))
        return plan

    def resume_with(self, saved: dict[str, Any]) -> None:
        """Take an interrupted job's plan file (:func:`sagemaker_tc.compiler.resume.saved_plan`): the
        schedule made at the first :meth:`attach` starts from its decision instead of new trials."""
        self.resumed_decision = saved

    def track_optimizer(self, optimizer: Any) -> None:
        """Remember an optimizer the job steps (the ``step`` plan switches its update)."""
        self.optimizers.track(optimizer, step_runs=self.active == "step")

    def set_job_length(self, steps: int | None, source: str) -> None:
        """The job's optimizer steps in all (``Trainer``'s ``max_steps``, ``expected_steps``)."""
        if self.schedule is not None:
            self.schedule.set_job_length(steps, source)
        elif steps is not None and steps > 0:
            self._job_length = (int(steps), source)

    @property
    def decision(self) -> dict[str, Any] | None:
        """``plan="auto"``'s decision once made, or a resumed job's (else None)."""
        return self.schedule.decision if self.schedule is not None else None

    def after_step(self) -> None:
        """Count an optimizer step and install the plan the schedule names next, if any (called by
        the step timer after each step; step times are read only when a phase ends)."""
        if self.schedule is None:
            return
        with self._lock:
            records = (lambda: self.timer.flush()) if self.timer is not None else list
            plan = self.schedule.after_step(records, self._available_plans)
            if plan is not None:
                self._activate(self._effective(plan))

    def _available_plans(self) -> list[str]:
        """The prepared plans ``auto`` may still try on the model's device now: allowed on the models
        and not failed (a decision: the device is read again)."""
        model = self.first_model()
        if model is not None:
            self._check_device(model)
        failed = self.failed.ended()
        return [plan for plan in self.auto_plans() if plan not in failed]

    def auto_plans(self) -> list[str]:
        """The prepared plans ``auto`` may try on the device as known now, cheapest first: a committed
        GPU result backs them on CUDA (:func:`~.planner.auto_candidates`), and :meth:`_allowed`."""
        candidates = planner.auto_candidates(self.device)
        return [plan for plan in self.prepared_plans() if plan in candidates and self._allowed(plan)]

    def _training_call(self, module: Any) -> None:
        """A training call of an attached model begins: the device's first read, and the end of an
        evaluation run that came before it."""
        if not self._device_seen:
            self._check_device(module)
        self.end_evaluation_run()

    def _evaluation_call(self, signature: tuple) -> None:
        """An evaluation call begins (``signature``: its input shapes): timed while it runs eager."""
        if self.schedule is not None and self.config is not None and self.config.compiles:
            self.evaluation.begin_call(signature, timed=not self.evaluation.compiled_now())

    def _invalidate(self, plan: str, reason: str) -> None:
        if self.schedule is not None:
            self.schedule.invalidate(plan, reason)

    def _check_device(self, model: Any) -> None:
        """Read the device ``model`` trains on (its parameters'): at its first training call, since a
        plain loop may call ``model.to("cuda")`` after ``compile_model``, and at each decision. The
        planner's priors, ``auto``'s candidates, CUDA graphs, the step timer's events and the ranks'
        agreement follow it; the report and history name it."""
        self._device_seen = True
        device, name = device_of(model)
        self.model_device = model_device(model)
        if (device, name) != (self.device, self.device_name):
            logger.info("Compiler: the model trains on %s (it was on %s when compiled)", name, self.device_name)
            self.device, self.device_name = device, name
            if self.schedule is not None:
                self.schedule.workload.device = device

    # -- activation ---------------------------------------------------------------------------------
    def _activate(self, plan: str) -> None:
        """Make ``plan`` the one that runs: fill its slots, empty the others, switch the optimizer,
        and turn bucket padding on for compiled plans only."""
        for attached, whole in self.models.install(plan):
            self.calls.set_pre_hook(attached, enabled=not whole)
        if self.shapes is not None:  # before the optimizer: CUDA graphs need the static shapes it sets
            self.shapes.set_padding(plan != planner.EAGER)
        self.optimizers.switch(self.active, plan)
        self.active = plan

    def prepared_plans(self) -> list[str]:
        """The compile plans prepared on the attached models (compiled lazily, installed when active)."""
        return self.models.prepared()

    def attached_models(self) -> list[Any]:
        """The models attached, in order."""
        return self.models.models()

    def first_model(self) -> Any:
        """The first model attached (None before any)."""
        return self.models.attached[0].model if self.models.attached else None

    def detach(self) -> None:
        """Take every plan out (the models run uncompiled) and give the optimizers back as built."""
        self._activate(planner.EAGER)
        for attached in self.models.attached:
            self.calls.set_pre_hook(attached, enabled=False)
            self.calls.set_after_hook(attached, enabled=False)

    # -- failure ---------------------------------------------------------------------------------
    def _step_back(self, plan: str, failure: dict[str, Any]) -> None:
        """``plan`` ended (:meth:`.failures.FailureHandling.end`, under the lock): run the next safer plan
        (or eager), after the plan-end listeners, and say why when it is eager."""
        target = failure["stepped_back_to"] = self._effective(plan)
        for listener in list(self.plan_end_listeners):
            listener(plan)  # recordings and their memory pool go before the step back
        if target == planner.EAGER:
            at, reason = failure["at_step"], failure["reason"]
            self.fallback_reason = f"plan {plan} failed at step {at}; training continues eager: {reason}"
        self._activate(target)

    @property
    def failures(self) -> list[dict[str, Any]]:
        """Each plan failure: ``{"plan", "kind", "reason", "at_step", "ends", "stepped_back_to"}``."""
        return self.failed.records

    def _effective(self, plan: str, *, prepare: bool = True) -> str:
        """What runs when the schedule names ``plan``: ``plan`` itself, or, once it failed in this
        process, the first safer plan that has not (prepared now if it was not), else eager. The
        schedule's phases stay the same on every rank (its decisions are collective); only what a
        rank runs in them steps back."""
        target = self.failed.step_back(plan, self._allowed)
        if prepare and target not in (plan, planner.EAGER):
            self.models.prepare(target, self.config)
        return target

    def _allowed(self, plan: str) -> bool:
        """``auto`` may try ``plan``, and a failed plan may step back to it: not a plan ``verify`` marks
        wrong for an attached model's architecture (:mod:`.known_wrong`), only :data:`~.sharding.FSDP2_AUTO_PLANS`
        on an FSDP2 model, and not ``regional`` on models without repeated blocks (it would compile the
        whole model again)."""
        models = self.models.models()
        if plan in known_wrong.plans_known_wrong_for(models) or not sharding.plan_fits_sharding(plan, models):
            return False
        if plan == "regional":
            return any(plan_modules(m, "regional") != [m] for m in models)
        return True

    # -- what the report reads -------------------------------------------------------------------
    def optimizer_steps_skipped(self) -> int:
        """Optimizer steps the step plan's guard could not compute (their gradients were overwritten
        by a CUDA graph replay; :class:`~.optimizers.StepPlanOptimizer`)."""
        return self.optimizers.steps_skipped()

    def compiled_graphs(self) -> DynamoStats:
        """What was compiled, for the report's ``graphs``, ``recompiles`` and graph breaks: dynamo's
        counts since :attr:`compiles_since`."""
        return dynamo_stats(self.compiles_since)

    def final_label(self) -> str:
        """The plan the job runs at the end."""
        chosen = self.schedule.chosen if self.schedule is not None else None
        return self._effective(chosen, prepare=False) if chosen else self.active
