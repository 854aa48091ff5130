"""Memory budgets and peak-memory measurement for the batch-size finder (imports torch lazily).

- CUDA: the peak of ``torch.cuda.max_memory_allocated`` (bytes of live tensors on the device,
  everything the process holds there) over the measured steps; running out of memory is also "does
  not fit". Default budget: 90% of the device's total memory, leaving 10% for the caching
  allocator's fragmentation and the evaluation loop (our rule of thumb, not a measured constant).
- CPU: there is no out-of-memory error to catch before the host starts swapping or the kernel kills
  the job, so a budget decides. The figure is *tensor* memory: the model's parameters and buffers
  plus the peak of what the measured steps allocate through PyTorch's CPU allocator (batch,
  activations, gradients, optimizer state, the compiled code's buffers), read from the profiler's
  memory events (``torch.profiler.profile(profile_memory=True)``). It is exact and repeatable for a
  given shape; Python objects and allocator slack are not counted. Default budget: half of the
  host's available memory (``MemAvailable`` in ``/proc/meminfo``).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sagemaker_tc.errors import TuningError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

GIB = 1024**3
CUDA_BUDGET_FRACTION = 0.9
CPU_BUDGET_FRACTION = 0.5


@dataclass(frozen=True)
class MemoryBudget:
    """The most memory a tried batch may peak at.

    Attributes:
        bytes: the budget (bytes).
        source: where it comes from, for the report (e.g. ``"config memory_budget_gib=2.0"``,
            ``"90% of NVIDIA H200's 139.8 GiB"``).
    """

    bytes: int
    source: str


def format_bytes(value: int | None) -> str:
    """``1610612736`` -> ``"1.50 GiB"``; below 1 GiB in MiB; None -> ``"n/a"``."""
    if value is None:
        return "n/a"
    if abs(value) >= GIB:
        return f"{value / GIB:.2f} GiB"
    return f"{value / 1024**2:.1f} MiB"


def _available_host_bytes() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def resolve_budget(device: torch.device, budget_gib: float | None = None) -> MemoryBudget:
    """The budget for ``device``: ``budget_gib`` GiB when given, else the default for the device
    kind (module docstring).

    Raises:
        TuningError: ``budget_gib`` is not a number > 0, or is larger than the device's memory.
    """
    import torch

    total = None
    name = "this host"
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        total, name = properties.total_memory, properties.name
    if budget_gib is not None:
        if (
            isinstance(budget_gib, bool)
            or not isinstance(budget_gib, int | float)
            or not math.isfinite(budget_gib)
            or budget_gib <= 0
        ):
            raise TuningError(f"memory budget must be a finite number of GiB > 0 (got {budget_gib!r})")
        budget = int(budget_gib * GIB)
        if total is not None and budget > total:
            raise TuningError(
                f"memory budget {format_bytes(budget)} is larger than {name}'s {format_bytes(total)}; give at most "
                f"{total / GIB:.2f} GiB"
            )
        return MemoryBudget(budget, f"memory_budget_gib={budget_gib:g}")
    if total is not None:
        return MemoryBudget(
            int(total * CUDA_BUDGET_FRACTION), f"{CUDA_BUDGET_FRACTION:.0%} of {name}'s {format_bytes(total)}"
        )
    available = _available_host_bytes()
    return MemoryBudget(
        int(available * CPU_BUDGET_FRACTION),
        f"{CPU_BUDGET_FRACTION:.0%} of this host's available {format_bytes(available)}",
    )


def tensor_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors`` (shared storages counted once)."""
    seen: set[int] = set()
    total = 0
    for tensor in tensors:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in seen or storage.nbytes() == 0:
            continue
        seen.add(key)
        total += storage.nbytes()
    return total


class PeakMemory:
    """Context manager: the peak memory (bytes) of the code inside it on ``device``.

    ``base_bytes`` is added to the CPU figure (the profiler only sees allocations made inside the
    block; pass the bytes already live that count, e.g. the model's parameters). After the block,
    ``peak_bytes`` holds the figure.
    """

    def __init__(self, device: torch.device, base_bytes: int = 0) -> None:
        self.device = device
        self.base_bytes = base_bytes
        self.peak_bytes: int | None = None
        self._profiler = None

    def __enter__(self) -> PeakMemory:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._profiler.__enter__()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = int(torch.cuda.max_memory_allocated(self.device))
            return
        profiler, self._profiler = self._profiler, None
        profiler.__exit__(kind, error, traceback)
        if kind is not None:
            return
        events = [
            event
            for event in profiler.profiler.kineto_results.events()
            if event.device_type() == torch.autograd.DeviceType.CPU and event.nbytes() != 0
        ]
        events.sort(key=lambda event: event.start_ns())
        current = peak = 0
        for event in events:
            current += event.nbytes()
            peak = max(peak, current)
        self.peak_bytes = self.base_bytes + peak
