"""Private attributes of transformers, accelerate and torch_xla that sagemaker-tc reads or sets, each
wrapped here with the versions it was checked against (torch's own private APIs are in
:mod:`sagemaker_tc._internals`). Tests: ``tests/test_internals.py``.
"""

from __future__ import annotations

import sys
from typing import Any


# -- transformers ----------------------------------------------------------------------------------------
def attention_implementation(model: Any) -> str | None:
    """The attention kernel a Hugging Face model runs: ``model.config._attn_implementation``
    (``"sdpa"``, ``"eager"``, ``"flash_attention_2"``; transformers 4.36 to 5.24). None for other models."""
    value = getattr(getattr(model, "config", None), "_attn_implementation", None)
    return value if isinstance(value, str) else None


_TRAINER_SEARCH_DEPTH = 12


def calling_trainer(depth: int = _TRAINER_SEARCH_DEPTH) -> Any:
    """The ``transformers.Trainer`` whose method is on the call stack (``self`` of one of the
    ``depth`` callers' frames, read with ``sys._getframe``), else None.

    A ``TrainerCallback``'s ``on_init_end`` is called from ``Trainer.__init__`` with no reference to
    the Trainer; this finds it.
    """
    from transformers import Trainer

    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None


def set_trainer_batch_size(trainer: Any, batch_size: int) -> bool:
    """Set the batch a Trainer builds its training dataloader with: ``Trainer._train_batch_size``
    (transformers 4.26 to 5.24; copied from ``TrainingArguments.train_batch_size`` in ``__init__``
    and written by its own ``auto_find_batch_size``; there is no public setter).

    Returns:
        False when the Trainer has no such field (nothing changed), else True.
    """
    if not hasattr(trainer, "_train_batch_size"):
        return False
    trainer._train_batch_size = batch_size
    return True


def trainer_rows(trainer: Any) -> int | None:
    """The per-device batch a Trainer trains with: ``Trainer._train_batch_size`` (transformers 4.26
    to 5.24; :func:`set_trainer_batch_size`), else ``args.per_device_train_batch_size``; None when
    neither is an int."""
    rows = getattr(trainer, "_train_batch_size", None) or getattr(trainer.args, "per_device_train_batch_size", None)
    return rows if isinstance(rows, int) and rows > 0 else None


def logged_loss_filler(trainer: Any) -> Any:
    """What the Trainer's NaN/Inf filter adds in place of a non-finite loss: the mean of the losses
    since the last log, ``trainer._tr_loss / (1 + state.global_step - trainer._globalstep_last_logged)``
    (transformers 5.0 to 5.24, ``Trainer._run_epoch``; a 0-dim tensor, computed on the device). None
    when those fields are missing (transformers 4.x keeps ``tr_loss`` a local: the filter is left on)."""
    total = getattr(trainer, "_tr_loss", None)
    last = getattr(trainer, "_globalstep_last_logged", None)
    if total is None or not isinstance(last, int):
        return None
    return total / (1 + trainer.state.global_step - last)


def set_dataloader_non_blocking(loader: Any) -> bool:
    """Make accelerate's ``DataLoaderShard`` copy each batch to the device without waiting
    (``loader._non_blocking``, accelerate 1.0 to 1.16; what ``AcceleratorConfig(non_blocking=True)``
    sets at ``prepare``). Returns False when ``loader`` has no such field."""
    if not hasattr(loader, "_non_blocking"):
        return False
    loader._non_blocking = True
    return True


# -- accelerate and torch_xla dataloaders ----------------------------------------------------------
def innermost_dataloader(loader: Any) -> Any:
    """The loader a training dataloader finally iterates (``loader`` itself when it wraps nothing).

    Goes through torch_xla's ``MpDeviceLoader`` (private ``_loader``; torch_xla 2.9,
    ``torch_xla/distributed/parallel_loader.py``; accelerate's ``MpDeviceLoaderWrapper`` subclasses it)
    and accelerate's ``DataLoaderAdapter.base_dataloader`` (accelerate 1.x; its ``DataLoaderShard``
    passes ``isinstance(..., DataLoader)`` through a ``__class__`` property, but iterates the base
    loader, so an attribute set on the shard is not seen by the iteration). At most 5 levels.
    """
    seen = 0
    while seen < 5 and (inner := getattr(loader, "base_dataloader", None) or getattr(loader, "_loader", None)):
        loader, seen = inner, seen + 1
    return loader


def is_causal_lm(model: Any) -> bool:
    """True for a decoder-only model whose attention is causal: ``config.is_decoder`` set (not an
    encoder-decoder), or a class transformers lists as a causal LM whose ``model_type`` has no masked-LM
    head (BERT-like classes are listed as both and are causal only with ``is_decoder``). Reads
    ``transformers.models.auto.modeling_auto``'s ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` and
    ``MODEL_FOR_MASKED_LM_MAPPING_NAMES`` (transformers 4.36 to 5.24); False when transformers was
    never imported or the model has no ``config``."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False) is True:
        return False
    if getattr(config, "is_decoder", False) is True:
        return True
    if "transformers" not in sys.modules:
        return False
    try:
        from transformers.models.auto import modeling_auto
    except ImportError:  # pragma: no cover - a transformers without the auto mappings
        return False
    model_type = getattr(config, "model_type", None)
    causal = type(model).__name__ in set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    return causal and model_type not in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
