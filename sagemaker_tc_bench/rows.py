"""A bench row's figures from its variant's result: step time over windows, how far to trust it, speedup, MFU.

A variant's steady steps (every step after the first during which nothing compiled) are cut into up
to :data:`WINDOWS` equal blocks of consecutive steps (the earliest leftover steps are dropped). Each
block's mean step time is one measurement, as in ``torch.utils.benchmark``'s blocked measurements;
the row's step time is the median of the block means and its spread their interquartile range (IQR).

A row is *noisy* (:func:`noise_reasons`) when the IQR is above :data:`NOISY_IQR_FRACTION` of the
median, when fewer than :data:`MIN_WINDOWS` blocks could be measured, or when the host's 1-minute load
average around the variant was above the cores the bench may use: other work competed for the CPU.
A noisy row keeps its figures in the JSON, but its speedup is not printed as a number
(:func:`finish_row` sets ``speedup_noisy`` when the row or eager's row is noisy).

Imports no torch.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sagemaker_tc.compiler.steps import StepRecord, steady_steps
from sagemaker_tc_bench import hardware

WINDOWS = 5
"""Blocks the steady steps are cut into (fewer when there are fewer steady steps)."""
MIN_WINDOWS = 3
"""Fewer blocks than this give no usable spread: the row is noisy."""
NOISY_IQR_FRACTION = 0.10
"""An IQR above this fraction of the median marks the row noisy (the level at which
``torch.utils.benchmark`` warns of environmental influence)."""


@dataclass(frozen=True)
class StepWindows:
    """A variant's steady step time over windows.

    Attributes:
        window_ms: each block's mean step time, ms, in order.
        steps_per_window: steps in each block.
        median_ms: median of ``window_ms`` (None without steady steps).
        q1_ms, q3_ms: first and third quartiles of ``window_ms`` (None with fewer than 2 blocks).
    """

    window_ms: list[float]
    steps_per_window: int
    median_ms: float | None
    q1_ms: float | None
    q3_ms: float | None

    @property
    def iqr_ms(self) -> float | None:
        """Interquartile range of the block means, ms."""
        return None if self.q1_ms is None or self.q3_ms is None else self.q3_ms - self.q1_ms


def step_windows(step_seconds: Sequence[float], compiled_during: Sequence[bool], windows: int = WINDOWS) -> StepWindows:
    """Cut the steady steps of ``step_seconds`` (seconds per step; the runtime's rule,
    :func:`sagemaker_tc.compiler.steps.steady_steps`: the first step and every step during which torch
    compiled are left out) into up to ``windows`` blocks (module docstring)."""
    records = [
        StepRecord(seconds, 0, compiled) for seconds, compiled in zip(step_seconds, compiled_during, strict=True)
    ]
    steady = [record.seconds for record in steady_steps(records)]
    count = min(windows, len(steady))
    if count == 0:
        return StepWindows([], 0, None, None, None)
    size = len(steady) // count
    used = steady[len(steady) - size * count :]
    means = [1000 * statistics.fmean(used[k * size : (k + 1) * size]) for k in range(count)]
    q1 = q3 = None
    if count >= 2:
        q1, _, q3 = statistics.quantiles(means, n=4, method="inclusive")
    return StepWindows(means, size, statistics.median(means), q1, q3)


def noise_reasons(windows: StepWindows, load_avg_1m: Sequence[float] | None, usable_cores: int) -> list[str]:
    """Why the row's step time cannot be trusted (empty: it can).

    Args:
        windows: the row's :func:`step_windows`.
        load_avg_1m: the host's 1-minute load average before and after the variant's steps.
        usable_cores: the cores this process may run on.
    """
    reasons = []
    if len(windows.window_ms) < MIN_WINDOWS:
        reasons.append(f"{len(windows.window_ms)} window(s) of steady steps: too few to know the spread")
    elif windows.median_ms and windows.iqr_ms is not None and windows.iqr_ms > NOISY_IQR_FRACTION * windows.median_ms:
        reasons.append(
            f"step times vary: IQR {windows.iqr_ms:.3g} ms is {100 * windows.iqr_ms / windows.median_ms:.0f}% of the "
            f"median {windows.median_ms:.3g} ms over {len(windows.window_ms)} windows"
        )
    peak_load = max(load_avg_1m or [0.0])
    if peak_load > usable_cores:
        reasons.append(f"host load {peak_load:.1f} above its {usable_cores} usable cores: other work competed")
    return reasons


RULES = {
    "step_ms": "median over windows of the steady steps (after the first, no dynamo compile during the step): the "
    "steady steps are cut into up to 5 blocks and each block's mean step time is one window, ms",
    "step_ms_iqr": "interquartile range of the windows' step times, ms",
    "noisy": "the windows' IQR is above 10% of their median, fewer than 3 windows were measured, or the host's "
    "1-minute load average was above its usable cores; a noisy row's speedup is not printed as a figure",
    "samples_per_s": "batch_size / step_ms",
    "first_step_s": "wall time of the first optimizer step (includes compilation for compiled variants), s; "
    "it is the first of the untimed warm-up every variant runs alike (details.warmup_steps) before the timed steps",
    "peak_memory": "CUDA: torch.cuda.max_memory_allocated during training; CPU: the variant process's peak RSS",
    "repeats": "a variant named NAME@N is NAME run again as its own row (own process, empty compile cache); a "
    "sagemaker-tc*@N row's ours_vs_peer is against hf-torch-compile@N when that ran (the ABBA pair)",
    "recompiles": "dynamo compilations of an already-compiled frame (compile id N/k, k > 0)",
    "mfu": "flops_per_sample * samples_per_s / peak FLOP/s of the GPU for the dtype (null on CPU or unknown GPU)",
    "flops_per_sample": "6 x (weight elements x rows multiplied, all nn.Linear/Conv1D calls of one sample's "
    "forward) ~ 6 N per token (Kaplan et al. 2020, sec. 2.1); attention scores left out",
    "speedup_vs_eager": "eager step_ms / variant step_ms (same model); speedup_range: eager q1 / variant q3 to "
    "eager q3 / variant q1",
    "vs_uncompiled": "on compiled rows (sagemaker-tc*, hf-torch-compile): the row's samples_per_s / eager-tuned's "
    "(uncompiled, the same optimizer and attention; same model); vs_uncompiled_noisy when either row is noisy",
    "host_ms": "median over the steady steps of each step's host time: time.perf_counter from the step's begin to its "
    "end, no device sync (for a GPU-bound step it is well under step_ms)",
    "gpu_busy_ms": "CUDA: a separate untimed pass of 5 steps after the timed ones under torch.profiler; the durations "
    "of all device events (kernels, copies, fills) summed / 5, ms; null on CPU (needs CUDA)",
    "syncs_per_step": "CUDA: a separate untimed pass of 5 steps under torch.cuda.set_sync_debug_mode('warn'); its "
    "'synchronizing CUDA operation' warnings / 5 (a lower bound: warnings off Python threads are not seen); null on "
    "CPU (needs CUDA)",
    "cuda_graphs_recorded": "CUDA graphs captured in the whole run (calls of torch.cuda.CUDAGraph.capture_begin, "
    "warm-up included; cuda_graphs_recorded_timed: during the timed steps); cuda_graph_replays_per_step: "
    "CUDAGraph.replay calls during the timed steps / timed steps; 0 where nothing is captured (every CPU row)",
    "peak_reserved_bytes": "CUDA: torch.cuda.max_memory_reserved (the caching allocator's segments, CUDA graph pools "
    "included) during training; null on CPU",
    "step_shape": "every step as transformers.Trainer runs it: forward, backward, clip_grad_norm_ at 1.0 (norm not "
    "read), optimizer.step(), a linear LambdaLR step, zero_grad(set_to_none=True), the loss read (.item()) every 50 "
    "steps",
    "ours_vs_peer_ro": "on sagemaker-tc rows: the row's samples_per_s / hf-torch-compile-reduce-overhead's (same "
    "model); range and noisy as for ours_vs_peer",
    "ours_vs_peer": "on sagemaker-tc rows: the row's samples_per_s / hf-torch-compile's samples_per_s (same model); "
    "ours_vs_peer_range from the quartiles as for speedup_range; ours_vs_peer_noisy when either row is noisy",
}
"""How each figure of a row is made (the result document's ``rules``)."""


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_cpu_threads() -> int:
    """``--cpu-threads`` when not given: one fewer than the usable cores, at least 1, so the variant's
    threads, the bench's own process and the system never ask for more cores than there are."""
    return max(1, usable_cores() - 1)


def finish_row(result: dict, baseline: dict | None, *, batch_size: int, seq_len: int, dtype: str, cores: int) -> dict:
    """A variant's row: a copy of its ``result`` with the step time over windows, the noise verdict,
    the speedup (eager's step time / the row's) and MFU.

    Args:
        result: the variant's result (the worker's dict, or a failed/skipped one).
        baseline: eager's result for the same model, when it ran.
        batch_size: samples per step; seq_len: tokens per sample; dtype: ``fp32``/``bf16`` (for MFU).
        cores: the usable cores (a higher load average marks the row noisy).
    """
    row = dict(result)
    ok = row.get("status") == "ok"
    row.update(speedup_vs_eager=None, speedup_noisy=None, mfu=None, ours_vs_peer=None, ours_vs_peer_noisy=None)
    row.update(vs_uncompiled=None, vs_uncompiled_noisy=None)
    if ok:
        _add_windows(row, batch_size, seq_len, cores)
    if ok and baseline is not None and baseline.get("status") == "ok":
        eager = dict(baseline)
        _add_windows(eager, batch_size, seq_len, cores)
        if row["step_ms"] and eager["step_ms"]:
            row["speedup_vs_eager"] = eager["step_ms"] / row["step_ms"]
            row["speedup_range"] = _speedup_range(eager, row)
            row["speedup_noisy"] = bool(row["noisy"] or eager["noisy"])
    if ok:
        peak = hardware.peak_flops(row.get("device_name"), dtype)
        row["mfu"] = hardware.mfu(row.get("flops_per_sample"), row.get("samples_per_s"), peak)
    return row


def _add_windows(row: dict, batch_size: int, seq_len: int, cores: int) -> None:
    """Step time from the windows, throughput from it, and the verdict."""
    windows = step_windows(row.get("step_seconds") or [], row.get("compiled_during") or [])
    step_s = windows.median_ms / 1000 if windows.median_ms else None
    row.update(
        step_ms=windows.median_ms,
        step_ms_q1=windows.q1_ms,
        step_ms_q3=windows.q3_ms,
        step_ms_iqr=windows.iqr_ms,
        window_ms=windows.window_ms,
        steps_per_window=windows.steps_per_window,
        samples_per_s=batch_size / step_s if step_s else None,
        tokens_per_s=batch_size * seq_len / step_s if step_s else None,
    )
    row["noise"] = noise_reasons(windows, row.get("load_avg_1m"), cores)
    row["noisy"] = bool(row["noise"])


def _speedup_range(eager: dict, row: dict) -> list[float] | None:
    """The speedup between the two rows' quartiles: [eager q1 / row q3, eager q3 / row q1]."""
    if None in (eager["step_ms_q1"], eager["step_ms_q3"], row["step_ms_q1"], row["step_ms_q3"]):
        return None
    return [eager["step_ms_q1"] / row["step_ms_q3"], eager["step_ms_q3"] / row["step_ms_q1"]]


def add_uncompiled_ratio(row: dict, uncompiled: dict | None) -> None:
    """Set ``vs_uncompiled`` (the row's samples/s / the uncompiled same-settings row's,
    :data:`~sagemaker_tc_bench.variants.UNCOMPILED_SAME_SETTINGS`) and ``vs_uncompiled_noisy`` on a
    compiled variant's finished row; left None when either did not run or has no step time."""
    if uncompiled is None or row.get("status") != "ok" or uncompiled.get("status") != "ok":
        return
    if not row.get("samples_per_s") or not uncompiled.get("samples_per_s"):
        return
    row["vs_uncompiled"] = row["samples_per_s"] / uncompiled["samples_per_s"]
    row["vs_uncompiled_noisy"] = bool(row["noisy"] or uncompiled["noisy"])


def add_peer_ratio(row: dict, peer: dict | None, key: str = "ours_vs_peer") -> None:
    """Set ``<key>`` (the row's samples/s / the peer's), ``<key>_range`` and ``<key>_noisy`` on one of
    our finished rows, against a peer's finished row of the same model; left None when either did not
    run or has no step time.

    Args:
        row: a :func:`finish_row` row of a ``sagemaker-tc`` variant.
        peer: the :func:`finish_row` row of ``hf-torch-compile`` (or, with ``key="ours_vs_peer_ro"``,
            ``hf-torch-compile-reduce-overhead``) for the same model, when it ran.
        key: the row's field for the ratio (``ours_vs_peer`` or ``ours_vs_peer_ro``).
    """
    row.setdefault(key, None)
    row.setdefault(f"{key}_noisy", None)
    if peer is None or row.get("status") != "ok" or peer.get("status") != "ok":
        return
    if not row.get("samples_per_s") or not peer.get("samples_per_s"):
        return
    row[key] = row["samples_per_s"] / peer["samples_per_s"]
    row[f"{key}_range"] = _speedup_range(peer, row)
    row[f"{key}_noisy"] = bool(row["noisy"] or peer["noisy"])
