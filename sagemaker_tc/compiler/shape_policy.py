"""The shape policy, part of every compile plan: when training batches are padded, and to what.

Eager never pads: padding is only worth its extra tokens when it saves compiles. While a compiled
plan runs, each training call of the model gets its sequence length padded up (on the right, at the
model's call, so nothing waits for the device) to:

- ``buckets=[...]``: the next listed length;
- ``buckets="auto"``: the next multiple of a granularity learned from the lengths actually seen in
  the eager steps before it (:func:`learned_granularity`): the spread of those lengths split in
  :data:`TARGET_GRAPHS` steps, at least :data:`MIN_GRANULARITY` tokens. Each multiple is one
  static graph (compiled when first met), and no row gets more than granularity - 1 pad tokens;
- ``buckets=None``: never (the compiled graphs take dynamic shapes).

A bucketing collator the script installed itself (``BucketCollator``) pads for the session instead.
The report gives the batches per padded length and the share of tokens padding added.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from sagemaker_tc.compiler.shapes import (
    BucketStats,
    _sequence_length,
    bucket_for,
    pad_to_bucket,
    pad_token_id_for,
    padding_added,
)

MIN_GRANULARITY = 8
"""Bucket lengths are multiples of at least 8 tokens (GPU matrix shapes like multiples of 8)."""
TARGET_GRAPHS = 4
"""The spread of lengths seen is split into about this many buckets."""


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


class ShapePolicy:
    """Pads a session's training calls while a compiled plan runs (module docstring).

    Args:
        setting: the config's ``buckets``: a list, ``"auto"`` or None.
        model: the model (its ``config.max_position_embeddings`` caps bucket lengths, its
            ``config.pad_token_id`` pads ``input_ids``).
        stats: the session's bucket statistics.
    """

    def __init__(self, setting: list[int] | str | None, model: Any, stats: BucketStats) -> None:
        self.setting = setting
        self.stats = stats
        max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.max_length = max_length if isinstance(max_length, int) and max_length > 0 else None
        self.pad_token_id = pad_token_id_for(model)
        self.seen: Counter[int] = Counter()
        self.granularity: int | None = None
        self.padding = False
        if setting is not None:
            stats.policy = "fixed" if isinstance(setting, list) else "learned"

    def set_padding(self, on: bool) -> None:
        """Pad from now on (a compiled plan runs) or not (eager). The first time, ``"auto"`` learns
        its granularity from the lengths seen so far. A script's own bucketing collator pads instead."""
        on = on and self.setting is not None and not self.stats.active
        if on and self.setting == "auto" and self.granularity is None:
            self.granularity = learned_granularity(self.seen)
        self.padding = on

    def target(self, length: int) -> int:
        """The padded length for a batch of ``length`` tokens."""
        if isinstance(self.setting, list):
            return bucket_for(length, self.setting)
        return rounded_up(length, self.granularity or MIN_GRANULARITY, self.max_length)

    def apply(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A training call's keyword arguments, padded when the policy pads now (shapes only: no
        tensor is read, nothing waits for the device)."""
        length = _sequence_length(kwargs)
        if length is None or self.stats.active:
            return kwargs
        if not self.padding:
            self.seen[length] += 1
            return kwargs
        padded = pad_to_bucket(kwargs, [self.target(length)], self.pad_token_id, left=False)
        self.stats.record(*padding_added(kwargs, padded))
        return padded

    def describe(self) -> dict[str, Any]:
        """The policy for the report: setting, granularity learned, lengths seen while eager."""
        return {
            "buckets": self.setting,
            "granularity": self.granularity,
            "lengths_seen_eager": {str(k): v for k, v in sorted(self.seen.items())},
        }
