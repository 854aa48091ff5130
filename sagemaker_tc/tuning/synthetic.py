"""Training batches built from a Hugging Face model's config, for the batch-size finder when no
data is at hand (the Trainer path tunes in ``on_init_end``, before any dataloader exists).

Memory depends on shapes, not values, so a batch of ``b`` rows of ``seq_len`` random token ids
(all real tokens: attention mask of ones, the worst case for padding-free kernels) with labels of
the model's task stands in for real data. Random values come from a private generator (seed 0):
the global RNG is not touched.

Tasks, by the model class name's ending (Hugging Face's naming):

- ``ForSequenceClassification``: ``labels`` (b,) class ids (float scores when ``num_labels == 1``);
- ``ForCausalLM``, ``LMHeadModel``, ``ForMaskedLM``, ``ForPreTraining`` (MLM part): ``labels`` = the
  input ids (b, seq_len);
- ``ForConditionalGeneration``, ``ForSeq2SeqLM`` (encoder-decoder): ``labels`` (b, seq_len) target
  ids, so the decoder runs at the same length as the encoder (the worst case);
- ``ForTokenClassification``: ``labels`` (b, seq_len) class ids;
- ``ForQuestionAnswering``: ``start_positions`` and ``end_positions`` (b,).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sagemaker_tc.errors import TuningError

if TYPE_CHECKING:
    import torch

_LM_ENDINGS = ("ForCausalLM", "LMHeadModel", "ForMaskedLM")
_SEQ2SEQ_ENDINGS = ("ForConditionalGeneration", "ForSeq2SeqLM")
SUPPORTED_HEADS = (
    "ForSequenceClassification",
    *_LM_ENDINGS,
    *_SEQ2SEQ_ENDINGS,
    "ForTokenClassification",
    "ForQuestionAnswering",
)
# Models whose position ids start after the padding index (RoBERTa family): usable length is
# max_position_embeddings - pad_token_id - 1 (514 -> 512).
_OFFSET_POSITION_MODELS = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text")


def max_sequence_length(model: Any) -> int | None:
    """The longest sequence a Hugging Face model's position table takes, from its config
    (``max_position_embeddings``, ``n_positions``, ``max_length``...), None when it has none
    (relative positions) or the model is not a Hugging Face one."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            if getattr(config, "model_type", None) in _OFFSET_POSITION_MODELS:
                pad = getattr(config, "pad_token_id", None) or 0
                value -= pad + 1
            return value
    return None


def check_supported_head(model: Any) -> None:
    """Raise :class:`TuningError` unless synthetic batches can be built for ``model`` (a Hugging
    Face model with one of :data:`SUPPORTED_HEADS`)."""
    _task(model)


def _task(model: Any) -> str:
    name = type(model).__name__
    for ending in SUPPORTED_HEADS:
        if name.endswith(ending):
            if ending in _LM_ENDINGS:
                return "lm"
            if ending in _SEQ2SEQ_ENDINGS:
                return "seq2seq"
            return ending
    raise TuningError(
        f"cannot build training inputs for {name}: batch_size='auto' builds them for Hugging Face models ending in "
        f"{', '.join(SUPPORTED_HEADS)}. For other models pass make_batch (b -> one batch of b samples) to "
        "sagemaker_tc.tune_batch_size or sagemaker_tc.find_max_batch"
    )


def batch_maker(model: Any, seq_len: int, device: torch.device | str | None = None) -> Callable[[int], dict]:
    """``make(b)`` -> a dict of tensors for ``model(**batch)``: ``input_ids`` and
    ``attention_mask`` (b, seq_len) int64 on ``device`` (default: the model's), plus the labels of
    its task (module docstring).

    Raises:
        TuningError: the model's class is not a supported head, it has no ``config.vocab_size``, or
            ``seq_len`` is not positive or is longer than its position table.
    """
    import torch

    task = _task(model)
    config = model.config
    vocab = getattr(config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 2:
        raise TuningError(f"{type(model).__name__}'s config has no usable vocab_size ({vocab!r})")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise TuningError(f"seq_len must be a positive int (got {seq_len!r})")
    limit = max_sequence_length(model)
    if limit is not None and seq_len > limit:
        raise TuningError(f"seq_len {seq_len} is longer than {type(model).__name__}'s {limit} positions")
    target = torch.device(device) if device is not None else next(model.parameters()).device
    num_labels = getattr(config, "num_labels", 2) or 2

    def make(batch_size: int) -> dict:
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(1, vocab, (batch_size, seq_len), generator=generator)
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if task == "ForSequenceClassification":
            if num_labels == 1:
                batch["labels"] = torch.rand(batch_size, generator=generator)
            else:
                batch["labels"] = torch.randint(0, num_labels, (batch_size,), generator=generator)
        elif task == "lm":
            batch["labels"] = ids.clone()
        elif task == "seq2seq":
            batch["labels"] = torch.randint(1, vocab, (batch_size, seq_len), generator=generator)
        elif task == "ForTokenClassification":
            batch["labels"] = torch.randint(0, num_labels, (batch_size, seq_len), generator=generator)
        else:
            batch["start_positions"] = torch.randint(0, seq_len, (batch_size,), generator=generator)
            batch["end_positions"] = torch.randint(0, seq_len, (batch_size,), generator=generator)
        return {key: value.to(target) for key, value in batch.items()}

    return make
