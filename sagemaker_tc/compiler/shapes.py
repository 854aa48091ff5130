"""The one padding mechanism against recompiles: which length a batch is padded to, and the padding.

Dynamic padding (Hugging Face's ``DataCollatorWithPadding``, the usual collator) gives every batch
its own sequence length. Compiled with static shapes that is one graph per length until dynamo's
``recompile_limit`` (8 per code object) is hit, after which dynamo silently runs eager; padding
everything to ``max_length`` (SMTC's advice) wastes compute on padding. Bucketing sits between the
two: a batch of length ``T`` is padded to the next bucket length ``>= T``, so an epoch compiles at
most one graph per bucket and pads at most to the next bucket.

:class:`ShapePolicy` is the rule, for every place that pads: its :meth:`~ShapePolicy.target` is the
length a batch of ``T`` tokens is padded to, and :meth:`~ShapePolicy.pad` pads the batch's tensors
and counts it (:class:`BucketStats`, the report's ``shapes``). The lengths:

- ``buckets=[...]``: the next listed length (:func:`bucket_for`);
- ``buckets="auto"``: the next multiple of a granularity learned from the lengths actually seen in
  the eager steps before (:func:`learned_granularity`): the spread of those lengths split in
  :data:`TARGET_GRAPHS` steps, at least :data:`MIN_GRANULARITY` tokens. Each multiple is one static
  graph (compiled when first met), and no row gets more than granularity - 1 pad tokens;
- ``buckets=None``: never (the compiled graphs take dynamic shapes).

Three places pad with it. The session's policy (the config's ``buckets``) pads each training call
at the model's call while a compiled plan runs (eager never pads: padding is only worth its extra
tokens when it saves compiles), on the right, so nothing waits for the device; with
``backend="xla"`` it pads a ``Trainer``'s batches in the dataloader instead, on the host
(:meth:`ShapePolicy.wrap_collate`). A script's own
:class:`~sagemaker_tc.compiler.collator.BucketCollator` holds a policy with a bucket list
(:func:`auto_buckets` by default) and pads for the session instead.

The tensor padding itself (which dimensions pad exactly, the padding, trimming a padded call's
output) is :mod:`sagemaker_tc.compiler.padding`; this module says which length, and counts.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sagemaker_tc.compiler.padding import (
    DECODER_KEYS,
    pad_token_id_for,
    padded_to,
    padding_added,
    padding_dims,
    sequence_length,
)
from sagemaker_tc.config_rules import MAX_BUCKETS, bucket_problem
from sagemaker_tc.errors import CollatorArgumentError

AUTO_MIN_BUCKET = 16
MIN_GRANULARITY = 8
"""Learned bucket lengths are multiples of at least 8 tokens (GPU matrix shapes like multiples of 8)."""
TARGET_GRAPHS = 4
"""The spread of lengths seen is split into about this many buckets."""
MAX_LEARNED_BUCKETS = 2 * TARGET_GRAPHS
"""``buckets="auto"`` pads to at most this many distinct bucket lengths (pairs, for an encoder-decoder)
over a job: a call whose length would open one more (lengths far outside those seen while eager)
is left unpadded and takes the dynamic-shape graph, so a long job compiles at most this many static
graphs per region (:func:`bucket_count` counts them), not one per multiple of the granularity."""


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


def learned_granularity(lengths: Counter[int] | Mapping[int, int]) -> int:
    """The bucket granularity for the sequence lengths seen: ``(longest - shortest + 1) /
    TARGET_GRAPHS`` rounded up to a multiple of :data:`MIN_GRANULARITY` (at least that)."""
    if not lengths:
        return MIN_GRANULARITY
    spread = max(lengths) - min(lengths) + 1
    step = math.ceil(spread / TARGET_GRAPHS)
    return max(MIN_GRANULARITY, MIN_GRANULARITY * math.ceil(step / MIN_GRANULARITY))


def rounded_up(length: int, granularity: int, max_length: int | None) -> int:
    """``length`` rounded up to a multiple of ``granularity``, never past ``max_length`` (the model's
    positions) and never below ``length``."""
    target = granularity * math.ceil(length / granularity)
    if max_length is not None and target > max_length:
        target = max(length, max_length)
    return target


def pad_to_bucket(
    batch: Mapping[str, Any], buckets: Sequence[int], pad_token_id: int = 0, left: bool | None = None
) -> dict[str, Any]:
    """Pad a collated batch's sequence dimension up to its bucket (:func:`bucket_for`).

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

    Raises:
        CollatorArgumentError: ``batch`` is not a mapping (a list of samples: collate it first);
            ``buckets`` is not 1 to 16 strictly increasing positive whole numbers of tokens;
            ``pad_token_id`` is not an int; ``left`` is not True, False or None.
    """
    _check_padding_arguments(batch, buckets, pad_token_id, left)
    length = sequence_length(batch)
    if length is None:
        return dict(batch)
    return padded_to(batch, length, bucket_for(length, buckets), pad_token_id, left)


def check_pad_token_id(pad_token_id: Any, where: str) -> None:
    """Refuse a ``pad_token_id`` that is not an int (a bool, a float, a string, None), naming ``where``
    it was given (:class:`CollatorArgumentError`)."""
    if not isinstance(pad_token_id, int) or isinstance(pad_token_id, bool):
        raise CollatorArgumentError(
            f"{where}(pad_token_id={pad_token_id!r}): give the tokenizer's pad token id, an int "
            "(tokenizer.pad_token_id)"
        )


def _check_padding_arguments(batch: Any, buckets: Any, pad_token_id: Any, left: Any) -> None:
    """:func:`pad_to_bucket`'s arguments, each refused by name (:class:`CollatorArgumentError`)."""
    if not isinstance(batch, Mapping):
        raise CollatorArgumentError(
            f"pad_to_bucket takes a collated batch, a mapping of name -> tensor (what a DataCollator returns), got "
            f"{type(batch).__name__}: collate the samples first"
        )
    lengths = list(buckets) if isinstance(buckets, Sequence) and not isinstance(buckets, str) else None
    if lengths is None:
        problem = f"give 1 to {MAX_BUCKETS} bucket lengths, e.g. [32, 64, 128]"
    else:
        problem = bucket_problem(lengths)
    if problem is not None:
        raise CollatorArgumentError(f"pad_to_bucket(buckets={buckets!r}): {problem}")
    check_pad_token_id(pad_token_id, "pad_to_bucket")
    if left is not None and not isinstance(left, bool):
        raise CollatorArgumentError(f"pad_to_bucket(left={left!r}): give True, False or None (follow the batch)")


class ShapePolicy:
    """The padding rule (module docstring): which length a batch is padded to, the padding, and, for
    the session's policy, when it pads.

    Args:
        setting: bucket lengths (a list), ``"auto"`` (learned) or None (never pads).
        model: the model, if known: its ``config.max_position_embeddings`` caps ``"auto"`` lengths,
            its ``config.pad_token_id`` pads ``input_ids`` (else 0).
        stats: where padded batches are counted (None: nowhere). A session's policy stands down while
            a bucketing collator registered there pads instead (``stats.active``).
        pad_token_id: pads ``input_ids`` instead of the model's.
        left: pad on the left; None follows each batch (reads its attention mask: host-side batches
            only); False (the default) pads right, which keeps every real token's position and loss.
    """

    def __init__(
        self,
        setting: list[int] | str | None,
        model: Any = None,
        stats: BucketStats | None = None,
        *,
        pad_token_id: int | None = None,
        left: bool | None = False,
    ) -> None:
        from sagemaker_tc._hf_internals import is_causal_lm

        self.setting = setting
        self.stats = stats
        max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.max_length = max_length if isinstance(max_length, int) and max_length > 0 else None
        self.pad_token_id = pad_token_id_for(model) if pad_token_id is None else pad_token_id
        self.left = left
        self.causal = is_causal_lm(model)
        self.encoder_decoder = getattr(getattr(model, "config", None), "is_encoder_decoder", False) is True
        self.seen: Counter[int] = Counter()
        self.seen_decoder: Counter[int] = Counter()
        self.granularity: int | None = None
        self.decoder_granularity: int | None = None
        self.targets: set[tuple[int, ...]] = set()  # "auto": the bucket lengths padded to so far
        self.padding = False
        if setting is not None and stats is not None:
            stats.policy = "fixed" if isinstance(setting, list) else "learned"

    def target(self, length: int, *, decoder: bool = False) -> int:
        """The length a batch of ``length`` tokens is padded to (never shorter); ``decoder``: an
        encoder-decoder's decoder length (``"auto"`` learns its granularity apart)."""
        if isinstance(self.setting, list):
            return bucket_for(length, self.setting)
        granularity = self.decoder_granularity if decoder else self.granularity
        return rounded_up(length, granularity or MIN_GRANULARITY, self.max_length)

    def dims(self, batch: Mapping[str, Any]) -> dict[str, int] | None:
        """The batch's sequence lengths that padding keeps exact for this model (:func:`~.padding.padding_dims`)."""
        return padding_dims(batch, self.causal, self.encoder_decoder)

    def pad(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """``batch`` padded to its :meth:`target` now, and counted. A batch padding would change
        (:func:`~.padding.padding_dims`: no 2-D mask on a bidirectional model, a 3-D/4-D mask, packed sequences)
        or without a sequence tensor comes back as a plain copy, counted as not padded."""
        dims = self.dims(batch)
        padded = dict(batch) if dims is None else self._pad_dims(batch, dims)
        if self.stats is not None:
            self.stats.record(*padding_added(batch, padded))
        return padded

    def _pad_dims(self, batch: Mapping[str, Any], dims: Mapping[str, int]) -> dict[str, Any]:
        """``batch`` with each of its ``dims`` padded to its target (the decoder's keys apart)."""
        decoder_keys = set(DECODER_KEYS) if self.encoder_decoder else set()
        length = dims["encoder"]
        out = padded_to(
            batch, length, self.target(length), self.pad_token_id, self.left, lambda k: k not in decoder_keys
        )
        if "decoder" in dims:
            length = dims["decoder"]
            target = self.target(length, decoder=True)
            out = padded_to(out, length, target, self.pad_token_id, bool(self.left), decoder_keys.__contains__)
        return out

    def set_padding(self, on: bool) -> None:
        """Pad from now on (a compiled plan runs) or not (eager). The first time, ``"auto"`` learns
        its granularity from the lengths seen so far. A registered bucketing collator pads instead."""
        on = on and self.setting is not None and not self._collator_pads()
        if on and self.setting == "auto" and self.granularity is None:
            self.granularity = learned_granularity(self.seen)
            self.decoder_granularity = learned_granularity(self.seen_decoder)
        self.padding = on

    def apply(self, batch: Mapping[str, Any]) -> Mapping[str, Any]:
        """A training batch (a call's keyword arguments), padded when the policy pads now, else its
        length noted for ``"auto"`` (:meth:`bucket`)."""
        return self.bucket(batch)[0]

    def bucket(self, batch: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
        """A training call's keyword arguments, padded when the policy pads now, and whether its shapes
        are bucketed (every sequence length at a bucket length: a static graph may serve it). Only
        calls padding keeps exact are padded (:func:`~.padding.padding_dims`); while eager, their lengths are noted
        for ``"auto"``. Reads shapes only: nothing waits for the device."""
        dims = self.dims(batch)
        if self._collator_pads():
            buckets = set(self.stats.buckets or ()) if self.stats is not None else set()
            return batch, dims is not None and all(length in buckets for length in dims.values())
        if dims is None:
            if self.padding and self.stats is not None and sequence_length(batch) is not None:
                self.stats.record(None)
            return batch, False
        if not self.padding:
            self.seen[dims["encoder"]] += 1
            if "decoder" in dims:
                self.seen_decoder[dims["decoder"]] += 1
            return batch, False
        if not self._opens_a_bucket(dims):
            if self.stats is not None:
                self.stats.record(None)
            return batch, False
        padded = self._pad_dims(batch, dims)
        if self.stats is not None:
            self.stats.record(*padding_added(batch, padded))
        return padded, True

    def _opens_a_bucket(self, dims: Mapping[str, int]) -> bool:
        """True when a call of ``dims`` may be padded: a listed bucket, or an ``"auto"`` bucket length
        already in use or one more within :data:`MAX_LEARNED_BUCKETS` (then noted as in use)."""
        if self.setting != "auto":
            return True
        key = (self.target(dims["encoder"]),) + (
            (self.target(dims["decoder"], decoder=True),) if "decoder" in dims else ()
        )
        if key not in self.targets and len(self.targets) >= MAX_LEARNED_BUCKETS:
            return False
        self.targets.add(key)
        return True

    def expected_buckets(self) -> int | None:
        """How many bucket lengths the training batches met so far need: the buckets a registered
        collator padded to, else the (encoder) targets of the lengths seen while eager and those
        padded to since. None when the policy never pads (no buckets to speak of)."""
        if self._collator_pads():
            return len(self.stats.batches) if self.stats is not None else None
        if self.setting is None:
            return None
        padded = set(self.stats.batches) if self.stats is not None else set()
        lengths = {self.target(length) for length in self.seen} | {key[0] for key in self.targets} | padded
        return len(lengths) or None

    def wrap_collate(self, collate_fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``collate_fn`` with :meth:`apply` on each mapping batch it returns: padding on the host,
        before a dataloader moves the batch to the device."""

        def padded(samples: Any) -> Any:
            batch = collate_fn(samples)
            return self.apply(dict(batch)) if isinstance(batch, Mapping) else batch

        return padded

    def pad_in_dataloader(self, dataloader: Any) -> bool:
        """Pad each batch to its bucket in ``dataloader``'s collate function (:meth:`wrap_collate`),
        on the host, before the dataloader moves it to the device (through accelerate's and
        torch_xla's wrappers to the ``DataLoader`` inside). Returns False when none is found."""
        from torch.utils.data import DataLoader

        from sagemaker_tc import _hf_internals

        loader = _hf_internals.innermost_dataloader(dataloader)
        if not isinstance(loader, DataLoader):
            return False
        loader.collate_fn = self.wrap_collate(loader.collate_fn)
        return True

    def _collator_pads(self) -> bool:
        return self.stats is not None and self.stats.active

    def describe(self) -> dict[str, Any]:
        """The policy for the report: setting, granularity learned, lengths seen while eager."""
        return {
            "buckets": self.setting,
            "granularity": self.granularity,
            "lengths_seen_eager": {str(k): v for k, v in sorted(self.seen.items())},
            **({"decoder_granularity": self.decoder_granularity} if self.encoder_decoder else {}),
        }


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
        or None when no training batch met a bucketing policy (bucketed or not)."""
        if self.buckets is None and not self.batches and not self.unbucketed:
            return None
        with self._lock:
            return {
                "policy": self.policy,
                "buckets": sorted(set(self.buckets or []) | set(self.batches)),
                "batches_per_length": {str(k): v for k, v in sorted(self.batches.items())},
                "unbucketed_batches": self.unbucketed,
                "padded_token_share": self.added_tokens / self.tokens if self.tokens else 0.0,
            }
