"""Shape policy against recompiles: pad each batch's sequence length up to a bucket length.

Dynamic padding (Hugging Face's ``DataCollatorWithPadding``, the usual collator) gives every batch
its own sequence length. Compiled with static shapes that is one graph per length until dynamo's
``recompile_limit`` (8 per code object) is hit, after which dynamo silently runs eager; padding
everything to ``max_length`` (SMTC's advice) wastes compute on padding. Bucketing sits between the
two: a batch of length ``T`` is padded to the smallest bucket ``>= T``, so an epoch compiles at most
one graph per bucket and pads at most to the next bucket.

Works on the mapping batches Hugging Face collators produce (``input_ids``, ``attention_mask``,
``token_type_ids``, ``labels``, ...): every tensor whose dim 1 has the batch's sequence length is
padded along dim 1 with its key's pad value. Padding follows the batch's side (left when the
attention mask shows left padding, else right).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sagemaker_tc.config_rules import bucket_problem
from sagemaker_tc.errors import CollatorArgumentError

AUTO_MIN_BUCKET = 16
# The length tensors are read from, in order; inputs_embeds is [B, T, H].
_LENGTH_KEYS = ("input_ids", "attention_mask", "inputs_embeds")
# Pad value per key; other keys pad with 0. -100 is PyTorch's CrossEntropyLoss ignore_index, the
# value Hugging Face collators pad labels with.
_PAD_VALUES = {"labels": -100, "attention_mask": 0, "token_type_ids": 0, "position_ids": 0}


def auto_buckets(max_length: int | None) -> list[int]:
    """Powers of two from 16 up to ``max_length``, plus ``max_length`` itself when it is not a power
    of two (e.g. 514 for RoBERTa). ``None`` (unknown maximum) gives 16 ... 512, BERT's maximum.

    Raises:
        CollatorArgumentError: ``max_length`` is not a positive int (a ``ValueError``).
    """
    if max_length is not None and (not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1):
        raise CollatorArgumentError(
            f"max_length must be positive: the model's maximum sequence length in tokens, or None for buckets up to "
            f"512; got {max_length!r}"
        )
    limit = 512 if max_length is None else max_length
    buckets = []
    length = AUTO_MIN_BUCKET
    while length <= limit:
        buckets.append(length)
        length *= 2
    if not buckets or buckets[-1] != limit:
        buckets.append(limit)
    return buckets


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket ``>= length``; ``length`` itself when it exceeds the largest bucket
    (the batch is left as it is: padding cannot shorten it)."""
    for bucket in buckets:
        if bucket >= length:
            return bucket
    return length


def _sequence_length(batch: Mapping[str, Any]) -> int | None:
    import torch

    for key in _LENGTH_KEYS:
        value = batch.get(key)
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            return int(value.shape[1])
    return None


def _pads_left(batch: Mapping[str, Any]) -> bool:
    import torch

    mask = batch.get("attention_mask")
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or mask.shape[1] == 0:
        return False
    return bool((mask[:, 0] == 0).any()) and bool((mask[:, -1] != 0).all())


def pad_to_bucket(
    batch: Mapping[str, Any], buckets: Sequence[int], pad_token_id: int = 0, left: bool | None = None
) -> dict[str, Any]:
    """Pad a collated batch's sequence dimension up to its bucket.

    Args:
        batch: a mapping of tensors; sequence tensors are ``[B, T, ...]``.
        buckets: increasing bucket lengths.
        pad_token_id: pad value for ``input_ids`` (the tokenizer's pad token id).
        left: pad on the left; None follows the batch (reads its attention mask: for host-side
            batches only, on a GPU that read would wait for the device). Padding on the right after
            a left-padded batch keeps every real token's position and loss, so the runtime, which pads
            batches already on the device, always pads on the right.

    Returns:
        A new dict: tensors with ``shape[1] == T`` padded to ``bucket_for(T)`` (``input_ids`` with
        ``pad_token_id``, ``labels`` with -100, others with 0); everything else unchanged. A batch
        with no sequence tensor comes back as a plain copy.
    """
    import torch

    out = dict(batch)
    length = _sequence_length(batch)
    if length is None:
        return out
    target = bucket_for(length, buckets)
    if target == length:
        return out
    left = _pads_left(batch) if left is None else left
    for key, value in batch.items():
        if not isinstance(value, torch.Tensor) or value.dim() < 2 or value.shape[1] != length:
            continue
        fill = pad_token_id if key == "input_ids" else _PAD_VALUES.get(key, 0)
        pad_shape = list(value.shape)
        pad_shape[1] = target - length
        pad = torch.full(pad_shape, fill, dtype=value.dtype, device=value.device)
        out[key] = torch.cat([pad, value] if left else [value, pad], dim=1)
    return out


class BucketStats:
    """How many training batches went to each bucket length, for one session (thread-safe).

    Counts the batches padded to a bucket (per length), the batches that were not (eager steps
    never pad; batches with no sequence tensor cannot be padded), and the tokens padding added, so
    the report can give the share of padded tokens. A collator that registers (:meth:`register`)
    pads for the session itself.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches: Counter[int] = Counter()
        self.unbucketed = 0
        self.buckets: list[int] | None = None
        self.collators = 0
        self.tokens = 0  # tokens in padded batches (rows x bucket length)
        self.added_tokens = 0  # of which padding added by bucketing
        self.policy: str | None = None

    @property
    def active(self) -> bool:
        """True once a bucketing collator is registered with this session."""
        return self.collators > 0

    def register(self, buckets: list[int]) -> None:
        """A bucketing collator with ``buckets`` feeds this session's training."""
        with self._lock:
            self.collators += 1
            self.buckets = list(buckets)
            self.policy = "collator"

    def record(self, length: int | None, rows: int = 0, added: int = 0) -> None:
        """One batch padded to ``length`` (None: not padded); ``rows`` x ``length`` tokens, of which
        ``added`` were added by padding."""
        with self._lock:
            if length is None:
                self.unbucketed += 1
                return
            self.batches[length] += 1
            self.tokens += rows * length
            self.added_tokens += added

    def summary(self) -> dict[str, Any] | None:
        """``{"policy", "buckets", "batches_per_length", "unbucketed_batches", "padded_token_share"}``,
        or None when nothing bucketed training batches."""
        if self.buckets is None and not self.batches:
            return None
        with self._lock:
            return {
                "policy": self.policy,
                "buckets": sorted(set(self.buckets or []) | set(self.batches)),
                "batches_per_length": {str(k): v for k, v in sorted(self.batches.items())},
                "unbucketed_batches": self.unbucketed,
                "padded_token_share": self.added_tokens / self.tokens if self.tokens else 0.0,
            }


class BucketCollator:
    """Wrap a collate function so its batches come out padded to bucket lengths.

    ``DataLoader(dataset, collate_fn=BucketCollator(DataCollatorWithPadding(tokenizer)))`` in a plain
    loop; the Hugging Face ``Trainer`` integration wraps the training dataloader's collate function
    itself. Batches that are not mappings (tuples, lists) pass through unchanged and are counted as
    unbucketed in the report. The collator joins the compiler session of the process (the job's, or
    the one ``compile_model`` opened) when it is built or first called, and counts its batches there.

    Args:
        collate_fn: the collate function to wrap (a list of samples -> a batch).
        buckets: increasing bucket lengths, or None for :func:`auto_buckets` of ``max_length``.
        pad_token_id: pad value for ``input_ids``.
        max_length: the model's maximum sequence length (for automatic buckets).

    Raises:
        CollatorArgumentError: ``collate_fn`` is not callable; ``buckets`` that
            ``TrainingCompilerConfig(buckets=...)`` refuses (empty, more than 16, not increasing, above
            2**20); a ``max_length`` below 1.
    """

    def __init__(
        self,
        collate_fn: Callable[[list[Any]], Any],
        buckets: Sequence[int] | None = None,
        pad_token_id: int = 0,
        max_length: int | None = None,
    ) -> None:
        if not callable(collate_fn):
            raise CollatorArgumentError(
                f"BucketCollator wraps a collate function (a list of samples -> a batch), got "
                f"{type(collate_fn).__name__} {collate_fn!r}; e.g. BucketCollator(DataCollatorWithPadding(tokenizer)), "
                "or torch.utils.data.default_collate"
            )
        lengths = list(buckets) if isinstance(buckets, Sequence) and not isinstance(buckets, str) else buckets
        problem = bucket_problem(lengths)
        if buckets is not None and problem is not None:
            raise CollatorArgumentError(f"BucketCollator(buckets={buckets!r}): {problem}")
        self.collate_fn = collate_fn
        self.buckets = list(buckets) if buckets is not None else auto_buckets(max_length)
        self.pad_token_id = pad_token_id
        self.stats: BucketStats | None = None
        self._join_session()

    def _join_session(self) -> None:
        from sagemaker_tc.compiler.session import current_session

        session = current_session()
        if session is not None:
            self.stats = session.use_buckets(self.buckets)

    def __call__(self, samples: list[Any]) -> Any:
        if self.stats is None:
            self._join_session()
        batch = self.collate_fn(samples)
        if not isinstance(batch, Mapping):
            if self.stats is not None:
                self.stats.record(None)
            return batch
        if not self._pads():
            if self.stats is not None:
                self.stats.record(None)
            return batch
        padded = pad_to_bucket(batch, self.buckets, self.pad_token_id)
        if self.stats is not None:
            self.stats.record(*padding_added(batch, padded))
        return padded

    def _pads(self) -> bool:
        """Pad while the session runs a compiled plan (eager never pads); always without a session."""
        from sagemaker_tc.compiler.session import current_session

        session = current_session()
        return session is None or session.runtime.pads_training_batches


def padding_added(batch: Mapping[str, Any], padded: Mapping[str, Any]) -> tuple[int | None, int, int]:
    """``(padded length, rows, tokens added)`` of a batch before and after :func:`pad_to_bucket`
    (shapes only: no tensor is read)."""
    before, after = _sequence_length(batch), _sequence_length(padded)
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


def recompile_limit_for_buckets(count: int, current: int) -> int:
    """Dynamo's per-function ``recompile_limit`` (default 8) that lets ``count`` bucket graphs, in
    training and eval mode and for a second block class (e.g. encoder and decoder layers), fit:
    ``max(current, 8 + 4 * count)``. Bucketing bounds the shapes, so the limit's job (stopping
    endless recompiles) is done by the buckets."""
    return max(current, 8 + 4 * count)


def bucket_count(setting: list[int] | str | None) -> int:
    """How many bucket lengths a config's ``buckets`` setting can give: the list's length;
    ``"auto"``: :func:`auto_buckets` of BERT's 512 (the count is learned later, 6 there) but at
    least 8, room for a longer model; None: 1 (no buckets)."""
    if isinstance(setting, list):
        return max(1, len(setting))
    if setting == "auto":
        return max(8, len(auto_buckets(None)))
    return 1


def plan_recompile_budget(regions: int, buckets: int) -> int:
    """Compiles one variant of one plan may make before dynamo runs it eagerly (its own
    ``recompile_limit``): ``2 x regions x (buckets + 1)``, at least dynamo's default 8.

    Each region (a block, or the whole model) may need a graph of its own (a block's layer index
    guarded as a constant: GPT-2 and T5 layers with ``use_cache=True``), for each bucket length plus
    one dynamic-shape graph, in training and in eval mode. Bucketing bounds the shapes, so the limit's
    job (stopping endless recompiles) is done by the buckets.
    """
    return max(8, 2 * max(1, regions) * (max(1, buckets) + 1))


def buckets_for_model(setting: list[int] | str | None, model: Any) -> list[int] | None:
    """The bucket lengths a config's ``buckets`` setting means for ``model``: None (off), the list
    itself, or for ``"auto"`` :func:`auto_buckets` of the model's ``config.max_position_embeddings``
    (Hugging Face models; else 512)."""
    if setting is None:
        return None
    if isinstance(setting, list):
        return setting
    max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return auto_buckets(max_length if isinstance(max_length, int) and max_length > 0 else None)


def pad_token_id_for(model: Any) -> int:
    """The model's ``config.pad_token_id`` (Hugging Face), else 0."""
    value = getattr(getattr(model, "config", None), "pad_token_id", None)
    return value if isinstance(value, int) else 0
