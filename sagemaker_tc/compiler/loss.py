"""The loss of one training batch when the caller gives no loss function (the batch-size finder,
``sagemaker-tc verify`` and the compile plans share this rule)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagemaker_tc.errors import LossNotFoundError


def compute_loss(model: Any, batch: Any) -> Any:
    """Run ``model`` on ``batch`` and return the loss.

    The batch is passed as ``model(**batch)`` for a mapping, ``model(*batch)`` for a tuple or list,
    else ``model(batch)``. The loss is the output's ``.loss`` (Hugging Face models given labels),
    its ``"loss"`` entry, or the output itself when it is a one-element tensor.

    Raises:
        LossNotFoundError: the output holds no loss (give a ``loss_fn(model, batch)``).
    """
    import torch

    if isinstance(batch, Mapping):
        output = model(**batch)
    elif isinstance(batch, (tuple, list)):
        output = model(*batch)
    else:
        output = model(batch)
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, Mapping):
        loss = output.get("loss")
    if loss is None and isinstance(output, torch.Tensor) and output.numel() == 1:
        loss = output
    if loss is None:
        raise LossNotFoundError(
            f"cannot find a loss in {type(model).__name__}'s output ({type(output).__name__}): return a scalar tensor "
            "or an output with .loss (e.g. a Hugging Face model given labels), or pass loss_fn(model, batch) -> loss"
        )
    return loss
