"""Measurements taken inside one bench variant's process: training FLOPs, dynamo's work, peak memory.

Imports torch lazily (inside functions).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

_COMPILE_ID_RE = re.compile(r"(\d+)/(\d+)")
# Dynamo keeps the last 64 compilation records by default; a bench run needs all of them.
_COMPILATION_METRICS_LIMIT = 4096


def training_flops_per_sample(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> float:
    """Estimated training FLOPs for one sample: 6 x (parameters applied per token) x tokens.

    The "6 N per token" rule (2 FLOPs per multiply-add in the forward pass, twice that in the
    backward pass) is Kaplan et al., "Scaling Laws for Neural Language Models" (2020), section 2.1;
    like there, attention-score FLOPs (which grow with sequence length) and element-wise work are
    left out, so MFU is slightly understated (BERT-base at T=128: 0.509 vs 0.524 GFLOP per token
    with the attention term; ``shared/research/perf.md`` section 5.1).

    "Parameters applied per token" is counted, not read from ``model.parameters()``: one eager
    forward of the batch's first sample runs with hooks on every ``nn.Linear`` and transformers'
    ``Conv1D`` (GPT-2) that add weight elements x rows they multiply. So ALBERT's one shared layer
    counts once per use, a tied LM head counts (it is a matmul though its weight is the embedding),
    embedding lookups count zero, and a classifier applied to the first token only counts 1/T.

    Args:
        model: the model (eager, before compiling), in training mode.
        batch: a training batch (``model(**batch)``); only its first row is used.

    Returns:
        FLOPs per sample (float).
    """
    import torch

    linear_types: tuple[type, ...] = (torch.nn.Linear,)
    try:
        from transformers.pytorch_utils import Conv1D

        linear_types += (Conv1D,)
    except ImportError:
        pass
    macs = 0

    def count(module: torch.nn.Module, args: tuple, output: Any) -> None:
        nonlocal macs
        weight = module.weight
        in_features = weight.shape[1] if isinstance(module, torch.nn.Linear) else weight.shape[0]
        rows = args[0].numel() // in_features
        macs += weight.numel() * rows

    sample = {key: value[:1] for key, value in batch.items()}
    handles = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, linear_types)]
    try:
        with torch.no_grad():
            model(**sample)
    finally:
        for handle in handles:
            handle.remove()
    return 6.0 * macs


@dataclass(frozen=True)
class DynamoCounts:
    """What dynamo did in this process so far.

    Attributes:
        graphs: graphs dynamo captured and compiled (``counters["stats"]["unique_graphs"]``).
        frames_compiled: frame compilations recorded in dynamo's compilation metrics.
        recompiles: compilations of a frame compiled before (compile id ``N/k`` with k > 0).
        graph_breaks: graph breaks, all reasons together (``counters["graph_break"]``).
        compile_seconds: dynamo's own total of frame compile time, seconds.
    """

    graphs: int
    frames_compiled: int
    recompiles: int
    graph_breaks: int
    compile_seconds: float


def prepare_dynamo_counts() -> None:
    """Keep every compilation record (call once, before anything compiles)."""
    from torch._dynamo.utils import set_compilation_metrics_limit

    set_compilation_metrics_limit(_COMPILATION_METRICS_LIMIT)


def dynamo_counts() -> DynamoCounts:
    """Read dynamo's counters and compilation records (all zero when torch was never imported)."""
    if "torch" not in sys.modules:
        return DynamoCounts(0, 0, 0, 0, 0.0)
    from torch._dynamo.utils import counters, get_compilation_metrics

    records = get_compilation_metrics()
    recompiles = 0
    for record in records:
        match = _COMPILE_ID_RE.search(record.compile_id or "")
        if match and int(match.group(2)) > 0:
            recompiles += 1
    return DynamoCounts(
        graphs=int(counters["stats"]["unique_graphs"]),
        frames_compiled=len(records),
        recompiles=recompiles,
        graph_breaks=int(sum(counters["graph_break"].values())),
        compile_seconds=float(sum(record.entire_frame_compile_time_s or 0.0 for record in records)),
    )


def reset_peak_memory(device: torch.device) -> None:
    """Start CUDA peak-memory accounting afresh (no-op on CPU, where the process peak RSS is used)."""
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: torch.device) -> tuple[int, str]:
    """Peak memory of this process, bytes, and what was measured.

    Returns:
        ``(bytes, "cuda_max_allocated")``: ``torch.cuda.max_memory_allocated`` (tensors the caching
        allocator handed out, since :func:`reset_peak_memory`) on CUDA; ``(bytes, "cpu_peak_rss")``:
        the process's peak resident set size (``getrusage`` ``ru_maxrss``, whole process life,
        including Python, libraries and compilation) on CPU.
    """
    import resource

    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    scale = 1 if sys.platform == "darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale, "cpu_peak_rss"
