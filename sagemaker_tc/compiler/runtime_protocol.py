"""What a session asks of its runtime, whichever backend runs (:class:`SessionRuntime`).

Both :class:`~sagemaker_tc.compiler.runtime.CompilerRuntime` (Inductor's compile plans) and
:class:`~sagemaker_tc.compiler.xla_runtime.XlaRuntime` (``backend="xla"``) answer it: a new backend gets a
runtime of its own that answers the same names, instead of branches in an existing one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable

    from sagemaker_tc.compiler.calls import ModelCalls
    from sagemaker_tc.compiler.dynamo import DynamoStats
    from sagemaker_tc.compiler.regions import CompiledRegions
    from sagemaker_tc.config import TrainingCompilerConfig


@runtime_checkable
class SessionRuntime(Protocol):
    """The calls a session makes on its runtime.

    Attributes:
        calls: the per-call hooks on each attached model (their listeners:
            :meth:`~.calls.ModelCalls.add_listener`; the accumulation: ``forwards_per_step``).
        plan_end_listeners: called with a plan that ends, before it does.
        device_name: the name of the device the models train on (``"cpu"`` until a model's first
            training call tells; a CUDA device's name, say ``"NVIDIA H100 80GB HBM3"``).
    """

    calls: ModelCalls
    plan_end_listeners: list[Callable[[str], None]]
    device_name: str

    def attach(self, model: Any, config: TrainingCompilerConfig) -> CompiledRegions:
        """Prepare ``model`` under ``config``; all or nothing."""
        ...

    def first_model(self) -> Any:
        """The first model attached (None before one is)."""
        ...

    def detach(self) -> None:
        """The models run as given from now on."""
        ...

    def after_step(self) -> None:
        """An optimizer step's end was recorded (the plan that runs next may change)."""
        ...

    def finish_step(self) -> None:
        """Right after ``optimizer.step()``, before the step's end is recorded."""
        ...

    def current_label(self) -> str:
        """What the next step runs (a step record's label)."""
        ...

    def final_label(self) -> str:
        """What the job runs at the end."""
        ...

    def track_optimizer(self, optimizer: Any) -> None:
        """Remember an optimizer the job steps."""
        ...

    def set_job_length(self, steps: int | None, source: str) -> None:
        """The job's optimizer steps in all (``source`` names where that comes from)."""
        ...

    def set_accumulation(self, forwards: int) -> None:
        """``forwards`` training forwards per optimizer step."""
        ...

    def compiled_graphs(self) -> DynamoStats:
        """What was compiled, for the report."""
        ...

    def compile_stats(self) -> dict[str, Any] | None:
        """The backend's own section of the report (None: none)."""
        ...

    def write_debug(self, folder: Any) -> list[str]:
        """Debug mode: the backend's own debug files into ``folder``; returns their names."""
        ...
