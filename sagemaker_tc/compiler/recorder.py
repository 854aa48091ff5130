"""Measurements taken while the job trains: step times, samples, and what dynamo compiled.

One :data:`RECORDER` per process. Integrations call :meth:`JobRecorder.begin_step` /
:meth:`JobRecorder.end_step` around each optimizer step; dynamo's compile callbacks mark the steps
during which something was compiled, so steady state is measured on the other steps.
"""

from __future__ import annotations

import logging
import re
import statistics
import threading
import time
from dataclasses import dataclass, field

# Dynamo keeps the last N compilation records (64 by default); keep enough for a job's whole life.
_COMPILATION_METRICS_LIMIT = 4096
_COMPILE_ID_RE = re.compile(r"(\d+)/(\d+)")


@dataclass
class StepRecord:
    """One optimizer step: wall time in seconds, samples (global batch), whether dynamo compiled
    during it, and the variant it ran (``eager``, ``compiled``, ``eager+fused``, ``compiled+fused``)."""

    seconds: float
    samples: int
    compiled_during: bool
    variant: str = "compiled"


@dataclass
class DynamoStats:
    """What dynamo did in this process.

    Attributes:
        graphs: graphs dynamo captured and compiled (``counters["stats"]["unique_graphs"]``).
        recompiles: compilations of a frame that had been compiled before (compile id ``N/k``, k > 0).
        graph_breaks: graph breaks, all reasons together.
        graph_break_reasons: reason text (first line) -> count.
        compile_seconds: dynamo's own measure of time spent compiling frames, seconds.
    """

    graphs: int = 0
    recompiles: int = 0
    graph_breaks: int = 0
    graph_break_reasons: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0


def dynamo_stats() -> DynamoStats:
    """Read dynamo's counters and compilation records (empty stats when torch was never imported)."""
    import sys

    if "torch" not in sys.modules:
        return DynamoStats()
    from torch._dynamo.utils import counters, get_compilation_metrics

    reasons: dict[str, int] = {}
    for reason, count in counters["graph_break"].items():
        first_line = str(reason).strip().splitlines()[0] if str(reason).strip() else "unknown"
        reasons[first_line] = reasons.get(first_line, 0) + count
    recompiles = 0
    compile_seconds = 0.0
    for record in get_compilation_metrics():
        match = _COMPILE_ID_RE.search(record.compile_id or "")
        if record.is_forward and match and int(match.group(2)) > 0:
            recompiles += 1
        compile_seconds += record.entire_frame_compile_time_s or 0.0
    return DynamoStats(
        graphs=int(counters["stats"]["unique_graphs"]),
        recompiles=recompiles,
        graph_breaks=sum(reasons.values()),
        graph_break_reasons=reasons,
        compile_seconds=compile_seconds,
    )


def inductor_cache_counters() -> dict[str, int]:
    """Inductor's FX graph cache and AOTAutograd cache hits and misses in this process (torch's
    ``counters["inductor"]`` / ``counters["aot_autograd"]``; zeros without torch)."""
    import sys

    if "torch" not in sys.modules:
        return {"fx_graph_hits": 0, "fx_graph_misses": 0, "aot_autograd_hits": 0, "aot_autograd_misses": 0}
    from torch._dynamo.utils import counters

    return {
        "fx_graph_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "fx_graph_misses": int(counters["inductor"]["fxgraph_cache_miss"]),
        "aot_autograd_hits": int(counters["aot_autograd"]["autograd_cache_hit"]),
        "aot_autograd_misses": int(counters["aot_autograd"]["autograd_cache_miss"]),
    }


class JobRecorder:
    """Step timings for the report. Thread-safe; one per process (:data:`RECORDER`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.steps: list[StepRecord] = []
        self._step_started: float | None = None
        self._compiles = 0
        self._compiles_at_step_start = 0
        self._hooks_installed = False
        self.integration: str | None = None
        self.plan: object | None = None
        self.recompile_limit_hits: list[str] = []
        self.training_compiles = 0  # frames dynamo compiled inside training steps (not in eval)
        self.batch_tuning: dict | None = None  # the report's batch_tuning (sagemaker_tc.tuning)
        self._variant: str = "eager"
        self._listeners: list = []
        self._label = None

    def install_dynamo_hooks(self) -> None:
        """Count compilations through dynamo's compile callbacks (idempotent; imports torch)."""
        if self._hooks_installed:
            return
        from torch._dynamo.callback import callback_handler
        from torch._dynamo.utils import set_compilation_metrics_limit

        set_compilation_metrics_limit(_COMPILATION_METRICS_LIMIT)
        callback_handler.register_start_callback(self._on_compile)
        logging.getLogger("torch._dynamo.convert_frame").addHandler(_RecompileLimitHandler(self))
        self._hooks_installed = True

    def after_dynamo_reset(self) -> None:
        """Register the compile callback again after ``torch._dynamo.reset()``, which clears dynamo's
        callbacks (no-op when the hooks were never installed)."""
        if self._hooks_installed:
            from torch._dynamo.callback import callback_handler

            callback_handler.register_start_callback(self._on_compile)

    def on_step_end(self, listener, label) -> None:
        """Call ``listener(record)`` after each step; ``label()`` names the variant a step runs."""
        self._listeners.append(listener)
        self._label = label

    def _on_compile(self, *_args: object) -> None:
        with self._lock:
            self._compiles += 1
            if self._step_started is not None:
                self.training_compiles += 1

    @property
    def step_open(self) -> bool:
        """True between :meth:`begin_step` and :meth:`end_step`."""
        return self._step_started is not None

    def begin_step(self) -> None:
        """Mark the start of an optimizer step (the first forward of its batch)."""
        with self._lock:
            self._step_started = time.perf_counter()
            self._compiles_at_step_start = self._compiles
            self._variant = self._label() if self._label is not None else "eager"

    def end_step(self, samples: int) -> None:
        """Mark the end of the step begun last; ``samples`` is its global batch size (all ranks, all
        accumulation micro-batches). Waits for queued CUDA work so the time is real."""
        import sys

        if "torch" in sys.modules:
            import torch

            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.synchronize()
        with self._lock:
            if self._step_started is None:
                return
            seconds = time.perf_counter() - self._step_started
            compiled = self._compiles != self._compiles_at_step_start
            record = StepRecord(seconds=seconds, samples=int(samples), compiled_during=compiled, variant=self._variant)
            self.steps.append(record)
            self._step_started = None
        for listener in self._listeners:
            listener(record)


class _RecompileLimitHandler(logging.Handler):
    """Catches dynamo's "hit config.recompile_limit" warning (``torch/_dynamo/convert_frame.py``):
    past the limit dynamo runs the frame eagerly, and says so only in that one log line."""

    def __init__(self, recorder: JobRecorder) -> None:
        super().__init__(level=logging.WARNING)
        self.recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break training
            return
        if "hit config." not in message or "limit" not in message:
            return
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        summary = " ".join(lines[:3])
        self.recorder.recompile_limit_hits.append(summary)
        logging.getLogger("sagemaker_tc.compiler").error(
            "RECOMPILE LIMIT HIT: dynamo stopped compiling this function and runs it uncompiled from now on "
            "(%s). Bucket sequence lengths (TrainingCompilerConfig(buckets=...)) or pass dynamic=True.",
            summary,
        )


@dataclass(frozen=True)
class StepSummary:
    """Step timing summary.

    Attributes:
        steps: optimizer steps measured.
        first_step_seconds: the first step's wall time, seconds (None without steps).
        steady_step_seconds: median wall time of the steps during which nothing was compiled,
            seconds (None when every step compiled).
        compile_seconds: time the compiling steps took beyond steady state, seconds: for each step
            during which dynamo compiled, its time minus ``steady_step_seconds`` (>= 0), summed.
            With one compile this is the first-step overhead; recompiles add theirs.
        samples_per_second: samples / seconds over the steady steps.
    """

    steps: int
    first_step_seconds: float | None
    steady_step_seconds: float | None
    compile_seconds: float | None
    samples_per_second: float | None


def summarize(steps: list[StepRecord], variant: str | None = None) -> StepSummary:
    """Summarize step records (pure; see :class:`StepSummary` for each figure's rule).

    ``variant`` limits the steady steps to those that ran that variant (the one the job ended
    with); compiling steps of any variant count towards ``compile_seconds``.
    """
    if not steps:
        return StepSummary(0, None, None, None, None)
    steady = [s for s in steps if not s.compiled_during and (variant is None or s.variant == variant)]
    steady_seconds = statistics.median(s.seconds for s in steady) if steady else None
    compile_seconds = None
    samples_per_second = None
    if steady_seconds is not None:
        compile_seconds = sum(max(0.0, s.seconds - steady_seconds) for s in steps if s.compiled_during)
        total_seconds = sum(s.seconds for s in steady)
        if total_seconds > 0:
            samples_per_second = sum(s.samples for s in steady) / total_seconds
    return StepSummary(
        steps=len(steps),
        first_step_seconds=steps[0].seconds,
        steady_step_seconds=steady_seconds,
        compile_seconds=compile_seconds,
        samples_per_second=samples_per_second,
    )


RECORDER = JobRecorder()
"""The process's recorder, shared by the launcher and the integrations."""
