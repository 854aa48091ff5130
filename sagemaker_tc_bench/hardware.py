"""Peak FLOP/s of known GPUs (the MFU denominator) and a record of the machine and versions a bench ran on.

Imports no torch at module level.

Peak table: dense (no 2:4 sparsity) tensor-core BF16 and non-tensor FP32 throughput, FLOP/s, from
NVIDIA's datasheets. NVIDIA prints the sparse figure for BF16 with a footnote ("Specifications 1/2
lower without sparsity"); the dense figure is half of it.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class GpuPeak:
    """Peak dense throughput of one GPU model.

    Attributes:
        label: the name shown in results.
        pattern: regex matched (case-insensitive, anchored at the start) against
            ``torch.cuda.get_device_name()`` with a leading ``"NVIDIA "`` removed.
        bf16_flops: dense BF16 tensor-core peak, FLOP/s.
        fp32_flops: non-tensor FP32 peak, FLOP/s (what fp32 matmuls run at when TF32 is off,
            torch's default).
        source: where the numbers come from.
    """

    label: str
    pattern: str
    bf16_flops: float
    fp32_flops: float
    source: str


# Order matters: the first match wins (A100 before A10, L40S before L4, H200 NVL/H100 PCIe before SXM).
GPU_PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak(
        "H200 SXM",
        r"H200(?! NVL)",
        989e12,
        67e12,
        "NVIDIA H200 datasheet: BF16 1,979 TFLOP/s with sparsity (989 dense), FP32 67 TFLOP/s; "
        "same numbers as H100 SXM",
    ),
    GpuPeak(
        "H100 PCIe",
        r"H100 PCIe",
        756e12,
        51e12,
        "NVIDIA H100 datasheet, PCIe column: BF16 1,513 TFLOP/s with sparsity (756 dense), FP32 51 TFLOP/s",
    ),
    GpuPeak(
        "H100 SXM",
        r"H100(?! NVL)",
        989e12,
        67e12,
        "NVIDIA H100 datasheet, SXM column: BF16 1,979 TFLOP/s with sparsity (989 dense), FP32 67 TFLOP/s",
    ),
    GpuPeak(
        "A100",
        r"A100",
        312e12,
        19.5e12,
        "NVIDIA A100 datasheet (40 GB and 80 GB, SXM and PCIe): BF16 312 TFLOP/s dense, FP32 19.5 TFLOP/s",
    ),
    GpuPeak(
        "A10G",
        r"A10G\b",
        70e12,
        31.2e12,
        "AWS publishes no A10G datasheet; 70 TFLOP/s dense BF16 and 31.2 TFLOP/s FP32 as reported in "
        "Baseten's 'NVIDIA A10 vs A10G' comparison (secondary source, not verified against NVIDIA)",
    ),
    GpuPeak(
        "A10",
        r"A10\b",
        125e12,
        31.2e12,
        "NVIDIA A10 datasheet: BF16 250 TFLOP/s with sparsity (125 dense), FP32 31.2 TFLOP/s",
    ),
    GpuPeak(
        "L4",
        r"L4\b",
        121e12,
        30.3e12,
        "NVIDIA L4 datasheet: BF16 242 TFLOP/s with sparsity (121 dense), FP32 30.3 TFLOP/s",
    ),
)


def gpu_peak(device_name: str) -> GpuPeak | None:
    """The peak entry for a CUDA device name (e.g. ``"NVIDIA H200"``), or None when it is not in
    :data:`GPU_PEAKS` (MFU is then reported as null)."""
    name = re.sub(r"^NVIDIA\s+", "", device_name.strip(), flags=re.IGNORECASE)
    for peak in GPU_PEAKS:
        if re.match(peak.pattern, name, flags=re.IGNORECASE):
            return peak
    return None


def peak_flops(device_name: str | None, dtype: str) -> float | None:
    """Peak FLOP/s for ``dtype`` (``"bf16"`` or ``"fp32"``) on the named CUDA device; None on CPU
    (``device_name`` None) or for an unknown GPU."""
    if device_name is None:
        return None
    peak = gpu_peak(device_name)
    if peak is None:
        return None
    return peak.bf16_flops if dtype == "bf16" else peak.fp32_flops


def mfu(flops_per_sample: float | None, samples_per_second: float | None, peak: float | None) -> float | None:
    """Model FLOPs utilization, a fraction in [0, 1]: achieved model FLOP/s over the device's peak.

    Args:
        flops_per_sample: training FLOPs per sample (see
            :func:`sagemaker_tc_bench.measure.training_flops_per_sample`).
        samples_per_second: steady-state throughput, samples/s.
        peak: the device's peak FLOP/s for the run's dtype (:func:`peak_flops`).

    Returns:
        None when any input is unknown.
    """
    if not flops_per_sample or not samples_per_second or not peak:
        return None
    return flops_per_sample * samples_per_second / peak


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def environment() -> dict:
    """The machine and versions, for a result file: python, platform, CPU model and usable cores,
    sagemaker-tc/torch/transformers/accelerate versions (installed distributions, read without
    importing them)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_cores": cores,
        "versions": {
            name: _package_version(name) for name in ("sagemaker-tc", "torch", "transformers", "accelerate", "triton")
        },
    }


def write_result(path: Path | None, command: str, **fields: Any) -> dict[str, Any]:
    """A benchmark's result document: ``command``, ``created`` (UTC, ISO 8601), ``machine``
    (:func:`environment` plus the 1-minute load average at the end, which says whether the run
    had the machine to itself), then ``fields`` in order. Written as indented JSON to ``path``
    (folders created) unless ``path`` is None; returned either way.

    Raises:
        OSError: ``path`` cannot be written.
    """
    document = {
        "command": command,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {**environment(), "load_avg_1m_end": os.getloadavg()[0]},
        **fields,
    }
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return document
