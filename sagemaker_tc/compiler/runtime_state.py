"""What every runtime of a session holds (:class:`RuntimeState`): the base of
:class:`~sagemaker_tc.compiler.runtime.CompilerRuntime` and :class:`~sagemaker_tc.compiler.xla_runtime.XlaRuntime`,
so the session, the per-call hooks and the report read one set of names whichever backend runs: the
shared state, and the reads and defaults both runtimes answer alike (a runtime overrides its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler import history, planner
from sagemaker_tc.compiler.evaluation import EvaluationCalls
from sagemaker_tc.compiler.shapes import BucketStats

if TYPE_CHECKING:
    from sagemaker_tc.compiler.calls import ModelCalls
    from sagemaker_tc.compiler.dynamo import DynamoMark
    from sagemaker_tc.compiler.regions import CompiledRegions
    from sagemaker_tc.compiler.schedule import Schedule
    from sagemaker_tc.compiler.shapes import ShapePolicy
    from sagemaker_tc.compiler.steps import StepTimer
    from sagemaker_tc.config import TrainingCompilerConfig


class RuntimeState:
    """The state both runtimes keep.

    Args:
        buckets: the session's bucketing statistics (a new one when None).
        timer: the session's step timer.

    Attributes:
        config: the attached job's config (None before ``attach``). plans: the compiled regions made.
        attention: the attention kernel chosen. shapes: the padding policy (None: no bucketing).
        active: the running plan's label (``eager`` first). fallback_reason: why the job went eager.
        device, device_name: the model's device type and name, read at its first training call
        (``"cpu"`` before). model_device: its ``torch.device``. compiles_since: the session's mark for
        counting dynamo's work. plan_end_listeners: called with a plan that ends, before it does.
        evaluation: evaluation calls' bookkeeping (eager unless compiling them pays).
        schedule: the compile plans' schedule (None: before the first attach, or no plans).
        calls: the per-call hooks (:class:`~.calls.ModelCalls`), set by the runtime.
    """

    calls: ModelCalls
    failures: list[dict[str, Any]]

    def __init__(self, buckets: BucketStats | None = None, timer: StepTimer | None = None) -> None:
        self.buckets = buckets or BucketStats()
        self.timer = timer
        self.config: TrainingCompilerConfig | None = None
        self.plans: list[CompiledRegions] = []
        self.attention: str | None = None
        self.shapes: ShapePolicy | None = None
        self.active = planner.EAGER
        self.fallback_reason: str | None = None
        self.device = self.device_name = "cpu"
        self.model_device: Any = None
        self.compiles_since: DynamoMark | None = None
        self.plan_end_listeners: list[Callable[[str], None]] = []
        self.evaluation = EvaluationCalls(device=lambda: self.model_device)
        self.schedule: Schedule | None = None

    @property
    def eval_eager(self) -> set[str]:
        """Plans whose compiled evaluation calls failed: evaluation runs eager under them."""
        return self.evaluation.eager_plans

    @property
    def whole_step_recorded(self) -> bool:
        """A ``Trainer``'s whole step is recorded (:mod:`~sagemaker_tc.integrations.captured_trainer`):
        no CUDA graph trees inside it (:meth:`~.calls.ModelCalls.captures`)."""
        return self.calls.whole_step_recorded

    @whole_step_recorded.setter
    def whole_step_recorded(self, value: bool) -> None:
        self.calls.whole_step_recorded = value

    def set_accumulation(self, forwards: int) -> None:
        """Gradient accumulation is known: ``forwards`` training forwards per optimizer step
        (:meth:`~.calls.ModelCalls.set_accumulation`)."""
        self.calls.set_accumulation(forwards)

    def set_evaluation_runs(self, runs: int | None, source: str) -> None:
        """The evaluation runs the job makes in all (a ``Trainer``'s, from its evaluation strategy;
        ``source`` names it for the report). Unknown (never set): evaluation stays eager."""
        self.evaluation.set_expected_runs(runs, source)

    def current_label(self) -> str:
        """The plan the next step runs (a step record's label)."""
        return self.active

    def final_label(self) -> str:
        """The plan the job runs at the end."""
        return self.active

    def finish_step(self) -> None:
        """Right after ``optimizer.step()``: nothing to do for Inductor (:class:`~.xla_runtime.XlaRuntime`
        marks its step here)."""

    def trials(self) -> list[dict[str, Any]]:
        """Each measured option (:meth:`~sagemaker_tc.compiler.schedule.Schedule.trials`; none without a schedule)."""
        if self.schedule is None:
            return []
        return self.schedule.trials(self.timer.records if self.timer is not None else [])

    def eager_step_seconds(self) -> float | None:
        """Median steady step of the eager phase (seconds), None when not measured."""
        return self.schedule.eager_step_seconds() if self.schedule is not None else None

    def history_entry(self, cache_state: str) -> dict[str, Any]:
        """What this job measured of its plans, for the next job with the same workload
        (:func:`sagemaker_tc.compiler.history.job_entry`; ``cache_state`` ``"cold"`` or ``"warm"``)."""
        return history.job_entry(
            self.trials(), list(self.failures), self.eager_step_seconds(), self.final_label(), cache_state
        )

    def compile_stats(self) -> dict[str, Any] | None:
        """The backend's own section of the report: None for Inductor (:class:`~.xla_runtime.XlaRuntime`
        has one)."""
        return None

    def write_debug(self, folder: Any) -> list[str]:
        """Debug mode: the backend's own debug files into ``folder``; returns their names (none for
        Inductor, whose logs :class:`~sagemaker_tc.compiler.debug.DebugCapture` writes)."""
        return []
