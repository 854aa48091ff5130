"""Step timing without host syncs: one timer for jobs, ``sagemaker-tc bench`` and ``sagemaker-tc tune``.

A step runs from :meth:`StepTimer.begin_step` to :meth:`StepTimer.end_step` (one optimizer step).
On CPU its time is the host's wall time (CPU work is synchronous). On CUDA the timer records a CUDA
event at the step's begin and at its end and reads them back later, without blocking: the span
between the two on the GPU's timeline. While the host runs ahead, the begin event runs when the GPU
finishes the previous step, so the span is the step's real period whether the GPU or the host is
the bottleneck; when the GPU was idle (the first step, after an evaluation) it starts at once and
the span covers the host's work too. The host never waits for the GPU to learn it. Ended steps
whose events have not completed yet wait in a queue and are read (``Event.query()``, non-blocking)
at later step ends; :meth:`flush` waits for them, once, when the figures are needed (the end of the
job, or a plan decision).

Which steps compiled something is counted on the host: :class:`~sagemaker_tc.compiler.dynamo.
CompileWatch` calls :meth:`StepTimer.on_compile` whenever torch starts compiling (a dynamo frame,
a backward, a CUDA graph recording).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagemaker_tc import _internals


@dataclass
class StepRecord:
    """One optimizer step: seconds (see the module docstring for how they are measured), samples
    (global batch), whether torch compiled during it, the variant it ran (``eager``, ``compiled``,
    ...), and, for a whole step run through its recordings (:mod:`.captured_step`), what it did
    (``capture``: ``"warm-up"``, ``"recorded"`` or ``"replayed"``; None for any other step) and its
    bucket key."""

    seconds: float
    samples: int
    compiled_during: bool
    variant: str = "compiled"
    capture: str | None = None
    bucket: Any = None


@dataclass
class _Ended:
    samples: int
    compiled_during: bool
    variant: str
    start: Any  # CUDA event recorded at the step's begin (None: host-timed)
    end: Any  # CUDA event recorded at its end (None: host-timed)
    seconds: float | None = None  # host-timed steps
    capture: tuple[str, Any] | None = None  # (what the captured step did, its bucket key)


def _cuda_in_use() -> bool:
    """True when this process has initialized CUDA (never initializes it). Called twice a step, so
    only the flag: ``torch.cuda.is_available()`` asks the driver for the device count each call,
    and CUDA that is initialized is available."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


class StepTimer:
    """Times optimizer steps without host syncs (module docstring). Thread-safe.

    Args:
        label: returns the variant name the step about to begin runs (default ``"eager"``).
        use_cuda: time with CUDA events (default: when CUDA is initialized at the step's begin).
        device: returns the ``torch.device`` the model trains on (None: the current device); the
            events are recorded on that device's current stream, where the step's kernels run,
            whatever device the process made current (a rank that never called ``set_device``).
    """

    def __init__(
        self,
        label: Callable[[], str] | None = None,
        use_cuda: bool | None = None,
        device: Callable[[], Any] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.records: list[StepRecord] = []
        self._pending: deque[_Ended] = deque()
        self._label = label
        self._use_cuda = use_cuda
        self._device = device or (lambda: None)
        self._on_step_ended: list[Callable[[], None]] = []
        self._compiles = 0
        self._compiles_at_begin = 0
        self._begun_at: float | None = None
        self._begin_event: Any = None
        self._variant = "eager"
        self._capture: tuple[str, Any] | None = None
        self.compiles_in_steps = 0

    # -- events ----------------------------------------------------------------------------------
    def on_compile(self, *args: object) -> None:
        """A compilation started (registered as a compile start callback): the step it starts in is
        not a steady one. ``compiles_in_steps`` counts frame compiles only (a backward compiled
        lazily at ``loss.backward()``, as before torch 2.10, is part of its frame's compile)."""
        with self._lock:
            self._compiles += 1
            if self._begun_at is not None and _internals.is_frame_compile(args[0] if args else None):
                self.compiles_in_steps += 1

    def add_step_end_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` right after each step ends, before its time is known (the runtime
        counts steps and switches plans there; it may call :meth:`flush`)."""
        self._on_step_ended.append(callback)

    def mark_capture(self, outcome: str, bucket: Any = None) -> None:
        """The open step ran the whole step through its recordings: ``outcome`` is ``"warm-up"``,
        ``"recorded"`` or ``"replayed"`` (:meth:`.captured_step.CapturedStep.run`), ``bucket`` its
        bucket key. Kept on the step's :class:`StepRecord`; ignored outside a step."""
        with self._lock:
            if self._begun_at is not None:
                self._capture = (outcome, bucket)

    @property
    def step_open(self) -> bool:
        """True between :meth:`begin_step` and :meth:`end_step`."""
        return self._begun_at is not None

    def begin_step(self) -> None:
        """Mark the start of an optimizer step (the first forward of its batch)."""
        cuda = self._cuda()
        with self._lock:
            self._begun_at = time.perf_counter()
            self._compiles_at_begin = self._compiles
            self._variant = self._label() if self._label is not None else "eager"
            self._capture = None
            self._begin_event = _record_event(self._device()) if cuda else None

    def end_step(self, samples: int) -> None:
        """Mark the end of the step begun last; ``samples`` is its global batch size (all ranks, all
        accumulation micro-batches). Never waits for the GPU."""
        cuda = self._cuda()
        with self._lock:
            if self._begun_at is None:
                return
            compiled = self._compiles != self._compiles_at_begin
            if self._begin_event is None or not cuda:  # host-timed; queued behind CUDA steps in flight
                seconds = time.perf_counter() - self._begun_at
                ended = _Ended(int(samples), compiled, self._variant, None, None, seconds, self._capture)
            else:
                end = _record_event(self._device())
                ended = _Ended(int(samples), compiled, self._variant, self._begin_event, end, capture=self._capture)
            self._pending.append(ended)
            self._begun_at = None
            self._resolve(block=False)
        for callback in self._on_step_ended:
            callback()

    def flush(self) -> list[StepRecord]:
        """Wait for every ended step's CUDA events (one host sync, for the report or a decision) and
        return all records."""
        with self._lock:
            self._resolve(block=True)
            return list(self.records)

    # -- internals ---------------------------------------------------------------------------------
    def _cuda(self) -> bool:
        return _cuda_in_use() if self._use_cuda is None else self._use_cuda

    def _resolve(self, *, block: bool) -> None:
        """Move the ended steps whose times are known (all, waiting for them, with ``block``) to
        :attr:`records`, in step order."""
        ready = []
        while self._pending:
            ended = self._pending[0]
            if ended.end is None:
                seconds = ended.seconds or 0.0
            else:
                if block:
                    ended.end.synchronize()
                elif not ended.end.query():
                    break
                seconds = ended.start.elapsed_time(ended.end) / 1000.0
            outcome, bucket = ended.capture or (None, None)
            ready.append(StepRecord(seconds, ended.samples, ended.compiled_during, ended.variant, outcome, bucket))
            self._pending.popleft()
        self.records.extend(ready)


def _record_event(device: Any = None) -> Any:
    """A timing CUDA event recorded on ``device``'s current stream (a CUDA ``torch.device``; else the
    current device's)."""
    import torch

    event = torch.cuda.Event(enable_timing=True)
    on_cuda = device is not None and getattr(device, "type", None) == "cuda"
    event.record(torch.cuda.current_stream(device) if on_cuda else None)
    return event


@dataclass(frozen=True)
class StepSummary:
    """Step timing summary.

    Attributes:
        steps: optimizer steps measured.
        first_step_seconds: the first step's time, seconds (None without steps).
        steady_step_seconds: median time of the steady steps (:func:`steady_steps`), seconds (None
            when there is none).
        compile_seconds: time the compiling steps took beyond steady state, seconds: for each step
            during which torch compiled, its time minus ``steady_step_seconds`` (>= 0), summed.
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
    steady = steady_steps(steps, variant)
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


def steady_steps(records: list[StepRecord], variant: str | None = None) -> list[StepRecord]:
    """The steady steps of ``records``, the one rule for every step-time figure (the report's, the
    plan decision's, the benchmarks'): the steps after the first (warm-up: it allocates, loads
    kernels and autotunes even eagerly; kept when it is the only step) during which torch compiled
    nothing, and, with ``variant``, that ran that variant."""
    candidates = records[1:] if len(records) > 1 else records
    return [r for r in candidates if not r.compiled_during and (variant is None or r.variant == variant)]


def steady_median(records: list[StepRecord]) -> float | None:
    """Median seconds of the :func:`steady_steps` of ``records``; None when there is none."""
    steady = steady_steps(records)
    return statistics.median(r.seconds for r in steady) if steady else None
