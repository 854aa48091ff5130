"""A Hugging Face ``Trainer``'s whole optimizer step replayed as one CUDA graph per bucket key
(:mod:`sagemaker_tc.compiler.captured_step`), with the Trainer's results unchanged.

On when the job names ``TrainingCompilerConfig(plan="step")`` (with the default ``mode``), the
``step`` plan runs, the model trains on one CUDA GPU and :func:`unmet_preconditions` finds nothing;
``plan="auto"`` records it only where a committed GPU result backs it
(:func:`~sagemaker_tc.compiler.planner.whole_step_under_auto`: none does yet). ``Trainer.training_step``
is wrapped (:func:`wrap_training_step`); per optimizer step the wrapper:

- pads the batch to its bucket (before any recording) and routes it: a batch with the job's rows and a
  bucket key whose recording did not fail runs the whole step (:class:`~.captured_step.CapturedStep`:
  warm-ups, recording, replays); any other batch (an epoch's shorter last batch, a failed key, the job's
  first step, which finds the parameters that get gradients) runs the Trainer's own step;
- for a whole step, makes the Trainer's follow-up calls return its results: accelerate's
  ``clip_grad_norm_`` the norm computed in the step, ``optimizer.step()`` nothing (the scheduler is told the optimizer
  stepped), ``model.zero_grad()`` nothing (the next step zeroes the kept gradients in place; after a
  Trainer step it zeroes them in place instead of freeing them, which would break a recording);
- applies the Trainer's NaN/Inf filter to the returned loss without a host sync (the Trainer's own
  arithmetic with ``torch.where``; ``logging_nan_inf_filter`` is off while the wrapper filters);
- keeps the model's ``num_parameters()`` for the Trainer's per-step FLOP count while the parameters
  are unchanged, and copies batches to the device without waiting (accelerate's ``non_blocking``).

A recording that fails, a model changed under the recordings, or the ``step`` plan ending sends the
steps back to the Trainer's own path; the report's ``captured_step`` section counts warm-ups,
recordings, replays, failures and invalidations.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable
from typing import Any

from sagemaker_tc import _hf_internals, _internals
from sagemaker_tc.compiler.captured_step import CaptureCounts, CapturedStep, GraphBackend, bucket_key
from sagemaker_tc.compiler.optimizers import unwrap
from sagemaker_tc.compiler.step_body import StepBody, unsupported_reason
from sagemaker_tc.errors import CaptureFailed, GraphsInvalidated, StepBodyFailed, StepBodyUnsupported

logger = logging.getLogger("sagemaker_tc.compiler")

_STEP_CALLBACK_EVENTS = ("on_pre_optimizer_step", "on_optimizer_step")


def unmet_preconditions(trainer: Any) -> str | None:
    """Why ``trainer``'s step cannot be captured whole, or None when it can: one process and one
    GPU, gradient accumulation 1, no fp16 loss scaling, no DeepSpeed or FSDP, ``training_step`` and
    ``compute_loss`` not overridden, torch's Adam/AdamW with no step hooks, a torch learning-rate
    scheduler stepped per step, and no callback that acts between the backward and the optimizer step."""
    import torch
    from transformers import Trainer, TrainerCallback

    args = trainer.args
    checks = [
        (getattr(args, "world_size", 1) != 1 or getattr(args, "n_gpu", 1) > 1, "more than one process or GPU"),
        (getattr(args, "gradient_accumulation_steps", 1) != 1, "gradient accumulation > 1"),
        (bool(getattr(args, "fp16", False)), "fp16 (a GradScaler's step reads the host)"),
        (bool(getattr(trainer, "is_deepspeed_enabled", False)), "DeepSpeed"),
        (bool(getattr(trainer, "is_fsdp_enabled", False)), "FSDP"),
        (type(trainer).training_step is not Trainer.training_step, "the Trainer subclass overrides training_step"),
        (type(trainer).compute_loss is not Trainer.compute_loss, "the Trainer subclass overrides compute_loss"),
        (bool(getattr(args, "torch_compile", False)), "TrainingArguments(torch_compile=True)"),
    ]
    for failed, reason in checks:
        if failed:
            return reason
    optimizer = unwrap(trainer.optimizer) if trainer.optimizer is not None else None
    if optimizer is None:
        return "no optimizer"
    reason = unsupported_reason(optimizer)
    if reason is not None:
        return reason
    if _internals.optimizer_step_hook_count(optimizer):
        return "optimizer step hooks are registered (a recorded step runs no Python around the update)"
    scheduler = getattr(trainer.lr_scheduler, "scheduler", trainer.lr_scheduler)  # accelerate's wrapper
    plateau = isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)  # stepped on metrics, not steps
    if plateau or not isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler):
        return "the learning-rate scheduler is not a torch LRScheduler stepped every step"
    for callback in trainer.callback_handler.callbacks:
        for event in _STEP_CALLBACK_EVENTS:
            if getattr(type(callback), event, None) is not getattr(TrainerCallback, event):
                return f"callback {type(callback).__name__} overrides {event}"
    return None


class TrainerCapture:
    """The whole-step capture of one ``Trainer`` (module docstring).

    Args:
        trainer: the Trainer (its optimizer and scheduler exist: called from ``training_step``).
        backend: the graph backend (:class:`~.captured_step.CudaGraphs` on CUDA).
        running: ``running() -> bool``: the ``step`` plan runs now (else the Trainer's own path).
        counts: where the report's counts go.
        bucket: ``bucket(batch) -> (padded, bucketed)``: the runtime's shape policy
            (:meth:`~sagemaker_tc.compiler.shapes.ShapePolicy.bucket`).
        on_outcome: ``on_outcome(outcome, key)`` after each whole step: what it did (``"warm-up"``,
            ``"recorded"``, ``"replayed"``) and its bucket key (the step timer marks the step).
    """

    def __init__(
        self,
        trainer: Any,
        backend: GraphBackend,
        running: Callable[[], bool],
        counts: CaptureCounts,
        bucket: Callable[[dict[str, Any]], tuple[dict[str, Any], bool]],
        on_outcome: Callable[[str, Any], None] = lambda outcome, key: None,
    ) -> None:
        self.trainer = trainer
        self.backend = backend
        self.running = running
        self.bucket = bucket
        self.on_outcome = on_outcome
        self.counts = counts
        self.rows = _hf_internals.trainer_rows(trainer)
        self.taking_part: list[Any] | None = None
        self.disabled: str | None = None  # why the whole step is off for the rest of the job
        self.captured: CapturedStep | None = None
        self.handled = False  # the current optimizer step ran whole: the follow-up calls return its results
        self._body: StepBody | None = None  # the body that ran it
        self._undo: list[Callable[[], None]] = []
        self._params_count: tuple[Any, dict] = (None, {})
        self._layouts: list[tuple[int, ...]] = []  # each taking part gradient's strides, as the backward made it

    # -- per step ------------------------------------------------------------------------------------
    def training_step(self, original: Callable[..., Any], model: Any, inputs: Any, num_items: Any) -> Any:
        """One optimizer step: whole (captured) when the batch may, else the Trainer's own."""
        self.handled = False
        if not self.running():
            self.release()
            return self._trainer_step(original, model, inputs, num_items)
        model.train()
        batch = self._batch(inputs, num_items)
        key = bucket_key(batch) if batch is not None else None
        whole = key is not None and _rows(batch) == self.rows and self.taking_part is not None and not self.disabled
        if whole and (self.captured is None or self.captured.can_run(key)):
            try:
                return self._whole(model, key, batch)
            except (StepBodyFailed, StepBodyUnsupported) as error:
                self.release()
                self.disabled = str(error)
                logger.warning("CAPTURED STEP OFF: the whole step failed (%s); the Trainer's own steps run", error)
            except GraphsInvalidated as error:
                self.release()
                self.taking_part = None
                logger.info("Captured step: %s; the Trainer's own step runs, recordings start again", error)
            except CaptureFailed:
                pass  # the key runs the Trainer's own steps from now on
        loss = self._trainer_step(original, model, inputs, num_items)
        if self.taking_part is None:
            self.taking_part = [p for p in model.parameters() if p.grad is not None]
            self._layouts = [p.grad.stride() for p in self.taking_part]
        return loss

    def _trainer_step(self, original: Callable[..., Any], model: Any, inputs: Any, num_items: Any) -> Any:
        """The Trainer's own step, from gradients set to None as after its ``zero_grad()`` (a whole
        step leaves the kept gradients filled; the patched ``zero_grad`` puts them back after)."""
        for param in model.parameters():
            param.grad = None
        return self._filtered(original(self.trainer, model, inputs, num_items))

    def _batch(self, inputs: Any, num_items: Any) -> dict[str, Any] | None:
        """The step's inputs on the device, padded to their bucket, with ``num_items_in_batch``;
        None for a batch that is not a mapping or not bucketed (the Trainer's own step runs it)."""
        from collections.abc import Mapping

        prepared = self.trainer._prepare_inputs(inputs)
        if not isinstance(prepared, Mapping):
            return None
        batch, bucketed = self.bucket(dict(prepared))
        if not bucketed:
            return None
        batch = dict(batch)
        if num_items is not None:
            batch["num_items_in_batch"] = num_items
        return batch

    def _whole(self, model: Any, key: Any, batch: dict[str, Any]) -> Any:
        if self.captured is None:
            self.captured = self._build(model)
        body = self.captured.body  # the plan may end inside the step (a failure): its results stay
        self.on_outcome(self.captured.run(key, batch), key)
        self.handled, self._body = True, body
        return self._filtered(body.loss)

    def _build(self, model: Any) -> CapturedStep:
        """The body and its recordings, after a Trainer step found the parameters that get
        gradients: their gradients are allocated now, before any recording, with the strides that
        step's backward gave them."""
        import torch

        trainer = self.trainer
        clip_to = float(trainer.args.max_grad_norm or 0.0)
        clip_to = clip_to if clip_to > 0 else float("inf")  # transformers 5 logs the norm unclipped then
        for param, stride in zip(self.taking_part or [], self._layouts, strict=True):
            # the layout the backward gave the Trainer's gradient: the norm then sums in the same order
            param.grad = torch.empty_strided(param.shape, stride, dtype=param.dtype, device=param.device).zero_()

        def loss_of(batch: dict[str, Any]) -> Any:
            inputs = {k: v for k, v in batch.items() if k != "num_items_in_batch"}
            with trainer.compute_loss_context_manager():
                return trainer.compute_loss(model, inputs, num_items_in_batch=batch.get("num_items_in_batch"))

        body = StepBody(
            unwrap(trainer.optimizer),
            list(self.taking_part or []),
            float(trainer.args.max_grad_norm or 0.0),
            loss_of,
            clip=lambda: self._original_clip(model.parameters(), clip_to),
        )
        return CapturedStep(body, self.backend, lambda: fingerprint(model), self.counts)

    def _filtered(self, loss: Any) -> Any:
        """The Trainer's NaN/Inf filter, without a sync (module docstring)."""
        import torch

        if not self._filtering:
            return loss
        filler = _hf_internals.logged_loss_filler(self.trainer)
        return loss if filler is None else torch.where(torch.isfinite(loss), loss, filler)

    # -- the Trainer's follow-up calls ---------------------------------------------------------------
    def install(self, model: Any) -> None:
        """Patch the Trainer's follow-up calls on these instances (module docstring); undone by
        :meth:`uninstall`."""
        trainer = self.trainer
        self._original_clip = trainer.accelerator.clip_grad_norm_
        self._patch(trainer.accelerator, "clip_grad_norm_", self._clip)
        accelerated = trainer.optimizer
        original_step = accelerated.step
        replacement = functools.partial(self._optimizer_step, original_step)
        if _internals.is_lr_scheduler_step_wrapper(original_step):  # else the scheduler warns of an override
            _internals.keep_lr_scheduler_tracking(replacement, unwrap(accelerated))
        self._patch(accelerated, "step", replacement)
        self._patch(model, "zero_grad", functools.partial(self._zero_grad, model.zero_grad))
        if hasattr(model, "num_parameters"):
            self._patch(model, "num_parameters", functools.partial(self._num_parameters, model.num_parameters))
        self._filtering = (
            bool(trainer.args.logging_nan_inf_filter) and _hf_internals.logged_loss_filler(trainer) is not None
        )
        if self._filtering:
            trainer.args.logging_nan_inf_filter = False
            self._undo.append(lambda: setattr(trainer.args, "logging_nan_inf_filter", True))

    _filtering = False
    _original_clip: Callable[..., Any]

    def _patch(self, owner: Any, name: str, replacement: Callable[..., Any]) -> None:
        had = name in vars(owner)
        before = vars(owner).get(name)
        setattr(owner, name, replacement)

        def undo() -> None:
            if vars(owner).get(name) is replacement:
                if had:
                    setattr(owner, name, before)
                else:
                    delattr(owner, name)

        self._undo.append(undo)

    def _clip(self, parameters: Any, max_norm: float, *args: Any, **kwargs: Any) -> Any:
        if self.handled and self._body is not None:
            return self._body.grad_norm
        return self._original_clip(parameters, max_norm, *args, **kwargs)

    def _optimizer_step(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self.handled:
            return original(*args, **kwargs)
        _internals.mark_lr_scheduler_stepped(unwrap(self.trainer.optimizer))
        return None

    def _zero_grad(self, original: Callable[..., Any], set_to_none: bool = True) -> None:
        captured = self.captured
        if captured is None:
            original(set_to_none=set_to_none)
        elif not self.handled:  # a Trainer step: free nothing a recording holds
            original(set_to_none=set_to_none)
            for param, grad in zip(captured.body.params, captured.body.grads, strict=True):
                param.grad = grad
            captured.body.zero_grads()
        self.handled = False

    def _num_parameters(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
        key = (args, tuple(sorted(kwargs.items())))
        seen, counts = self._params_count
        now = fingerprint(self.trainer.model)
        if seen != now:
            self._params_count = (now, {})
            counts = self._params_count[1]
        if key not in counts:
            counts[key] = original(*args, **kwargs)
        return counts[key]

    def release(self) -> None:
        """Drop the recordings (the plan ended, or the model changed)."""
        if self.captured is not None:
            self.captured.release()
            self.captured = None

    def uninstall(self) -> None:
        """Drop the recordings and undo every patch, last first."""
        self.release()
        while self._undo:
            self._undo.pop()()


def fingerprint(model: Any) -> tuple:
    """What a recording of ``model``'s step depends on beyond its inputs: each parameter's storage
    and ``requires_grad``, the hooks registered on its modules, and its training flag (module
    docstring of :mod:`~sagemaker_tc.compiler.captured_step`)."""
    params = tuple((p.data_ptr(), p.requires_grad) for p in model.parameters())
    return (model.training, _internals.module_hook_count(model), params)


def _rows(batch: dict[str, Any]) -> int | None:
    for value in batch.values():
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) >= 1:
            return int(shape[0])
    return None


def wrap_training_step(
    trainer_class: Any, capture_for: Callable[[Any, Any], TrainerCapture | None]
) -> Callable[[], None]:
    """Wrap ``trainer_class.training_step``: a Trainer for which ``capture_for(trainer, model)``
    gives a :class:`TrainerCapture` runs its steps through it. Returns the undo."""
    original = trainer_class.__dict__["training_step"]

    @functools.wraps(original)
    def training_step(self: Any, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        capture = capture_for(self, model)
        if capture is None:
            return original(self, model, inputs, num_items_in_batch)
        return capture.training_step(original, model, inputs, num_items_in_batch)

    trainer_class.training_step = training_step

    def undo() -> None:
        if trainer_class.__dict__.get("training_step") is training_step:
            trainer_class.training_step = original

    return undo


class TrainerCaptures:
    """The session's captures, one per Trainer (weakly held), made on the Trainer's first step when
    the ``step`` plan may capture the whole step there.

    Args:
        wanted: ``wanted() -> GraphBackend | None``: the backend when the job asked for the whole
            step captured and the ``step`` plan runs on a device that records (else None).
        running: ``running() -> bool``: the ``step`` plan runs now.
        bucket: the runtime's shape policy's ``bucket`` (:class:`TrainerCapture`).
        on_start: called when a Trainer's capture starts (the runtime stops its own CUDA graphs).
        on_outcome: what each whole step did, and its bucket key (:class:`TrainerCapture`).
    """

    def __init__(
        self,
        wanted: Callable[[], GraphBackend | None],
        running: Callable[[], bool],
        bucket: Callable[[dict[str, Any]], tuple[dict[str, Any], bool]],
        on_start: Callable[[], None] = lambda: None,
        on_outcome: Callable[[str, Any], None] = lambda outcome, key: None,
    ) -> None:
        self.wanted = wanted
        self.running = running
        self.bucket = bucket
        self.on_start = on_start
        self.on_outcome = on_outcome
        self.counts = CaptureCounts()
        self.refusals: list[str] = []
        self._by_trainer: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __call__(self, trainer: Any, model: Any) -> TrainerCapture | None:
        if trainer in self._by_trainer:
            return self._by_trainer[trainer]
        backend = self.wanted()
        if backend is None:
            return None  # asked again next step: the plan may start later (baseline steps)
        reason = unmet_preconditions(trainer)
        capture = None
        if reason is not None:
            self.refusals.append(reason)
            logger.warning("CAPTURED STEP OFF: %s; the step plan runs without recording the whole step", reason)
        else:
            capture = TrainerCapture(trainer, backend, self.running, self.counts, self.bucket, self.on_outcome)
            capture.install(model)
            self.on_start()
        self._by_trainer[trainer] = capture
        return capture

    def release(self, plan: str) -> None:
        """The runtime ends ``plan``: when it is ``step``, drop every recording and its memory pool
        now, before the job steps back (an eager rerun after an out-of-memory error needs that memory)."""
        if plan == "step":
            for capture in list(self._by_trainer.values()):
                if capture is not None:
                    capture.release()

    def close(self) -> None:
        """Undo every Trainer's patches and drop its recordings."""
        for capture in list(self._by_trainer.values()):
            if capture is not None:
                capture.uninstall()
        self._by_trainer.clear()

    def report(self) -> dict[str, Any] | None:
        """The report's ``captured_step`` section, or None when no Trainer asked for it."""
        if not self._by_trainer and not self.refusals:
            return None
        counts = self.counts
        return {
            "on": any(c is not None for c in self._by_trainer.values()),
            "backend": next((c.backend.name for c in self._by_trainer.values() if c is not None), None),
            "refused": self.refusals[0] if self.refusals else None,
            "bucket_keys": counts.keys,
            "warm_up_steps": counts.warm_ups,
            "recordings": counts.recordings,
            "replays": counts.replays,
            "capture_failures": list(counts.capture_failures),
            "invalidations": list(counts.invalidations),
        }
