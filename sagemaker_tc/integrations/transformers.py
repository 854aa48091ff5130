"""Hugging Face ``Trainer`` integration: compile with no change to the script, and measure steps.

A ``TrainerCallback`` is added to ``transformers.trainer.DEFAULT_CALLBACKS``, the list every
``Trainer`` starts its callbacks from. At ``on_train_begin`` (after ``Trainer`` has prepared the
model, optimizer and training dataloader) it:

- compiles the model's regions in place through the runtime (so compiler failures fall back to eager
  by policy, and ``.eval()``, label names and ``state_dict()`` keys reach the real model);
- tells the runtime the job's length (``max_steps``, for ``plan="auto"``), its gradient
  accumulation (CUDA graphs only without it) and how many evaluation runs ``train()`` makes (whether
  compiling evaluation pays, :mod:`sagemaker_tc.compiler.evaluation`; ``on_evaluate`` ends each run);
- times each optimizer step (``on_step_begin`` / ``on_step_end``) for the report; with
  ``backend="xla"`` it marks the XLA step at ``on_step_end`` (one graph per optimizer step, counted).

With the config's ``batch_size`` set, ``on_init_end`` (before ``train()`` builds the dataloader)
finds or sets the per-device batch and rescales the learning rate (:mod:`sagemaker_tc.tuning.trainer`).

A script that sets ``TrainingArguments(torch_compile=True)``, or hands the ``Trainer`` a model it
wrapped with ``torch.compile``, compiles itself; the callback then leaves compilation alone and only
measures.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from sagemaker_tc import _hf_internals, _internals
from sagemaker_tc.compiler import backward
from sagemaker_tc.compiler.model_setup import restore_kv_cache
from sagemaker_tc.compiler.parts import TrainerParts
from sagemaker_tc.compiler.ranks import process_group_size
from sagemaker_tc.integrations import trainer_resume
from sagemaker_tc.integrations.captured_trainer import TrainerCaptures, wrap_training_step

logger = logging.getLogger(__name__)


def prepare_training(
    parts: TrainerParts, model, optimizer, args, state, torch_compile: bool, train_dataloader=None
) -> None:
    """Compile ``model`` in place by the session's config, with the job's length and gradient
    accumulation from the Trainer (what ``on_train_begin`` does; separate so it can be called with a
    Trainer's parts directly), through the session's ``attach`` (the same setup as ``compile_model``:
    ``use_cache`` off while training, one log line; :mod:`sagemaker_tc.compiler.model_setup`).
    Training batches are padded to buckets at the model's call, while a compiled plan runs
    (:mod:`sagemaker_tc.compiler.shapes`); with ``backend="xla"`` in ``train_dataloader``'s
    collate function instead, on the host (the dataloader moves each batch to the XLA device before
    the model's call)."""
    if optimizer is not None:
        parts.runtime.track_optimizer(optimizer)
    compiled_by = "TrainingArguments(torch_compile=True)" if torch_compile else None
    if compiled_by is None and _internals.compiled_wrapper_target(model) is not None:
        compiled_by = "a model torch.compile wrapped"
    if parts.config.compiles and compiled_by is not None:
        logger.info("%s: the script compiles itself; sagemaker-tc only measures", compiled_by)
        return
    from sagemaker_tc.compiler.sharding import note_trainer_fsdp  # FSDP2 (issue 26)

    note_trainer_fsdp(args, model)
    parts.attach(
        model,
        job_length=(getattr(state, "max_steps", None), "Trainer max_steps"),
        accumulation=int(getattr(args, "gradient_accumulation_steps", 1) or 1),
        moves_batches=True,
        train_dataloader=train_dataloader,
    )
    parts.runtime.set_evaluation_runs(*evaluation_runs(args, state))


def _strategy(value: Any) -> str:
    return str(getattr(value, "value", value) or "no")


def evaluation_runs(args: Any, state: Any) -> tuple[int | None, str]:
    """The evaluation runs ``Trainer.train()`` makes, and where the figure comes from: one per
    ``eval_steps`` optimizer steps up to ``max_steps`` (``eval_strategy="steps"``), one per epoch
    (``"epoch"``), from ``eval_delay`` on, plus one with ``eval_on_start``; ``(0, ...)`` with
    ``eval_strategy="no"``. Not counted: the end-of-training run some transformers releases add, and
    ``trainer.evaluate()`` calls the script makes itself (fewer runs: the decision leans eager).
    ``(None, "unknown")`` when the figures are missing."""
    strategy = _strategy(getattr(args, "eval_strategy", None))
    start = 1 if getattr(args, "eval_on_start", False) else 0
    delay = float(getattr(args, "eval_delay", 0) or 0)
    if strategy == "no":
        return start, "Trainer eval_strategy='no'"
    if strategy == "steps":
        every, steps = getattr(state, "eval_steps", None), getattr(state, "max_steps", None)
        if not every or not steps or steps <= 0:
            return None, "unknown"
        first = max(1, math.ceil(delay))  # the first step that may evaluate
        runs = int(steps) // int(every) - (first - 1) // int(every)
        return start + runs, f"Trainer eval_steps={int(every)} over max_steps={int(steps)}"
    if strategy == "epoch":
        epochs = getattr(state, "num_train_epochs", None) or getattr(args, "num_train_epochs", None)
        if not epochs or epochs <= 0 or epochs > 10**6:
            return None, "unknown"
        runs = sum(1 for epoch in range(1, math.ceil(epochs) + 1) if epoch >= delay)
        return start + runs, f"Trainer eval_strategy='epoch' over {math.ceil(epochs)} epochs"
    return None, "unknown"


def _unfused_optimizer_for_xla(args) -> None:
    """``backend="xla"``: transformers' default optimizer on torch >= 2.8 is ``adamw_torch_fused``,
    whose fused kernel torch refuses for parameters on an XLA device ("`fused=True` requires all the
    params to be floating point Tensors of supported devices"); use the same AdamW unfused. An
    optimizer the script chose is left alone."""
    optim = getattr(getattr(args, "optim", None), "value", getattr(args, "optim", None))
    if optim == "adamw_torch_fused":
        args.optim = "adamw_torch"
        logger.info("backend='xla': optim adamw_torch_fused -> adamw_torch (no fused kernels for XLA devices)")


def make_callback(parts: TrainerParts) -> Any:
    """The ``TrainerCallback`` that compiles and measures with a session's ``parts``."""
    from transformers import TrainerCallback

    clock = trainer_resume.ProgressClock()

    class CompilerReportCallback(TrainerCallback):
        """Compiles the model at train begin and times each optimizer step for the sagemaker-tc
        report (global batch = per-device batch x gradient accumulation x world size)."""

        def on_init_end(self, args, state, control, model=None, **kwargs):
            config = parts.config
            if config.compiles and config.backend == "xla":
                _unfused_optimizer_for_xla(args)
            if config.enabled and config.batch_size is not None and model is not None:
                from sagemaker_tc.tuning.trainer import tune_at_init_end

                tune_at_init_end(config, parts.record, args, model)

        def on_train_begin(
            self, args, state, control, model=None, train_dataloader=None, optimizer=None, lr_scheduler=None, **kwargs
        ):
            parts.record.join("transformers")
            if parts.record.batch_tuning is not None:
                from sagemaker_tc.tuning.trainer import describe_at_train_begin

                describe_at_train_begin(parts.record, args, state, train_dataloader, lr_scheduler, optimizer)
            if parts.config.enabled and model is not None:
                prepare_training(parts, model, optimizer, args, state, bool(args.torch_compile), train_dataloader)
            if train_dataloader is not None and parts.whole_step_named:
                _hf_internals.set_dataloader_non_blocking(train_dataloader)  # same batches, no wait per step

        def on_step_begin(self, args, state, control, **kwargs):
            parts.timer.begin_step()

        def on_train_end(self, args, state, control, model=None, **kwargs):
            restore_kv_cache(model)

        def on_step_end(self, args, state, control, optimizer=None, **kwargs):
            if optimizer is not None:
                parts.runtime.track_optimizer(optimizer)
            per_device = getattr(state, "train_batch_size", None) or args.per_device_train_batch_size
            parts.end_step(per_device * args.gradient_accumulation_steps * args.world_size)
            trainer_resume.on_step_end(parts.config.resume, parts.stop_agreed, clock, args, state, control)

        def on_evaluate(self, args, state, control, **kwargs):
            parts.runtime.end_evaluation_run()

        def on_save(self, args, state, control, **kwargs):
            trainer_resume.on_save(parts.plan_record, args, state)

    return CompilerReportCallback()


def install(parts: TrainerParts) -> bool:
    """Add the compile-and-measure callback of a session's ``parts`` to every ``Trainer`` this process
    creates (``transformers.trainer.DEFAULT_CALLBACKS``; taken out again when the session closes, by
    ``parts.add_cleanup``).

    Returns:
        False when transformers is not installed (nothing to do), else True.
    """
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return False
    import transformers.trainer as trainer_module

    callback = make_callback(parts)
    trainer_module.DEFAULT_CALLBACKS.append(callback)
    runtime, add_cleanup = parts.runtime, parts.add_cleanup
    add_cleanup(trainer_resume.install_train_wrapper(parts.config.resume, parts.resume_from, trainer_module.Trainer))
    captures = TrainerCaptures(
        parts.whole_step_backend,
        running=lambda: runtime.active == "step",
        bucket=lambda batch: runtime.shapes.bucket(batch) if runtime.shapes else (batch, False),
        on_start=lambda: setattr(runtime, "whole_step_recorded", True),
        on_outcome=parts.timer.mark_capture,
    )
    parts.record.captured_step = captures.report
    runtime.plan_end_listeners.append(captures.release)
    add_cleanup(lambda: runtime.plan_end_listeners.remove(captures.release))
    add_cleanup(captures.close)
    add_cleanup(wrap_training_step(trainer_module.Trainer, captures))  # inside the rerun wrapper
    add_cleanup(backward.rerun_failed_steps(trainer_module.Trainer, lambda: process_group_size() == 1))

    def remove() -> None:
        if callback in trainer_module.DEFAULT_CALLBACKS:
            trainer_module.DEFAULT_CALLBACKS.remove(callback)

    add_cleanup(remove)
    return True
