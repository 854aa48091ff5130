"""Measurements taken inside one bench variant's process: training FLOPs and peak memory (step times
and dynamo's work come from :mod:`sagemaker_tc.compiler.steps` and :mod:`sagemaker_tc.compiler.dynamo`,
as in a job).

Imports torch lazily (inside functions).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


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
