"""Training the two sides of a verification the same way, and comparing their parameters.

:func:`train_losses` runs the AdamW steps (recording, for the eager side, each parameter element's
largest gradient); :func:`parameter_difference` compares the final parameters over the elements that
got a gradient.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

LossFn = Callable[[Any, Any], Any]

NO_GRADIENT_FRACTION = 1e-6
"""A parameter element whose eager gradient never exceeded this fraction of the largest gradient
element seen is left out of ``max_param_diff``: it gets no gradient signal, only float noise (an
attention key bias's gradient is zero, since softmax ignores a shift shared by every key; measured
on tiny gpt2: 1.4e-10 against real gradients of 2.4e-5 and more), and AdamW's normalized update
turns that noise into lr-sized steps that differ between any two kernels, compiled or not."""


def train_losses(
    model: torch.nn.Module,
    batches: Sequence[Any],
    *,
    steps: int,
    lr: float,
    loss_fn: LossFn,
    gradient_peaks: list[torch.Tensor] | None = None,
) -> tuple[list[float], float]:
    """Train ``model`` for ``steps`` AdamW steps (``lr``, torch's other defaults) on ``batches``
    (cycled) and return each step's loss (taken before that step's update) and the wall time, s.
    With ``gradient_peaks`` (an empty list), it is filled with each parameter's element-wise largest
    absolute gradient over the steps (in ``model.parameters()`` order; the timing then includes it)."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    parameters = list(model.parameters())
    if gradient_peaks is not None:
        gradient_peaks[:] = [torch.zeros_like(p, dtype=torch.float32) for p in parameters]
    losses = []
    started = time.perf_counter()
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, batches[step % len(batches)])
        loss.backward()
        if gradient_peaks is not None:
            for peak, parameter in zip(gradient_peaks, parameters, strict=True):
                if parameter.grad is not None:
                    torch.maximum(peak, parameter.grad.detach().abs().float(), out=peak)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses, time.perf_counter() - started


def parameter_difference(compiled: Any, eager: Any, gradient_peaks: list[Any]) -> tuple[float, int]:
    """The largest absolute difference between ``compiled``'s and ``eager``'s parameters over the
    elements that got a gradient (:data:`NO_GRADIENT_FRACTION` of the largest peak), and how many
    elements were left out."""
    largest = max((float(peak.max()) for peak in gradient_peaks if peak.numel()), default=0.0)
    floor = NO_GRADIENT_FRACTION * largest
    worst, left_out = 0.0, 0
    for a, b, peak in zip(compiled.parameters(), eager.parameters(), gradient_peaks, strict=True):
        signal = peak > floor
        left_out += int(signal.numel() - signal.sum())
        if bool(signal.any()):
            worst = max(worst, float((a.detach() - b.detach()).abs()[signal].max()))
    return worst, left_out
