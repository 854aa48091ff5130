"""The bounded search for the largest batch that fits: pure Python, no torch.

:func:`search_max_batch` asks a ``try_batch(batch) -> Trial`` callback whether a batch fits and
returns the largest one that did. It grows the batch by doubling until one does not fit (or the
cap is reached), then bisects between the last batch that fit and the first that did not. With
``multiple_of=m`` it only tries multiples of ``m`` (e.g. 8 for tensor cores), and the answer is
the largest fitting multiple.

The number of tries is bounded: at most ``log2(cap/start) + 1`` while growing and ``log2`` of the
last gap while bisecting, and never more than ``max_tries``. Fitting is assumed monotone (if ``b``
fits, every smaller batch fits), which holds for training memory (activations grow with the batch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sagemaker_tc.errors import BatchSizeSearchError, TuningError

DEFAULT_MAX_TRIES = 24


@dataclass(frozen=True)
class Trial:
    """One try of one batch size.

    Attributes:
        batch_size: samples per device in the tried step.
        fits: True when the steps ran and their peak memory stayed within the budget.
        peak_bytes: peak memory measured during the steps (bytes; None when it ran out of memory
            before a figure could be read).
        reason: why it did not fit (``"out of memory: ..."``, ``"peak 1.2 GiB > budget 1.0 GiB"``),
            else None.
        seconds: wall time of the try (seconds), compilation included.
    """

    batch_size: int
    fits: bool
    peak_bytes: int | None = None
    reason: str | None = None
    seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


@dataclass
class SearchResult:
    """What :func:`search_max_batch` found.

    Attributes:
        batch_size: the largest batch that fit.
        first_too_large: the smallest tried batch that did not fit (None when the cap fit).
        exact: True when ``first_too_large == batch_size + multiple_of`` (or the cap fit): no
            untried batch between them. False when ``max_tries`` stopped the bisection early.
        capped: True when the cap itself fit (a larger batch might fit too).
        trials: every try, in order.
    """

    batch_size: int
    first_too_large: int | None
    exact: bool
    capped: bool
    trials: list[Trial] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (trials as a list of dicts)."""
        return {
            "batch_size": self.batch_size,
            "first_too_large": self.first_too_large,
            "exact": self.exact,
            "capped": self.capped,
            "tries": len(self.trials),
            "trials": [trial.to_dict() for trial in self.trials],
        }


def _check_arguments(start: int, max_batch: int, multiple_of: int, max_tries: int) -> None:
    for name, value in (("start", start), ("max_batch", max_batch), ("multiple_of", multiple_of)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TuningError(f"{name} must be a positive int (got {value!r})")
    if isinstance(max_tries, bool) or not isinstance(max_tries, int) or max_tries < 2:
        raise TuningError(f"max_tries must be an int >= 2 (got {max_tries!r})")
    if max_batch < multiple_of:
        raise TuningError(f"max_batch ({max_batch}) is smaller than multiple_of ({multiple_of})")


def search_max_batch(
    try_batch: Callable[[int], Trial],
    *,
    start: int = 1,
    max_batch: int = 1024,
    multiple_of: int = 1,
    max_tries: int = DEFAULT_MAX_TRIES,
) -> SearchResult:
    """Find the largest batch size in ``[multiple_of, max_batch]`` (a multiple of ``multiple_of``)
    for which ``try_batch`` reports ``fits``.

    Args:
        try_batch: runs (or models) training at one batch size and returns a :class:`Trial`. It must
            free what it allocated before returning.
        start: first batch tried (rounded up to a multiple of ``multiple_of``, capped at
            ``max_batch``); growth doubles from there.
        max_batch: the cap: no larger batch is tried.
        multiple_of: only multiples of this are tried.
        max_tries: stop after this many tries (the answer is then the largest batch that fit so far,
            with ``exact=False``).

    Returns:
        A :class:`SearchResult`.

    Raises:
        TuningError: a bad argument (before any try).
        BatchSizeSearchError: not even ``multiple_of`` samples fit; its ``trials`` say why.
    """
    _check_arguments(start, max_batch, multiple_of, max_tries)
    cap = max_batch // multiple_of  # search in units of multiple_of
    unit = min(cap, max(1, -(-start // multiple_of)))
    trials: list[Trial] = []
    seen: dict[int, bool] = {}

    def fits(units: int) -> bool:
        if units not in seen:
            trial = try_batch(units * multiple_of)
            trials.append(trial)
            seen[units] = trial.fits
        return seen[units]

    low, high = 0, None  # largest unit that fit, smallest that did not
    # Grow: start, 2*start, 4*start, ... then the cap.
    while len(trials) < max_tries:
        if fits(unit):
            low = unit
            if unit == cap:
                break
            unit = min(unit * 2, cap)
        else:
            high = unit
            break
    # Bisect between low (fits, or 0) and high (does not fit).
    while high is not None and high - low > 1 and len(trials) < max_tries:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    if low == 0:
        raise BatchSizeSearchError(
            f"no batch size fits: the smallest tried ({min(seen) * multiple_of}) did not"
            f" ({next(t.reason for t in reversed(trials) if not t.fits)})",
            trials=trials,
        )
    capped = low == cap
    return SearchResult(
        batch_size=low * multiple_of,
        first_too_large=None if high is None else high * multiple_of,
        exact=capped or (high is not None and high - low == 1),
        capped=capped,
        trials=trials,
    )
