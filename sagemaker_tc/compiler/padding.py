"""Tensor padding of a collated batch: which sequence dimensions pad exactly, the padding, the trim.

The mechanism under the bucket policy of :mod:`sagemaker_tc.compiler.shapes` (which length a batch
is padded to): given a batch and a target length, these functions pad its sequence tensors, say
whether padding keeps the model's result exact, and cut a padded call's output back to the caller's
lengths. They read shapes only (and an attention mask's first and last columns for left padding on
the host): nothing here chooses a length or counts batches.

Works on the mapping batches Hugging Face collators produce (``input_ids``, ``attention_mask``,
``token_type_ids``, ``labels``, ...): every tensor whose dim 1 has the batch's sequence length is
padded along dim 1 with its key's pad value. Only a batch that padding keeps exact is padded by the
policy (:func:`padding_dims`: a 2-D attention mask padded with it, or a causal model with ``-100``
labels; never other masks, packed sequences or audio/vision inputs), and an encoder-decoder's
decoder length (``labels``, ``decoder_input_ids``, ``decoder_attention_mask``, :data:`DECODER_KEYS`)
pads apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

# The length tensors are read from, in order; inputs_embeds is [B, T, H].
_LENGTH_KEYS = ("input_ids", "attention_mask", "inputs_embeds")
# Pad value per key; other keys pad with 0. -100 is PyTorch's CrossEntropyLoss ignore_index, the
# value Hugging Face collators pad labels with.
_PAD_VALUES = {"labels": -100, "attention_mask": 0, "token_type_ids": 0, "position_ids": 0}
# An encoder-decoder model's second sequence dimension: its decoder's inputs and the labels (the
# length is read from them in this order).
DECODER_KEYS = ("decoder_input_ids", "decoder_attention_mask", "labels", "decoder_inputs_embeds")
# Packed sequences (flash-attention varlen, Hugging Face's DataCollatorWithFlattening): never padded.
_PACKED_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")
# Audio and vision inputs whose size varies along a dimension the policy does not pad.
_UNPADDED_INPUT_KEYS = ("input_values", "input_features", "pixel_values", "pixel_values_videos")


def sequence_length(batch: Mapping[str, Any], keys: Sequence[str] = _LENGTH_KEYS) -> int | None:
    """The batch's sequence length: dim 1 of the first of ``keys`` holding a tensor of 2 dims or
    more (``[B, T, ...]``); None without one."""
    import torch

    for key in keys:
        value = batch.get(key)
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            return int(value.shape[1])
    return None


def padding_dims(
    batch: Mapping[str, Any], causal: bool = False, encoder_decoder: bool = False
) -> dict[str, int] | None:
    """The sequence lengths of a call's keyword arguments that right padding keeps exact (shapes only:
    no tensor is read), or None when the call cannot be padded exactly.

    A dimension pads exactly when a 2-D attention mask of its length is padded with it (``attention_mask``;
    ``decoder_attention_mask`` for a decoder), or, without a mask, when attention along it is causal and
    its ``labels`` (padded with -100, ignored by the loss) have its length. Never with a 3-D/4-D mask,
    packed sequences (:data:`_PACKED_KEYS`, or ``position_ids`` without a mask) or audio/vision inputs.

    Args:
        batch: the call's keyword arguments; sequence tensors are ``[B, T, ...]``.
        causal: the model is a decoder-only causal model (:func:`~sagemaker_tc._hf_internals.is_causal_lm`).
        encoder_decoder: the model is an encoder-decoder (``config.is_encoder_decoder``): the decoder's
            inputs and the labels (:data:`DECODER_KEYS`) are a second dimension, causal.

    Returns:
        ``{"encoder": T}``, plus ``"decoder": T'`` for an encoder-decoder call with decoder inputs.
    """
    import torch

    if any(key in batch for key in _PACKED_KEYS):
        return None
    if any(isinstance(batch.get(key), torch.Tensor) for key in _UNPADDED_INPUT_KEYS):
        return None
    length = sequence_length(batch)
    labels = None if encoder_decoder or not causal else "labels"
    if length is None or not _pads_exactly(batch, length, "attention_mask", labels, "position_ids"):
        return None
    dims = {"encoder": length}
    decoder = sequence_length(batch, DECODER_KEYS) if encoder_decoder else None
    if decoder is not None:
        if not _pads_exactly(batch, decoder, "decoder_attention_mask", "labels", "decoder_position_ids"):
            return None
        dims["decoder"] = decoder
    return dims


def _pads_exactly(
    batch: Mapping[str, Any], length: int, mask_key: str, labels_key: str | None, positions_key: str
) -> bool:
    """Right padding of one sequence dimension of ``length`` keeps the result (:func:`padding_dims`)."""
    import torch

    mask = batch.get(mask_key)
    if mask is not None:
        return isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.shape[1] == length
    if labels_key is None or batch.get(positions_key) is not None:
        return False  # bidirectional attention would see the padding; position ids may mark packed sequences
    labels = batch.get(labels_key)
    return isinstance(labels, torch.Tensor) and labels.dim() == 2 and labels.shape[1] == length


def trim_output(output: Any, original: Mapping[str, int], padded: Mapping[str, int], *, left: bool = False) -> Any:
    """A padded call's output cut back to the caller's lengths: each tensor whose dim 1 is a padded
    length (and not its original) is sliced to the original, as the unpadded call would have
    returned it (the padded positions' outputs are the ones the mask or causality kept out). In an
    encoder-decoder's output the ``encoder_*`` entries have the encoder's length, the others
    (``logits``, ``decoder_*``) the decoder's. Attention maps (``*attentions``, ``[B, heads, T, T]``)
    are left as they are. Slicing makes views: nothing is copied or waited for.

    Args:
        output: the model's output: a tensor, a tuple/list, or a mapping (a ``ModelOutput``,
            changed in place) of those.
        original: :func:`padding_dims` of the call's arguments before padding.
        padded: the same after padding.
        left: the call was padded on the left (the original positions are the last ones).
    """
    import torch

    def cut(value: Any, dim: str) -> Any:
        if isinstance(value, torch.Tensor):
            before, after = original.get(dim), padded.get(dim)
            if before is None or before == after or value.dim() < 2 or value.shape[1] != after:
                return value
            return value[:, after - before :] if left else value[:, :before]
        if isinstance(value, tuple):
            return tuple(cut(item, dim) for item in value)
        if isinstance(value, list):
            return [cut(item, dim) for item in value]
        return value

    def dim_of(key: Any) -> str:
        if "decoder" not in padded or (isinstance(key, str) and key.startswith("encoder_")):
            return "encoder"
        return "decoder"

    if isinstance(output, Mapping):
        for key in list(output.keys()):
            if not (isinstance(key, str) and key.endswith("attentions")):  # [B, heads, T, T]: dim 1 is heads
                output[key] = cut(output[key], dim_of(key))
        return output
    return cut(output, dim_of(None))  # a tuple output: the decoder's length where there is one


def _pads_left(batch: Mapping[str, Any]) -> bool:
    import torch

    mask = batch.get("attention_mask")
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or mask.shape[1] == 0:
        return False
    return bool((mask[:, 0] == 0).any()) and bool((mask[:, -1] != 0).all())


def padded_to(
    batch: Mapping[str, Any],
    length: int,
    target: int,
    pad_token_id: int,
    left: bool | None,
    keys: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """``batch`` (sequence length ``length``) with its sequence tensors (``[B, length, ...]``) padded
    to ``target`` along dim 1, only those whose key ``keys`` accepts when given: ``input_ids`` with
    ``pad_token_id``, ``labels`` with -100, others with 0; on the left when ``left`` (None: when the
    batch's attention mask shows left padding). A new dict; ``target <= length`` pads nothing."""
    import torch

    out = dict(batch)
    if target <= length:
        return out
    left = _pads_left(batch) if left is None else left
    for key, value in batch.items():
        if not isinstance(value, torch.Tensor) or value.dim() < 2 or value.shape[1] != length:
            continue
        if keys is not None and not keys(key):
            continue
        fill = pad_token_id if key == "input_ids" else _PAD_VALUES.get(key, 0)
        pad_shape = list(value.shape)
        pad_shape[1] = target - length
        pad = torch.full(pad_shape, fill, dtype=value.dtype, device=value.device)
        out[key] = torch.cat([pad, value] if left else [value, pad], dim=1)
    return out


def padding_added(batch: Mapping[str, Any], padded: Mapping[str, Any]) -> tuple[int | None, int, int]:
    """``(padded length, rows, tokens added)`` of a batch before and after its padding
    (shapes only: no tensor is read)."""
    before, after = sequence_length(batch), sequence_length(padded)
    if after is None:
        return None, 0, 0
    rows = _rows(padded)
    return after, rows, rows * (after - (before or after))


def _rows(batch: Mapping[str, Any]) -> int:
    import torch

    for key in _LENGTH_KEYS:
        value = batch.get(key)
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            return int(value.shape[0])
    return 0


def pad_token_id_for(model: Any) -> int:
    """The model's ``config.pad_token_id`` (Hugging Face), else 0."""
    value = getattr(getattr(model, "config", None), "pad_token_id", None)
    return value if isinstance(value, int) else 0
