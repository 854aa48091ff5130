"""Per-step measurements beside the step time: GPU busy time, host syncs, CUDA graphs, reserved memory.

Each runs in the variant's own process after its timed steps (:mod:`sagemaker_tc_bench.worker`),
never during them, so none of them changes a timed step:

- :func:`gpu_busy_ms`: a separate short ``torch.profiler`` pass; the device activity the profiler
  saw (kernels, copies, fills), summed and divided by the steps. CUDA only.
- :func:`syncs_per_step`: a separate short pass under ``torch.cuda.set_sync_debug_mode("warn")``,
  counting its "called a synchronizing CUDA operation" warnings. CUDA only.
- :class:`GraphCounter`: CUDA graphs recorded and replayed, by counting calls of
  ``torch.cuda.CUDAGraph.capture_begin`` and ``.replay`` (what Inductor's cudagraph trees and any
  ``torch.cuda.graph`` capture call), installed around the steps it counts.
- :func:`inductor_cudagraph_counters`: Inductor's own ``cudagraph*`` counters (skips, recorded
  non-static inputs). This reads ``torch._dynamo.utils.counters``, a private torch structure: it is
  read here, guarded (an empty dict when torch moved it), not through ``sagemaker_tc._internals``,
  because the bench does not change the product.

Each CUDA-only figure is None on another device, with :data:`NEEDS_CUDA` as the reason.
Imports torch lazily.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

NEEDS_CUDA = "needs CUDA"
"""Why a CUDA-only figure is None on a CPU row."""
PROBE_STEPS = 5
"""Steps in each separate untimed pass (profiler, sync debug)."""
SYNC_WARNING = "synchronizing CUDA operation"
"""Text of the warning ``set_sync_debug_mode("warn")`` raises on each host sync (c10/cuda)."""


def gpu_busy_ms(
    step: Callable[[int], Any], first_index: int, device: torch.device, steps: int = PROBE_STEPS
) -> float | None:
    """Device time per step, ms: ``steps`` calls of ``step(index)`` (indices from ``first_index``)
    under ``torch.profiler`` with CUDA activity; the durations of every device event (kernels, memory
    copies and fills) summed and divided by ``steps``. None off CUDA (:data:`NEEDS_CUDA`).

    Kernels of concurrent streams would be counted twice; the bench runs one stream.
    """
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for index in range(first_index, first_index + steps):
            step(index)
        torch.cuda.synchronize(device)
    busy_us = sum(event.time_range.elapsed_us() for event in prof.events() if event.device_type == DeviceType.CUDA)
    return busy_us / 1000.0 / steps


def syncs_per_step(
    step: Callable[[int], Any], first_index: int, device: torch.device, steps: int = PROBE_STEPS
) -> float | None:
    """Host syncs per step: ``steps`` calls of ``step(index)`` under
    ``torch.cuda.set_sync_debug_mode("warn")``, counting its warnings (each blocking call: ``.item()``,
    a blocking copy to the host, ``nonzero``, ...), divided by ``steps``. None off CUDA
    (:data:`NEEDS_CUDA`). A warning raised in a thread without Python (the autograd engine's device
    threads) is not seen: a lower bound."""
    import torch

    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for index in range(first_index, first_index + steps):
                step(index)
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum(SYNC_WARNING in str(warning.message) for warning in caught) / steps


class GraphCounter:
    """Counts CUDA graphs recorded (``CUDAGraph.capture_begin`` calls) and replayed (``.replay``
    calls) while installed: wraps the two methods of ``torch.cuda.CUDAGraph`` and puts them back on
    :meth:`uninstall`. ``available`` is False where torch has no such methods (nothing counted).
    Usable as a context manager.

    Args:
        graph_class: the class whose two methods are counted (default ``torch.cuda.CUDAGraph``; a
            test passes a stand-in).
    """

    def __init__(self, graph_class: type | None = None) -> None:
        self.recorded = 0
        self.replays = 0
        self._class = graph_class
        self._saved: dict[str, Any] = {}
        self.available = False

    def install(self) -> GraphCounter:
        """Start counting (idempotent)."""
        if self._saved:
            return self
        if self._class is None:
            try:
                from torch.cuda.graphs import CUDAGraph
            except ImportError:
                return self
            self._class = CUDAGraph
        for name in ("capture_begin", "replay"):
            original = getattr(self._class, name, None)
            if not callable(original):  # nothing to count here: leave everything as it is
                self.uninstall()
                return self
            self._saved[name] = self._class.__dict__.get(name)  # None: inherited, removed again on uninstall
            setattr(self._class, name, self._counting(name, original))
        self.available = True
        return self

    def _counting(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        attribute = "recorded" if name == "capture_begin" else "replays"

        def counted(graph: Any, *args: Any, **kwargs: Any) -> Any:
            setattr(self, attribute, getattr(self, attribute) + 1)
            return original(graph, *args, **kwargs)

        return counted

    def uninstall(self) -> None:
        """Stop counting; the counts stay."""
        for name, original in self._saved.items():
            if original is None:
                delattr(self._class, name)
            else:
                setattr(self._class, name, original)
        self._saved = {}

    def counts(self) -> tuple[int, int] | None:
        """``(recorded, replays)`` so far, or None when counting was not available."""
        return (self.recorded, self.replays) if self.available else None

    def __enter__(self) -> GraphCounter:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


def inductor_cudagraph_counters() -> dict[str, int]:
    """Inductor's ``cudagraph*`` counters in this process (``torch._dynamo.utils.counters["inductor"]``,
    private: module docstring); an empty dict when there are none or torch moved them."""
    try:
        from torch._dynamo.utils import counters

        inductor = counters.get("inductor", {})
        return {str(key): int(value) for key, value in inductor.items() if "cudagraph" in str(key)}
    except Exception:  # a private structure: any change in torch only loses this figure
        return {}


def peak_reserved_bytes(device: torch.device) -> int | None:
    """``torch.cuda.max_memory_reserved`` (what the caching allocator holds, CUDA graph pools
    included, since the peak was last reset); None off CUDA (:data:`NEEDS_CUDA`)."""
    import torch

    if device.type != "cuda":
        return None
    return int(torch.cuda.max_memory_reserved(device))
