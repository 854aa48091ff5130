"""The max-batch finder: the largest per-device batch that trains (forward, backward, optimizer
step) within a memory budget, eager or compiled.

Each try (:func:`find_max_batch`) runs ``steps_per_trial`` full training steps (2 by default:
the optimizer's state only exists from the first ``step()`` on, so the second step is the one
whose backward pass holds parameters, gradients, optimizer state and activations at once) on a
fresh optimizer built by ``optimizer_factory``, measures the peak (:mod:`.memory`), and frees
everything before the next try (gradients, the trial optimizer, the CUDA cache). Running out of
memory is caught and counts as "does not fit".

The search must not change what the user trains: the model's parameters and buffers are copied to
the host before the first try and copied back after the last, gradients are cleared, the model's
train/eval mode and the CPU and CUDA random number generators are restored. The trial optimizer
is discarded.

Compiled tries compile the same regions the runtime will (each repeated block, or the whole
model), with ``dynamic=True`` so one compiled graph serves every tried batch size; those
compilations are discarded afterwards (dynamo is reset), and training compiles its own.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler.failures import is_out_of_memory
from sagemaker_tc.compiler.loss import compute_loss
from sagemaker_tc.compiler.plan_call import compile_forward, compile_kwargs, forward_slot
from sagemaker_tc.compiler.plans import plan_modules
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import TuningError
from sagemaker_tc.tuning.memory import MemoryBudget, PeakMemory, format_bytes, resolve_budget, tensor_bytes
from sagemaker_tc.tuning.search import DEFAULT_MAX_TRIES, SearchResult, Trial, search_max_batch

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

DEFAULT_STEPS_PER_TRIAL = 2


@dataclass
class BatchSizeSearch:
    """The finder's answer for one model, sequence length, device and mode.

    Attributes:
        batch_size: the largest per-device batch that fit.
        compiled: True for compiled tries, False for eager.
        device: ``"cpu"``, ``"cuda:0"``, ...
        budget: the memory budget the tries were held to.
        search: the search's details (first batch too large, exactness, every try).
        seconds: wall time of the whole search (seconds), compilation included.
        seq_len: the tried sequence length when the batches were built for one (else None).
    """

    batch_size: int
    compiled: bool
    device: str
    budget: MemoryBudget
    search: SearchResult
    seconds: float
    seq_len: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "batch_size": self.batch_size,
            "compiled": self.compiled,
            "device": self.device,
            "seq_len": self.seq_len,
            "budget_bytes": self.budget.bytes,
            "budget_source": self.budget.source,
            "search_seconds": self.seconds,
            **{key: value for key, value in self.search.to_dict().items() if key != "batch_size"},
        }


def _adamw(params) -> torch.optim.Optimizer:
    import torch

    return torch.optim.AdamW(params, lr=1e-5)


@contextlib.contextmanager
def _restored(model: torch.nn.Module) -> Iterator[None]:
    """Put the model's values, gradients, mode and the RNGs back as they were after the block."""
    import torch

    tensors = list(model.parameters()) + list(model.buffers())
    saved = [tensor.detach().to("cpu", copy=True) for tensor in tensors]
    grads = [p.grad for p in model.parameters()]
    training = model.training
    cpu_rng = torch.random.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        with torch.no_grad():
            for tensor, value in zip(tensors, saved, strict=True):
                tensor.copy_(value)
        for param, grad in zip(model.parameters(), grads, strict=True):
            param.grad = grad
        model.train(training)
        torch.random.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)


@contextlib.contextmanager
def _compiled_regions(model: torch.nn.Module, config: TrainingCompilerConfig) -> Iterator[int]:
    """Compile the model's regions (as the runtime would) with dynamic shapes for the block; undo
    after. Yields the number of regions.

    Afterwards the search leaves no trace in dynamo (:func:`sagemaker_tc._internals.dynamo_state_kept`):
    its compiled code is dropped, and dynamo's counters and compilation records (what the job's
    report counts: graphs, recompiles, compile seconds) are put back as they were, so the report
    describes training alone.
    """
    kwargs = {**compile_kwargs(config), "dynamic": True}
    regions = plan_modules(model, config.plan)
    previous = [_internals.compiled_call(region) for region in regions]
    with _internals.dynamo_state_kept():
        function = compile_forward("batch_size_finder", _internals.recompile_limit(), **kwargs)
        for region in regions:
            _internals.set_compiled_call(region, forward_slot(region, function))
        try:
            yield len(regions)
        finally:
            for region, value in zip(regions, previous, strict=True):
                _internals.set_compiled_call(region, value)


def _leading_dim(batch: Any) -> int | None:
    import torch

    values = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, list | tuple) else [batch]
    for value in values:
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    return None


def _checked_batch(make_batch: Callable[[int], Any], batch_size: int) -> Any:
    """``make_batch(batch_size)``, checked to hold ``batch_size`` samples.

    Raises:
        TuningError: ``make_batch`` raised (other than out of memory), or its batch's first tensor
            does not have ``batch_size`` rows.
    """
    try:
        batch = make_batch(batch_size)
    except Exception as error:
        if is_out_of_memory(error):
            raise
        raise TuningError(f"make_batch({batch_size}) raised {type(error).__name__}: {error}") from error
    rows = _leading_dim(batch)
    if rows is not None and rows != batch_size:
        raise TuningError(
            f"make_batch({batch_size}) returned a batch of {rows} samples: it must return exactly the number asked for "
            "(the first dimension of its tensors)"
        )
    return batch


def _free(device: torch.device) -> None:
    """Give a try's memory back before the next: on CUDA, collect reference cycles and empty the
    caching allocator (so the next try starts from the same free memory); on CPU, reference counting
    has already freed the tensors and a full ``gc.collect()`` per try would only cost time."""
    import torch

    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def find_max_batch(
    model: torch.nn.Module,
    make_batch: Callable[[int], Any],
    *,
    compiled: bool,
    config: TrainingCompilerConfig | None = None,
    budget_gib: float | None = None,
    max_batch: int = 1024,
    start: int = 1,
    multiple_of: int = 1,
    max_tries: int = DEFAULT_MAX_TRIES,
    steps_per_trial: int = DEFAULT_STEPS_PER_TRIAL,
    optimizer_factory: Callable[[Any], Any] | None = None,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    autocast_dtype: torch.dtype | None = None,
    seq_len: int | None = None,
) -> BatchSizeSearch:
    """Find the largest per-device batch that trains ``model`` within the memory budget.

    Args:
        model: the model, already on its training device (the device of its first parameter).
        make_batch: ``make_batch(b)`` returns one training batch of ``b`` samples on that device
            (a dict of tensors for ``model(**batch)``, or a tuple for ``model(*batch)``).
        compiled: True to try the compiled model (regions as ``config`` says, dynamic shapes),
            False for eager.
        config: the compiler config for compiled tries (default ``TrainingCompilerConfig()``).
        budget_gib: the memory budget in GiB; None for the device default (:mod:`.memory`).
        max_batch, start, multiple_of, max_tries: the search's bounds (:func:`.search.search_max_batch`).
        steps_per_trial: full training steps per try (>= 2, see the module docstring).
        optimizer_factory: ``factory(params)`` builds the trial optimizer; default AdamW (two
            fp32 state tensors per parameter, like Adam and Hugging Face's default ``adamw_torch``).
        loss_fn: ``loss_fn(model, batch)`` returns the loss; default
            :func:`sagemaker_tc.compiler.loss.compute_loss`.
        autocast_dtype: run forward passes under ``torch.autocast`` with this dtype (e.g.
            ``torch.bfloat16`` for a bf16 mixed-precision job), else in the model's dtype.
        seq_len: recorded in the result (the finder itself only sees ``make_batch``).

    Returns:
        A :class:`BatchSizeSearch`. The model is as it was before the call (module docstring).

    Raises:
        TuningError: bad arguments, before any try.
        BatchSizeSearchError: not even the smallest batch fits.
    """
    if not callable(make_batch):
        raise TuningError(f"make_batch must be a function make_batch(b) -> batch of b samples (got {make_batch!r})")
    if isinstance(steps_per_trial, bool) or not isinstance(steps_per_trial, int) or steps_per_trial < 2:
        raise TuningError(f"steps_per_trial must be an int >= 2 (got {steps_per_trial!r})")
    tries = _Tries(model, make_batch, compiled, budget_gib, steps_per_trial, optimizer_factory, loss_fn, autocast_dtype)
    started = time.perf_counter()
    with (
        _restored(model),
        _compiled_regions(model, config or TrainingCompilerConfig()) if compiled else contextlib.nullcontext(),
    ):
        model.train()
        result = search_max_batch(tries, start=start, max_batch=max_batch, multiple_of=multiple_of, max_tries=max_tries)
    if result.capped:
        logger.warning(
            "batch-size search: the cap itself fits (%d samples); a larger batch may fit too: raise the cap "
            "(max_batch_size) to search further",
            result.batch_size,
        )
    return BatchSizeSearch(
        batch_size=result.batch_size,
        compiled=compiled,
        device=str(tries.device),
        budget=tries.budget,
        search=result,
        seconds=time.perf_counter() - started,
        seq_len=seq_len,
    )


class _Tries:
    """One try of the search: ``steps_per_trial`` training steps at a batch size, its peak memory
    held to the budget (:func:`find_max_batch`'s arguments).

    Raises:
        TuningError: the model has no trainable parameters.
    """

    def __init__(self, model, make_batch, compiled, budget_gib, steps, optimizer_factory, loss_fn, autocast_dtype):
        import torch

        self.model, self.make_batch, self.compiled, self.steps = model, make_batch, compiled, steps
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        if not self.parameters:
            raise TuningError(f"{type(model).__name__} has no trainable parameters: nothing to train")
        self.device = self.parameters[0].device
        self.budget = resolve_budget(self.device, budget_gib)
        self.factory = optimizer_factory or _adamw
        self.loss_fn = loss_fn or compute_loss
        cpu = self.device.type == "cpu"
        self.base_bytes = tensor_bytes(list(model.parameters()) + list(model.buffers())) if cpu else 0
        self.autocast_dtype = autocast_dtype
        self._torch = torch

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return self._torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def __call__(self, batch_size: int) -> Trial:
        started = time.perf_counter()
        peak, reason = None, None
        try:
            peak = self._train(batch_size)
            if peak is not None and peak > self.budget.bytes:
                reason = f"peak {format_bytes(peak)} > budget {format_bytes(self.budget.bytes)}"
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            reason = f"out of memory: {str(error).splitlines()[0][:200]}"
        finally:
            for param in self.parameters:
                param.grad = None
            _free(self.device)
        trial = Trial(batch_size, reason is None, peak, reason, time.perf_counter() - started)
        logger.info(
            "batch %d %s: %s (peak %s, %.1f s)",
            batch_size,
            "compiled" if self.compiled else "eager",
            "fits" if trial.fits else f"does not fit, {reason}",
            format_bytes(peak),
            trial.seconds,
        )
        return trial

    def _train(self, batch_size: int) -> int | None:
        """Train ``steps`` steps at ``batch_size`` on a fresh trial optimizer; returns the peak, bytes."""
        with PeakMemory(self.device, self.base_bytes) as measure:
            batch = _checked_batch(self.make_batch, batch_size)
            optimizer = self.factory(self.parameters)
            for _ in range(self.steps):
                optimizer.zero_grad(set_to_none=True)
                with self._autocast():
                    loss = self.loss_fn(self.model, batch)
                loss.backward()
                optimizer.step()
                loss = None
            batch = optimizer = None
        return measure.peak_bytes
