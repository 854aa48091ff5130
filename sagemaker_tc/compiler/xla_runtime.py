"""``backend="xla"`` as its own runtime: the model on the XLA device, one XLA graph per optimizer step.

:class:`XlaRuntime` answers the same calls as :class:`~sagemaker_tc.compiler.runtime.CompilerRuntime`
(attach, detach, after/finish step, labels, optimizers, job length, accumulation, listeners, the
report's reads) for a session whose config names ``backend="xla"``: no compile plans, no schedule, no
trials. Each call of an attached model has its inputs padded to a bucket (:class:`~.calls.ModelCalls`)
and moved to the XLA device; :meth:`XlaRuntime.finish_step` marks the step (:class:`~.xla.XlaBackend`),
and a failure there goes back to eager on the host (first step only) or raises (:meth:`XlaRuntime.xla_failed`).
"""

from __future__ import annotations

import logging
import warnings
import weakref
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _hf_internals
from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.calls import ModelCalls, RuntimeView
from sagemaker_tc.compiler.dynamo import DynamoStats
from sagemaker_tc.compiler.failures import error_summary
from sagemaker_tc.compiler.plans import Attached
from sagemaker_tc.compiler.regions import CompiledRegions
from sagemaker_tc.compiler.rollback import snapshot
from sagemaker_tc.compiler.runtime_state import RuntimeState
from sagemaker_tc.compiler.shapes import BucketStats, ShapePolicy
from sagemaker_tc.compiler.steps import StepTimer
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import CompilerFallbackWarning

if TYPE_CHECKING:
    from sagemaker_tc.compiler.xla import XlaBackend

logger = logging.getLogger("sagemaker_tc.compiler")


class XlaRuntime(RuntimeState):
    """A ``backend="xla"`` session's runtime (module docstring).

    Args:
        xla: the XLA device's part (:class:`~sagemaker_tc.compiler.xla.XlaBackend`).
        buckets: the session's bucketing statistics.
        timer: the session's step timer (a step that compiled says so in its record).
    """

    def __init__(self, xla: XlaBackend, buckets: BucketStats | None = None, timer: StepTimer | None = None) -> None:
        super().__init__(buckets, timer)  # model_device stays None: the step timer's events on the host's clock
        self.xla = xla
        self.decision = self.optimizer_kind = None  # no plans: no schedule, no step plan
        self.recompile_budgets: dict[str, int] = {}
        self.failures: list[dict[str, Any]] = []
        self._attached: list[Attached] = []
        self._optimizers: weakref.WeakSet = weakref.WeakSet()
        running = lambda: self.active == self.xla.label  # noqa: E731
        view = RuntimeView(
            active=lambda: self.active, shapes=lambda: self.shapes, device=lambda: self.device,
            training_call=lambda module: self.evaluation.end_run(),
        )  # fmt: skip
        self.calls = ModelCalls(
            view,
            to_device=lambda args, kwargs: xla.to_device(args, kwargs) if running() else (args, kwargs),
            on_device=lambda args, kwargs: running() and xla.inputs_on_device(args, kwargs),
        )

    def attach(self, model: Any, config: TrainingCompilerConfig) -> CompiledRegions:
        """The model on the XLA device, its calls' inputs moved there (padded to buckets first), no
        compile plans. All or nothing: when it raises, the runtime is as it was before the call.

        Raises:
            CompilerError: torch_xla is missing, or the job runs more than one process.
        """
        restore, known = snapshot(self, self.calls), len(self._attached)
        try:
            self.xla.attach(model)
            self.attention = _hf_internals.attention_implementation(model) or self.attention
            if self.config is None:
                self.device, self.device_name = self.xla.label, self.xla.device_name
                self.shapes = ShapePolicy(config.buckets, model, self.buckets)
            self.config = config
            attached = Attached(model, {})
            self._attached.append(attached)
            self.calls.set_pre_hook(attached, enabled=True)
            self.active = self.xla.label
            if self.shapes is not None:
                self.shapes.set_padding(True)
            regions = CompiledRegions(regional=False, block_class=None, num_regions=1)
            self.plans.append(regions)
            return regions
        except BaseException:
            for attached in self._attached[known:]:
                self.calls.set_pre_hook(attached, enabled=False)
            restore()
            raise

    def detach(self) -> None:
        """The model's calls run as given (no padding, nothing moved) from now on."""
        if self.shapes is not None:
            self.shapes.set_padding(False)
        self.active = planner.EAGER
        for attached in self._attached:
            self.calls.set_pre_hook(attached, enabled=False)

    def finish_step(self) -> None:
        """Right after ``optimizer.step()``, before the step's end is recorded: mark the XLA step
        (:meth:`.XlaBackend.mark_step`); a failure there goes to :meth:`xla_failed`. Never waits for
        the device."""
        if self.active != self.xla.label:
            return
        try:
            compiled = self.xla.mark_step()
        except Exception as error:  # XLA's compile and run errors are RuntimeErrors of many kinds
            self.xla_failed(error)
            return
        if compiled and self.timer is not None:
            self.timer.on_compile()  # the step's record says it compiled

    def xla_failed(self, error: BaseException) -> None:
        """The step's graph failed in XLA: back to eager on the host (first step only) or raise.

        Raises:
            CompilerError: ``policy="strict"``, or a step already ran on the XLA device.
        """
        self.fallback_reason = self.xla.failure(error, self.config.policy if self.config is not None else "fallback")
        self.xla.back_to_host()
        moved = {id(p) for a in self._attached for p in a.model.parameters()}
        for optimizer in list(self._optimizers):
            for parameter in [p for p in optimizer.state if id(p) in moved]:
                del optimizer.state[parameter]
        self.active = planner.EAGER
        if self.shapes is not None:
            self.shapes.set_padding(False)
        logger.error("COMPILER FAILED, CONTINUING UNCOMPILED (policy='fallback'): %s", error_summary(error))
        warnings.warn(f"sagemaker-tc: {self.fallback_reason}", CompilerFallbackWarning, stacklevel=2)

    def after_step(self) -> None:
        """Nothing to decide: XLA has no schedule (the step was marked at :meth:`finish_step`)."""

    def track_optimizer(self, optimizer: Any) -> None:
        """Remember an optimizer the job steps (its state on the XLA device goes when the job falls back)."""
        from sagemaker_tc.compiler.optimizers import is_torch_optimizer, unwrap

        inner = unwrap(optimizer)
        if is_torch_optimizer(inner):
            self._optimizers.add(inner)

    def set_job_length(self, steps: int | None, source: str) -> None:
        """The job's length: nothing weighs it without a schedule."""

    def resume_with(self, saved: dict[str, Any]) -> None:
        """An interrupted job's plan file: nothing to resume without compile plans."""

    def end_evaluation_run(self) -> None:
        """An evaluation run ended: evaluation calls run as given under XLA (nothing to decide)."""
        self.evaluation.end_run()

    def pad_batches_on_host(self, loader: Any) -> bool:
        """Pad ``loader``'s training batches to the buckets in its collate function, on the host
        (:meth:`.XlaBackend.pad_on_host`). Returns False when nothing was wrapped."""
        return self.shapes is not None and self.xla.pad_on_host(loader, self.shapes)

    def recompile_limit_hit(self, message: str) -> None:
        """Dynamo hit a recompile limit: not XLA's (the script's own compiled code)."""
        logger.info("Recompile limit hit outside the compile plan's calls (the script's own compiled code)")

    def compiled_graphs(self) -> DynamoStats:
        """XLA's counts for the report's ``graphs`` (:meth:`.XlaBackend.compiled_graphs`)."""
        return self.xla.compiled_graphs(running=self.active == self.xla.label)

    def compile_stats(self) -> dict[str, Any] | None:
        """The report's ``xla`` section (:meth:`.XlaBackend.compile_stats`)."""
        return self.xla.compile_stats(running=self.active == self.xla.label)

    def write_debug(self, folder: Any) -> list[str]:
        """Debug mode: XLA's debug files into ``folder``; returns their names."""
        return self.xla.write_debug(folder)

    def attached_models(self) -> list[Any]:
        """The models attached, in order."""
        return [attached.model for attached in self._attached]

    def first_model(self) -> Any:
        """The first model attached (None before any)."""
        return self._attached[0].model if self._attached else None

    def auto_plans(self) -> list[str]:
        """No compile plan to try."""
        return []

    def optimizer_steps_skipped(self) -> int:
        """No step plan under XLA."""
        return 0
