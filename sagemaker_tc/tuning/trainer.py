"""``batch_size`` for Hugging Face ``Trainer`` scripts, with no change to the script.

The compile callback (:mod:`sagemaker_tc.integrations.transformers`) calls
:func:`tune_at_init_end` from ``on_init_end``: the Trainer has moved the model to its device and
``train()`` has not built the training dataloader yet. The finder runs on synthetic batches at
the tuned sequence length (:mod:`.synthetic`), with the optimizer class and arguments the Trainer
will build (``Trainer.get_optimizer_cls_and_kwargs``) and the Trainer's mixed precision
(``bf16``/``fp16`` autocast). The new values go into the ``TrainingArguments``:
``per_device_train_batch_size``, ``learning_rate``, ``warmup_steps`` (when given in steps) and
``max_steps`` (when set).

One reach into the Trainer: it copies the batch size into a private field in ``__init__``, before
``on_init_end``, and transformers has no public setter for it (its own ``auto_find_batch_size``
writes that field). The callback finds the Trainer that is calling it (the ``self`` of
``Trainer.__init__`` on the call stack) and updates that one field
(:func:`sagemaker_tc._hf_internals.calling_trainer`, :func:`~sagemaker_tc._hf_internals.set_trainer_batch_size`).
Without it the change is not applied and the report says so.

:func:`describe_at_train_begin` then adds what only ``train()`` knows to the report: steps per
epoch and optimizer steps before/after, the scheduler, the warm-up it resolved, and the learning
rate the optimizer really starts from.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _hf_internals
from sagemaker_tc.config import AUTO_BATCH
from sagemaker_tc.tuning.api import record, search_batch
from sagemaker_tc.tuning.decision import LOG_PREFIX, TuningDecision, plan_tuning

if TYPE_CHECKING:
    from sagemaker_tc.compiler.job_report import JobRecord
    from sagemaker_tc.config import TrainingCompilerConfig

logger = logging.getLogger(__name__)


def _optimizer_factory(args: Any, model: Any):
    """``factory(params)`` building the optimizer the Trainer will build for ``args`` (AdamW by
    default), so the search counts its state."""
    from transformers import Trainer

    optimizer_class, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    return lambda params: optimizer_class(params, **kwargs)


def _autocast_dtype(args: Any):
    import torch

    if getattr(args, "bf16", False):
        return torch.bfloat16
    if getattr(args, "fp16", False):
        return torch.float16
    return None


def tune_at_init_end(config: TrainingCompilerConfig, job: JobRecord, args: Any, model: Any) -> TuningDecision | None:
    """Apply ``config.batch_size`` (the session's config) to a Trainer being built (module
    docstring); the decision is kept as ``job.batch_tuning`` (the session's record, for the report).

    A search that fails (no batch fits, no synthetic inputs for this model, a compiler error in a
    try) keeps the script's batch and learning rate with a ``BATCH SIZE NOT TUNED`` error line, and
    the report's ``batch_tuning`` says why; with ``policy="strict"`` it raises instead.

    Returns:
        The decision, or None when ``config.batch_size`` is None.

    Raises:
        TuningError, BatchSizeSearchError, or the compiler's error: only with ``policy="strict"``.
    """
    if config.batch_size is None or model is None:
        return None

    def plan(new_batch: int, search: dict | None) -> TuningDecision:
        return plan_tuning(
            requested=config.batch_size,
            new_batch=new_batch,
            old_batch=args.per_device_train_batch_size,
            learning_rate=args.learning_rate,
            lr_scaling=config.lr_scaling,
            warmup_steps=args.warmup_steps,
            max_steps=args.max_steps,
            world_size=args.world_size,
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            search=search,
        )

    search = None
    new_batch = config.batch_size
    if config.batch_size == AUTO_BATCH:
        try:
            found = search_batch(
                model,
                config,
                compiled=config.compiles and not args.torch_compile,
                optimizer_factory=_optimizer_factory(args, model),
                autocast_dtype=_autocast_dtype(args),
                start=args.per_device_train_batch_size,
            )
        except Exception as error:
            return _search_failed(config, job, args, error, plan)
        new_batch, search = found.batch_size, found.to_dict()
    decision = plan(int(new_batch), search)
    _apply(config, args, decision)
    record(job, decision, log=decision.applied)
    return decision


def _search_failed(
    config: TrainingCompilerConfig, job: JobRecord, args: Any, error: Exception, plan: Any
) -> TuningDecision:
    """Record a failed search (the script's batch kept); re-raise it under ``policy="strict"``."""
    reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    trials = [t.to_dict() for t in getattr(error, "trials", [])]
    failed = plan(args.per_device_train_batch_size, {"failed": reason, "trials": trials})
    failed.applied, failed.note = False, f"search failed: {reason}"
    record(job, failed, log=False)
    if config.policy == "strict":
        raise error
    logger.error(
        "BATCH SIZE NOT TUNED: the batch-size search failed (%s); keeping the script's batch %d and learning rate %g",
        reason,
        args.per_device_train_batch_size,
        args.learning_rate,
    )
    return failed


def _apply(config: TrainingCompilerConfig, args: Any, decision: TuningDecision) -> None:
    """Put the decision into the ``TrainingArguments`` and the Trainer being built (or say why not)."""
    trainer = _hf_internals.calling_trainer()
    if trainer is None or not _hf_internals.set_trainer_batch_size(trainer, _train_batch(args, decision)):
        decision.applied = False
        decision.note = "the Trainer calling on_init_end was not found on the call stack: nothing changed"
        logger.error("BATCH SIZE NOT TUNED: %s", decision.note)
        return
    args.per_device_train_batch_size = decision.per_device_batch[1]
    args.learning_rate = decision.learning_rate[1]
    args.warmup_steps = decision.warmup_steps[1]
    args.max_steps = decision.max_steps[1]
    after = decision.max_steps[1]
    if config.compiles and 0 < after <= config.baseline_steps:
        logger.warning(
            "batch_size: max_steps is now %d, no more than baseline_steps=%d: every step runs in the eager "
            "baseline and none compiled (lower baseline_steps, or raise max_steps)",
            after,
            config.baseline_steps,
        )


def _train_batch(args: Any, decision: TuningDecision) -> int:
    """The Trainer's total train batch for the tuned per-device batch: per-device x devices
    (``TrainingArguments.train_batch_size`` multiplies by ``max(1, n_gpu)``)."""
    return decision.per_device_batch[1] * max(1, getattr(args, "n_gpu", 1) or 1)


def _warmup_resolved(warmup_steps: float, total_steps: int | None) -> int | None:
    """Warm-up steps as transformers resolves them (``TrainingArguments.get_warmup_steps``): whole
    steps when >= 1, else a fraction of ``total_steps`` rounded up."""
    if warmup_steps >= 1:
        return int(warmup_steps)
    if total_steps is None:
        return None
    return math.ceil(total_steps * warmup_steps)


def describe_at_train_begin(
    job: JobRecord, args: Any, state: Any, train_dataloader: Any, lr_scheduler: Any, optimizer: Any
) -> None:
    """Add steps per epoch, optimizer steps, the scheduler, resolved warm-up and the optimizer's
    starting learning rate to the decision kept in ``job`` (the session's record), check the Trainer
    really uses the new batch, and log them (no-op without a decision)."""
    decision = job.batch_tuning
    if not isinstance(decision, TuningDecision):  # None: nothing tuned
        return
    dataset = getattr(getattr(train_dataloader, "base_dataloader", train_dataloader), "dataset", None)
    try:
        num_samples = len(dataset) if dataset is not None else None
    except TypeError:  # an iterable dataset has no length
        num_samples = None
    applied_lr = None
    base_lrs = getattr(lr_scheduler, "base_lrs", None)
    if base_lrs:
        applied_lr = float(base_lrs[0])
    elif optimizer is not None and optimizer.param_groups:
        applied_lr = float(optimizer.param_groups[0].get("initial_lr", optimizer.param_groups[0]["lr"]))
    schedule = decision.describe_schedule(
        num_samples,
        args.num_train_epochs,
        scheduler=str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)),
        optimizer_steps_after=state.max_steps,
        learning_rate_applied=applied_lr,
    )
    total_before = (schedule.get("optimizer_steps") or {}).get("before")
    schedule["trainer_batch_size"] = getattr(state, "train_batch_size", None)
    schedule["warmup_steps_resolved"] = {
        "before": _warmup_resolved(decision.warmup_steps[0], total_before),
        "after": _warmup_resolved(decision.warmup_steps[1], state.max_steps),
    }
    used = getattr(state, "train_batch_size", None)
    expected = decision.per_device_batch[1] * max(1, getattr(args, "n_gpu", 1))
    if decision.applied and used is not None and used != expected:
        decision.applied = False
        decision.note = f"the Trainer trains with batch {used}, not the tuned {expected}"
        logger.error("BATCH SIZE NOT TUNED: %s", decision.note)
    record(job, decision, log=False)
    if not decision.applied:
        return
    steps = schedule.get("steps_per_epoch") or {}
    logger.info(
        "%s: steps per epoch %s -> %s; optimizer steps %s -> %s; %s schedule, warm-up %s -> %s steps; the "
        "scheduler's peak learning rate is %s",
        LOG_PREFIX,
        steps.get("before"),
        steps.get("after"),
        total_before,
        state.max_steps,
        schedule["scheduler"],
        schedule["warmup_steps_resolved"]["before"],
        schedule["warmup_steps_resolved"]["after"],
        f"{applied_lr:.6g}" if applied_lr is not None else "n/a",
    )
