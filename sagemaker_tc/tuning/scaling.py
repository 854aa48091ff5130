"""Learning-rate scaling rules for a changed batch size, and the warm-up that goes with them.

Pure Python (no torch). Batches here are *global* batches (per-device batch x gradient
accumulation x data-parallel world size): the rules are stated for the number of samples behind
one optimizer step. Changing only the per-device batch changes the global batch by the same
factor, so the ratio is the same either way.

Rules (``lr_scaling``):

- ``linear``: ``lr_new = lr * B_new / B_old``. The linear scaling rule of Goyal et al., "Accurate,
  Large Minibatch SGD: Training ImageNet in 1 Hour" (2017, arXiv:1706.02677, section 2.1), derived
  for SGD; also what SMTC's documentation told users to do after raising the batch size.
- ``sqrt``: ``lr_new = lr * sqrt(B_new / B_old)``. Square-root scaling, argued for SGD by
  Krizhevsky, "One weird trick for parallelizing convolutional neural networks" (2014,
  arXiv:1404.5997) and Hoffer et al., "Train longer, generalize better" (2017, arXiv:1705.08741),
  and derived for Adam-style optimizers by Malladi et al., "On the SDEs and Scaling Rules for
  Adaptive Gradient Algorithms" (2022, arXiv:2205.10287). Usually the safer rule for AdamW
  fine-tuning.
- ``none``: keep the learning rate.

Warm-up (:func:`scale_warmup_steps`): Goyal et al. (section 2.2) warm up over a fixed amount of
*data* (epochs), not a fixed number of steps. A warm-up given in steps is therefore rescaled by
``B_old / B_new`` (rounded up, and at least 1 when it was at least 1) so it covers the same number of
samples; a warm-up given as a fraction of training (``warmup_ratio``, or HF's ``warmup_steps < 1``)
already covers the same share of the data and is kept.
"""

from __future__ import annotations

import math
from typing import Literal

from sagemaker_tc.errors import TuningError

LrScaling = Literal["linear", "sqrt", "none"]
RULES: tuple[str, ...] = ("linear", "sqrt", "none")


def _check_batch(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TuningError(f"{name} must be a positive int (got {value!r})")


def lr_scale_factor(old_batch: int, new_batch: int, rule: str) -> float:
    """The factor the learning rate is multiplied by when the global batch goes from ``old_batch``
    to ``new_batch`` under ``rule`` (``linear``: ratio; ``sqrt``: square root of the ratio;
    ``none``: 1.0).

    Raises:
        TuningError: a batch that is not a positive int, or an unknown rule.
    """
    _check_batch("old_batch", old_batch)
    _check_batch("new_batch", new_batch)
    ratio = new_batch / old_batch
    if rule == "linear":
        return ratio
    if rule == "sqrt":
        return math.sqrt(ratio)
    if rule == "none":
        return 1.0
    raise TuningError(f"unknown learning-rate scaling rule {rule!r}; accepted: {', '.join(RULES)}")


def scale_learning_rate(lr: float, old_batch: int, new_batch: int, rule: str) -> float:
    """``lr`` rescaled for a global batch going from ``old_batch`` to ``new_batch`` under ``rule``
    (see the module docstring for the rules and their sources). Example: ``lr=5e-5``, 32 -> 128
    samples: linear gives 2e-4, sqrt 1e-4.

    Raises:
        TuningError: ``lr`` not a finite number > 0, a bad batch, or an unknown rule.
    """
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr) or lr <= 0:
        raise TuningError(f"learning rate must be a finite number > 0 (got {lr!r})")
    return lr * lr_scale_factor(old_batch, new_batch, rule)


def scale_warmup_steps(warmup_steps: float, old_batch: int, new_batch: int) -> float:
    """Warm-up steps for the new global batch, covering the same number of samples.

    A whole number of steps (``>= 1``) becomes ``ceil(warmup_steps * old_batch / new_batch)``; 0
    stays 0; a fraction of training (``0 < warmup_steps < 1``, Hugging Face's convention, the same
    as ``warmup_ratio``) is returned unchanged. Example: 100 warm-up steps at 32 samples -> 25 at
    128; 10 steps at 8 -> 1 at 104.

    Raises:
        TuningError: negative or non-numeric ``warmup_steps``, or a bad batch.
    """
    _check_batch("old_batch", old_batch)
    _check_batch("new_batch", new_batch)
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int | float) or warmup_steps < 0:
        raise TuningError(f"warmup_steps must be a number >= 0 (got {warmup_steps!r})")
    if warmup_steps < 1:
        return warmup_steps
    return max(1, math.ceil(int(warmup_steps) * old_batch / new_batch))


def scale_max_steps(max_steps: int, old_batch: int, new_batch: int) -> int:
    """A step budget (``max_steps``) for the new global batch that trains on at least as many
    samples as before: ``ceil(max_steps * old_batch / new_batch)``. Without this a larger batch with
    the same ``max_steps`` would silently train on more data. Values <= 0 (no step budget) are
    returned unchanged.

    Raises:
        TuningError: a bad batch.
    """
    _check_batch("old_batch", old_batch)
    _check_batch("new_batch", new_batch)
    if max_steps <= 0:
        return max_steps
    return max(1, math.ceil(max_steps * old_batch / new_batch))


def steps_per_epoch(num_samples: int, per_device_batch: int, world_size: int = 1, accumulation: int = 1) -> int:
    """Optimizer steps in one epoch, as Hugging Face's Trainer counts them: batches per device per
    epoch ``ceil(num_samples / (per_device_batch * world_size))`` (the sampler pads the last batch
    across ranks), divided by ``accumulation`` and rounded up (a last, partial accumulation still
    steps: ``Trainer.set_initial_training_values``), at least 1.

    Raises:
        TuningError: a non-positive batch, world size or accumulation, or negative ``num_samples``.
    """
    _check_batch("per_device_batch", per_device_batch)
    _check_batch("world_size", world_size)
    _check_batch("accumulation", accumulation)
    if num_samples < 0:
        raise TuningError(f"num_samples must be >= 0 (got {num_samples})")
    batches = math.ceil(num_samples / (per_device_batch * world_size))
    return max(1, math.ceil(batches / accumulation))
