"""What dynamo did in this process: one reader for jobs, ``bench`` and ``tune``, and the compile watch.

:func:`dynamo_stats` reads dynamo's counters and compilation records, all of the process's or, with
a :class:`DynamoMark` taken earlier (:func:`dynamo_mark`; a session takes one when it opens), only
what was compiled since. :class:`CompileWatch` counts compilations as they start (so a step knows it
compiled) and catches dynamo's recompile-limit warning. All reach torch only through
:mod:`sagemaker_tc._internals`.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sagemaker_tc import _internals

logger = logging.getLogger("sagemaker_tc.compiler")
_COMPILE_ID_RE = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class DynamoStats:
    """What dynamo did in this process so far.

    Attributes:
        graphs: graphs dynamo captured and compiled (``counters["stats"]["unique_graphs"]``).
        frames_compiled: frame compilations (forward compilation records; a backward compiled for
            a frame is part of that frame's compilation, not another one).
        recompiles: compilations of a frame that had been compiled before (compile id ``N/k``,
            k > 0, forward records).
        graph_breaks: graph breaks, all reasons together.
        graph_break_reasons: reason text (first line) -> count.
        compile_seconds: dynamo's own measure of time spent compiling frames, seconds.
    """

    graphs: int = 0
    frames_compiled: int = 0
    recompiles: int = 0
    graph_breaks: int = 0
    graph_break_reasons: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0


@dataclass(frozen=True)
class DynamoMark:
    """Dynamo's process-wide counts at one moment (:func:`dynamo_mark`), so that
    :func:`dynamo_stats` and :func:`inductor_cache_counters` can count only what came after.

    Attributes:
        counters: dynamo's counters then, ``{category: {name: count}}``.
        records: the compilation records dynamo held then (kept, so each stays recognisable by
            identity after dynamo's bounded record list drops it).
    """

    counters: dict[str, dict[Any, int]] = field(default_factory=dict)
    records: tuple[Any, ...] = ()

    def count(self, category: str, name: Any) -> int:
        """The counter ``name`` of ``category`` at the mark (0 when it did not exist)."""
        return self.counters.get(category, {}).get(name, 0)


def dynamo_mark() -> DynamoMark:
    """Dynamo's counts now (an empty mark when torch was never imported: nothing compiled yet)."""
    if "torch" not in sys.modules:
        return DynamoMark()
    counters = {category: dict(values) for category, values in _internals.dynamo_counters().items()}
    return DynamoMark(counters=counters, records=tuple(_internals.compilation_records()))


def dynamo_stats(since: DynamoMark | None = None) -> DynamoStats:
    """Read dynamo's counters and compilation records: all of the process's, or only what came after
    ``since`` (counts never below 0: a counter put back, e.g. by
    :func:`sagemaker_tc._internals.dynamo_state_kept`, counts as 0). Empty stats when torch was
    never imported."""
    if "torch" not in sys.modules:
        return DynamoStats()
    since = since or DynamoMark()
    counters = _internals.dynamo_counters()
    reasons: dict[str, int] = {}
    for reason, count in counters["graph_break"].items():
        count = max(0, count - since.count("graph_break", reason))
        if count:
            first_line = str(reason).strip().splitlines()[0] if str(reason).strip() else "unknown"
            reasons[first_line] = reasons.get(first_line, 0) + count
    frames = recompiles = 0
    compile_seconds = 0.0
    before = {id(record) for record in since.records}
    for record in _internals.compilation_records():
        if id(record) in before:
            continue
        compile_seconds += record.entire_frame_compile_time_s or 0.0
        if not getattr(record, "is_forward", True):
            continue
        frames += 1
        match = _COMPILE_ID_RE.search(record.compile_id or "")
        if match and int(match.group(2)) > 0:
            recompiles += 1
    return DynamoStats(
        graphs=max(0, int(counters["stats"]["unique_graphs"]) - since.count("stats", "unique_graphs")),
        frames_compiled=frames,
        recompiles=recompiles,
        graph_breaks=sum(reasons.values()),
        graph_break_reasons=reasons,
        compile_seconds=compile_seconds,
    )


_CACHE_COUNTERS = {
    "fx_graph_hits": ("inductor", "fxgraph_cache_hit"),
    "fx_graph_misses": ("inductor", "fxgraph_cache_miss"),
    "aot_autograd_hits": ("aot_autograd", "autograd_cache_hit"),
    "aot_autograd_misses": ("aot_autograd", "autograd_cache_miss"),
}


def inductor_cache_counters(since: DynamoMark | None = None) -> dict[str, int]:
    """Inductor's FX graph cache and AOTAutograd cache hits and misses in this process, or since
    ``since`` (zeros without torch)."""
    if "torch" not in sys.modules:
        return dict.fromkeys(_CACHE_COUNTERS, 0)
    since = since or DynamoMark()
    counters = _internals.dynamo_counters()
    return {
        key: max(0, int(counters[category][name]) - since.count(category, name))
        for key, (category, name) in _CACHE_COUNTERS.items()
    }


class CompileWatch:
    """Tells ``on_compile()`` whenever torch starts compiling, and keeps dynamo's recompile-limit
    warnings (past the limit dynamo runs the function uncompiled, and says so only in that log line),
    telling ``on_limit_hit(summary)`` of each.

    :meth:`install` registers both (importing torch); :meth:`uninstall` removes them.
    """

    def __init__(self, on_compile: Callable[..., None], on_limit_hit: Callable[[str], None] | None = None) -> None:
        self.on_compile = on_compile
        self.on_limit_hit = on_limit_hit
        self.recompile_limit_hits: list[str] = []
        self._undo: list[Callable[[], None]] = []
        self._handler = _RecompileLimitHandler(self)

    def install(self) -> None:
        """Register the compile callback and the log handler (idempotent)."""
        if self._undo:
            return
        _internals.keep_compilation_records()
        self._undo.append(_internals.add_compile_start_callback(self.on_compile))
        limit_logger = logging.getLogger(_internals.RECOMPILE_LIMIT_LOGGER)
        limit_logger.addHandler(self._handler)
        self._undo.append(lambda: limit_logger.removeHandler(self._handler))

    def uninstall(self) -> None:
        """Remove what :meth:`install` registered."""
        while self._undo:
            self._undo.pop()()


class _RecompileLimitHandler(logging.Handler):
    def __init__(self, watch: CompileWatch) -> None:
        super().__init__(level=logging.WARNING)
        self.watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break training
            return
        if not _internals.is_recompile_limit_message(message):
            return
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        summary = " ".join(lines[:3])
        self.watch.recompile_limit_hits.append(summary)
        if self.watch.on_limit_hit is not None:
            self.watch.on_limit_hit(summary)
        logger.error(
            "RECOMPILE LIMIT HIT: dynamo stopped compiling this function and runs it uncompiled from now on "
            "(%s). Bucket sequence lengths (TrainingCompilerConfig(buckets=...)) or pass dynamic=True.",
            summary,
        )


class DynamoLimits:
    """Dynamo's process-wide recompile limits, raised for one session and put back by :meth:`restore`.

    Each compile plan variant compiles within a budget of its own
    (:func:`sagemaker_tc.compiler.plan_call.compile_forward`: ``torch.compile(recompile_limit=...,
    isolate_recompiles=True)`` on torch 2.13, the limit set for each call before); the accumulated
    limit, a cap on any one code object's compiles over every budget, must still hold them all.
    """

    ACCUMULATED_HEADROOM = 256
    """Left for the script's own compiled functions: dynamo's default accumulated limit."""

    def __init__(self) -> None:
        self._before: dict[str, int] = {}

    def raise_recompile_limit(self, limit: int) -> None:
        """Dynamo's per-code-object ``recompile_limit`` at least ``limit``."""
        current = _internals.recompile_limit()
        if limit > current:
            self._before.setdefault("recompile_limit", current)
            _internals.set_recompile_limit(limit)

    def make_room_for(self, budgets: Mapping[str, int]) -> None:
        """Room for each plan's budget (``{plan: compiles}``; three variants each: dynamic, static,
        captured) in the accumulated limit."""
        wanted = sum(budgets.values()) * 3 + self.ACCUMULATED_HEADROOM
        current = _internals.accumulated_recompile_limit()
        if wanted > current:
            self._before.setdefault("accumulated_recompile_limit", current)
            _internals.set_accumulated_recompile_limit(wanted)

    def restore(self) -> None:
        """Put every limit this object raised back as it was."""
        if "recompile_limit" in self._before:
            _internals.set_recompile_limit(self._before.pop("recompile_limit"))
        if "accumulated_recompile_limit" in self._before:
            _internals.set_accumulated_recompile_limit(self._before.pop("accumulated_recompile_limit"))
