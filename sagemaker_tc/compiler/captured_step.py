"""The whole training step recorded once per bucket key and replayed: forward, backward, clipping and
the optimizer's update as one CUDA graph, so that a steady step costs the host a few copies and one
launch instead of every kernel's launch.

A *bucket key* is what a recording holds fixed: each input tensor's name, shape and dtype (the batch's
rows and padded lengths) and the value of each non-tensor input. Per key, :class:`CapturedStep`:

1. runs the step :data:`WARM_UP_STEPS` times uncaptured (``warm_up``: compiles for the key's shapes,
   autotunes, lets the allocator settle; on CUDA on the capture stream);
2. at the next occurrence copies the inputs into buffers of its own (allocated before the recording),
   records the step (``capture``: a recording runs nothing), then replays it once: no step runs twice;
3. from then on copies each batch into those buffers and replays.

All recordings share one memory pool and one stream (:class:`CudaGraphs`). Everything that outlives a
replay (parameters, gradients, optimizer state, learning rates, input buffers, loss and norm) is
allocated before the first recording, so the pool holds only a step's intermediates and graphs may
replay in any order.

A replay skips dynamo's guards: a *fingerprint* of the model (given by the caller: parameters'
storage and ``requires_grad``, hooks, the training flag) is compared before each step, and the graphs
are dropped when it changed (:class:`GraphsInvalidated`). A recording that fails marks its key
uncaptured (:class:`CaptureFailed`; the step has not run, the caller runs it uncaptured).

The graph backend is injected: :class:`CudaGraphs` on a CUDA device, :class:`CallReplay` (a stand-in
whose replay calls the recorded function) for the CPU tests of everything but the recording itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sagemaker_tc import _internals
from sagemaker_tc.compiler.failures import error_summary
from sagemaker_tc.compiler.step_body import StepBody
from sagemaker_tc.errors import CaptureFailed, GraphsInvalidated, StepBodyFailed

logger = logging.getLogger("sagemaker_tc.compiler")

WARM_UP_STEPS = 2  # uncaptured steps per key before its recording (torchtitan warms two optimizer steps)


class GraphBackend(Protocol):
    """Records and replays a step function (the protocol :class:`CapturedStep` takes)."""

    name: str

    def warm_up(self, body: Callable[[], None]) -> None:
        """Run ``body`` uncaptured, where recordings will run (the capture stream)."""

    def capture(self, body: Callable[[], None]) -> Any:
        """Record ``body`` without running it; returns a handle for :meth:`replay`."""

    def replay(self, handle: Any) -> None:
        """Run a recording once."""

    def release(self) -> None:
        """Drop the shared memory pool and stream (after every handle was dropped)."""


class CallReplay:
    """The CPU stand-in for :class:`CudaGraphs`: a recording keeps the function, a replay calls it.
    It runs the same Python and kernels a recording would hold, so bucket routing, warm-up and
    recording counts, invalidation and the step's numbers are testable without a GPU."""

    name = "call-replay"

    def warm_up(self, body: Callable[[], None]) -> None:
        body()

    def capture(self, body: Callable[[], None]) -> Any:
        return body

    def replay(self, handle: Any) -> None:
        handle()

    def release(self) -> None:
        return None


class CudaGraphs:
    """CUDA graphs (``torch.cuda.CUDAGraph``) recorded on one side stream into one shared pool
    (``torch.cuda.graph_pool_handle()``), made on first use."""

    name = "cuda-graphs"

    def __init__(self) -> None:
        self.pool: Any = None
        self.stream: Any = None

    def _ready(self) -> None:
        import torch

        if self.stream is None:
            self.stream = torch.cuda.Stream()
            self.pool = torch.cuda.graph_pool_handle()

    def warm_up(self, body: Callable[[], None]) -> None:
        import torch

        self._ready()
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            body()
        torch.cuda.current_stream().wait_stream(self.stream)

    def capture(self, body: Callable[[], None]) -> Any:
        import torch

        self._ready()
        graph = torch.cuda.CUDAGraph()
        with _internals.cuda_graph_capture(graph, self.pool, self.stream):
            body()
        return graph

    def replay(self, handle: Any) -> None:
        handle.replay()

    def release(self) -> None:
        self.pool = self.stream = None


def graph_backend_for(device: str) -> GraphBackend | None:
    """The graph backend for a device type: :class:`CudaGraphs` on ``"cuda"``, else None (no
    recording: the step runs as the ``Trainer`` runs it)."""
    return CudaGraphs() if device == "cuda" else None


def bucket_key(inputs: Mapping[str, Any]) -> tuple | None:
    """The recording key of one batch: ``(name, shape, dtype, device)`` of each tensor and
    ``(name, value)`` of each other input (sorted by name); None when a non-tensor input is not a
    plain scalar (it cannot be held fixed: the step runs uncaptured)."""
    import torch

    parts: list[tuple] = []
    for name in sorted(inputs):
        value = inputs[name]
        if isinstance(value, torch.Tensor):
            parts.append((name, tuple(value.shape), str(value.dtype), str(value.device)))
        elif value is None or isinstance(value, (bool, int, float, str)):
            parts.append((name, value))
        else:
            return None
    return tuple(parts)


@dataclass
class _Key:
    seen: int = 0
    handle: Any = None
    inputs: dict[str, Any] | None = None
    failed: str | None = None


@dataclass
class CaptureCounts:
    """What the captured step did, for the report (counts of steps and recordings)."""

    keys: int = 0
    warm_ups: int = 0
    recordings: int = 0
    replays: int = 0
    capture_failures: list[dict[str, str]] = field(default_factory=list)
    invalidations: list[str] = field(default_factory=list)


class CapturedStep:
    """One job's recordings of its whole step, per bucket key (module docstring).

    Args:
        body: the step's computation (:class:`~.step_body.StepBody`).
        backend: records and replays (:class:`CudaGraphs`, :class:`CallReplay`).
        fingerprint: ``fingerprint() -> hashable``: the model's state a recording depends on.
        counts: where to count (shared across rebuilds of the step, for the report).
    """

    def __init__(
        self,
        body: StepBody,
        backend: GraphBackend,
        fingerprint: Callable[[], Hashable],
        counts: CaptureCounts | None = None,
    ) -> None:
        self.body = body
        self.backend = backend
        self.fingerprint = fingerprint
        self.counts = counts or CaptureCounts()
        self._keys: dict[Hashable, _Key] = {}
        self._seen_fingerprint = fingerprint()

    def can_run(self, key: Hashable) -> bool:
        """False for a key whose recording failed (its steps run uncaptured)."""
        state = self._keys.get(key)
        return state is None or state.failed is None

    def run(self, key: Hashable, inputs: Mapping[str, Any]) -> str:
        """Run one whole step on ``inputs`` (already on the device, shaped as ``key``): a warm-up,
        the key's recording and first replay, or a replay. Returns ``"warm-up"``, ``"recorded"`` or
        ``"replayed"``. Results are in the body's ``loss`` and ``grad_norm``.

        Raises:
            GraphsInvalidated: the model's fingerprint changed: every recording was dropped and the
                step did not run.
            StepBodyFailed: a warm-up step raised: every recording was dropped.
            CaptureFailed: the key's recording failed: it is marked uncaptured and the step did not run.
        """
        self._check_fingerprint()
        if not self.body.grads_kept():
            self.release()
            self.counts.invalidations.append("a parameter's gradient was set to None or replaced")
            raise GraphsInvalidated(self.counts.invalidations[-1])
        if key not in self._keys:
            self._keys[key] = _Key()
            self.counts.keys += 1
        state = self._keys[key]
        state.seen += 1
        self.body.set_learning_rates()
        if state.handle is None and state.seen <= WARM_UP_STEPS:
            try:
                self.backend.warm_up(lambda: self.body.run(inputs))
            except Exception as error:  # the body itself fails: no key can record it
                self.release()
                reason = error_summary(error)
                self.counts.capture_failures.append(
                    {"bucket": "every bucket (an uncaptured warm-up step)", "reason": reason}
                )
                raise StepBodyFailed(reason) from error
            self.counts.warm_ups += 1
            return "warm-up"
        if state.handle is None:
            self._record(key, state, inputs)
            self.backend.replay(state.handle)
            self.counts.replays += 1
            return "recorded"
        for name, buffer in (state.inputs or {}).items():
            if hasattr(buffer, "copy_"):
                buffer.copy_(inputs[name], non_blocking=True)
        self.backend.replay(state.handle)
        self.counts.replays += 1
        return "replayed"

    def _record(self, key: Hashable, state: _Key, inputs: Mapping[str, Any]) -> None:
        static = {name: value.clone() if hasattr(value, "clone") else value for name, value in inputs.items()}
        try:
            state.handle = self.backend.capture(lambda: self.body.run(static))
        except Exception as error:  # torch raises RuntimeErrors of many kinds from a capture
            state.failed = error_summary(error)
            self.counts.capture_failures.append({"bucket": repr(key), "reason": state.failed})
            logger.warning("CUDA GRAPH RECORDING FAILED for bucket %r: %s; its steps run uncaptured", key, state.failed)
            raise CaptureFailed(key, state.failed) from error
        state.inputs = static
        self.counts.recordings += 1

    def _check_fingerprint(self) -> None:
        now = self.fingerprint()
        if now != self._seen_fingerprint:
            self.release()
            self.counts.invalidations.append("the model changed (parameters, requires_grad, hooks or training mode)")
            raise GraphsInvalidated(self.counts.invalidations[-1])

    def keys(self) -> list[Hashable]:
        """The keys met so far, in order."""
        return list(self._keys)

    def release(self) -> None:
        """Drop every recording, its input buffers and the backend's pool (the plan ended, the model
        changed, or the job closes). Safe to call twice."""
        self._keys.clear()
        self.backend.release()
