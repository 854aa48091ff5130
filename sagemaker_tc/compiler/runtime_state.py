"""What every runtime of a session holds (:class:`RuntimeState`): the base of
:class:`~sagemaker_tc.compiler.runtime.CompilerRuntime` and :class:`~sagemaker_tc.compiler.xla_runtime.XlaRuntime`,
so the session, the per-call hooks and the report read one set of names whichever backend runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.evaluation import EvaluationCalls
from sagemaker_tc.compiler.shapes import BucketStats

if TYPE_CHECKING:
    from sagemaker_tc.compiler.dynamo import DynamoMark
    from sagemaker_tc.compiler.regions import CompiledRegions
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
    """

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
