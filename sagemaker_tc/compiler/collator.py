"""A script's own bucketing collator: its batches padded by the shape policy of :mod:`.shapes`.

``DataLoader(dataset, collate_fn=BucketCollator(DataCollatorWithPadding(tokenizer)))`` in a plain
loop. The collator joins the process's compiler session (the job's, or the one ``compile_model``
opened) and pads for it: the session's own policy then stands down.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sagemaker_tc.compiler.session import current_session, pads_training_batches
from sagemaker_tc.compiler.shapes import BucketStats, ShapePolicy, auto_buckets, check_pad_token_id
from sagemaker_tc.config_rules import bucket_problem
from sagemaker_tc.errors import CollatorArgumentError


class BucketCollator:
    """Wrap a collate function so its batches come out padded to bucket lengths.

    Batches that are not mappings (tuples, lists) pass through unchanged and are counted as
    unbucketed in the report. The collator joins the compiler session of the process when it is
    built or first called, counts its batches there, and pads while the session runs a compiled plan
    (eager never pads); without a session it always pads. Padding follows each batch's side (left
    when its attention mask shows left padding, else right).

    Args:
        collate_fn: the collate function to wrap (a list of samples -> a batch).
        buckets: increasing bucket lengths, or None for :func:`~.shapes.auto_buckets` of ``max_length``.
        pad_token_id: pad value for ``input_ids``.
        max_length: the model's maximum sequence length (for automatic buckets).

    Raises:
        CollatorArgumentError: ``collate_fn`` is not callable; ``buckets`` that
            ``TrainingCompilerConfig(buckets=...)`` refuses (empty, more than 16, not increasing, above
            2**20); a ``max_length`` below 1; a ``pad_token_id`` that is not an int.
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
        check_pad_token_id(pad_token_id, "BucketCollator")
        lengths = list(buckets) if isinstance(buckets, Sequence) and not isinstance(buckets, str) else buckets
        problem = bucket_problem(lengths)
        if buckets is not None and problem is not None:
            raise CollatorArgumentError(f"BucketCollator(buckets={buckets!r}): {problem}")
        self.collate_fn = collate_fn
        self.buckets = list(buckets) if buckets is not None else auto_buckets(max_length)
        self.pad_token_id = pad_token_id
        self.policy = ShapePolicy(self.buckets, pad_token_id=pad_token_id, left=None)
        self._join_session()

    @property
    def stats(self) -> BucketStats | None:
        """The session's bucket statistics this collator counts in (None: no session joined)."""
        return self.policy.stats

    def _join_session(self) -> None:
        session = current_session()
        if session is not None:
            self.policy.stats = session.use_buckets(self.buckets)

    def __call__(self, samples: list[Any]) -> Any:
        if self.policy.stats is None:
            self._join_session()
        batch = self.collate_fn(samples)
        if isinstance(batch, Mapping) and pads_training_batches():  # while a compiled plan runs
            return self.policy.pad(batch)
        if self.policy.stats is not None:
            self.policy.stats.record(None)
        return batch
