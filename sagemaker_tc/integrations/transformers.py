"""Hugging Face ``Trainer`` integration: compile with no change to the script, and measure steps.

A ``TrainerCallback`` is added to ``transformers.trainer.DEFAULT_CALLBACKS``, the list every
``Trainer`` starts its callbacks from. At ``on_train_begin`` (after ``Trainer`` has prepared the
model, optimizer and training dataloader) it:

- compiles the model's regions in place through the runtime (so compiler failures fall back to eager
  by policy, and ``.eval()``, label names and ``state_dict()`` keys reach the real model);
- tells the runtime the job's length (``max_steps``, for ``plan="auto"``) and its gradient
  accumulation (CUDA graphs only without it);
- times each optimizer step (``on_step_begin`` / ``on_step_end``) for the report; with
  ``backend="xla"`` it marks the XLA step at ``on_step_end`` (one graph per optimizer step, counted).

With the config's ``batch_size`` set, ``on_init_end`` (before ``train()`` builds the dataloader)
finds or sets the per-device batch and rescales the learning rate (:mod:`sagemaker_tc.tuning.trainer`).

A script that sets ``TrainingArguments(torch_compile=True)`` compiles itself (accelerate wraps the
whole model); the callback then leaves compilation alone and only measures.
"""

from __future__ import annotations

import logging
from typing import Any

from sagemaker_tc.compiler.plans import describe
from sagemaker_tc.compiler.session import CompilerSession

logger = logging.getLogger(__name__)


def prepare_training(
    session: CompilerSession, model, optimizer, args, state, torch_compile: bool, train_dataloader=None
) -> None:
    """Compile ``model`` in place by the session's config, with the job's length and gradient
    accumulation from the Trainer (what ``on_train_begin`` does; separate so it can be called with a
    Trainer's parts directly). Training batches are padded to buckets at the model's call, while a
    compiled plan runs (:mod:`sagemaker_tc.compiler.shape_policy`); with ``backend="xla"`` in
    ``train_dataloader``'s collate function instead, on the host (the dataloader moves each batch to
    the XLA device before the model's call)."""
    config = session.config
    if optimizer is not None:
        session.track_optimizer(optimizer)
    if not config.compiles:
        return
    if torch_compile:
        logger.info("TrainingArguments(torch_compile=True): the script compiles itself; sagemaker-tc only measures")
        return
    _training_without_kv_cache(model)
    session.runtime.set_job_length(getattr(state, "max_steps", None), "Trainer max_steps")
    session.runtime.forwards_per_step = max(1, int(getattr(args, "gradient_accumulation_steps", 1) or 1))
    plan = session.attach(model)
    if config.backend == "xla":
        padded = train_dataloader is not None and session.runtime.pad_batches_on_host(train_dataloader)
        logger.info(
            "Compiler for %s with xla on %s: one XLA graph per optimizer step, training batches padded to buckets "
            "%s; policy %s",
            type(model).__name__,
            session.runtime.device_name,
            "on the host, in the dataloader" if padded else "only by the script's collator (no DataLoader found)",
            config.policy,
        )
        return
    logger.info(
        "Compiler for %s with %s: %s; policy %s",
        type(model).__name__,
        config.backend,
        describe(config.plan, plan.regional, plan.block_class, plan.num_regions),
        config.policy,
    )


_USE_CACHE_SAVED = "_sagemaker_tc_use_cache"


def _training_without_kv_cache(model) -> None:
    """Turn off ``config.use_cache`` while training (restored at train end).

    Decoder models (GPT-2, T5, ...) build a KV cache in every training forward when ``use_cache``
    is on, though training never reads it; each compiled block then guards on the cache's state
    and recompiles once per layer until dynamo's recompile limit (measured: a 12-layer GPT-2 hit
    ``recompile_limit`` (8) and ran its last blocks uncompiled; with ``use_cache=False``, 1 graph).
    """
    config = getattr(model, "config", None)
    if getattr(config, "use_cache", None) is True:
        config.use_cache = False
        setattr(model, _USE_CACHE_SAVED, True)
        logger.info("config.use_cache is off while training (a KV cache makes each compiled layer recompile)")


def _restore_kv_cache(model) -> None:
    if model is not None and getattr(model, _USE_CACHE_SAVED, False):
        model.config.use_cache = True
        delattr(model, _USE_CACHE_SAVED)


def _unfused_optimizer_for_xla(args) -> None:
    """``backend="xla"``: transformers' default optimizer on torch >= 2.8 is ``adamw_torch_fused``,
    whose fused kernel torch refuses for parameters on an XLA device ("`fused=True` requires all the
    params to be floating point Tensors of supported devices"); use the same AdamW unfused. An
    optimizer the script chose is left alone."""
    optim = getattr(getattr(args, "optim", None), "value", getattr(args, "optim", None))
    if optim == "adamw_torch_fused":
        args.optim = "adamw_torch"
        logger.info("backend='xla': optim adamw_torch_fused -> adamw_torch (no fused kernels for XLA devices)")


def make_callback(session: CompilerSession) -> Any:
    """The ``TrainerCallback`` that compiles and measures for ``session``."""
    from transformers import TrainerCallback

    class CompilerReportCallback(TrainerCallback):
        """Compiles the model at train begin and times each optimizer step for the sagemaker-tc
        report (global batch = per-device batch x gradient accumulation x world size)."""

        def on_init_end(self, args, state, control, model=None, **kwargs):
            if session.config.compiles and session.config.backend == "xla":
                _unfused_optimizer_for_xla(args)
            if session.config.enabled and session.config.batch_size is not None and model is not None:
                from sagemaker_tc.tuning.trainer import tune_at_init_end

                tune_at_init_end(session, args, model)

        def on_train_begin(
            self, args, state, control, model=None, train_dataloader=None, optimizer=None, lr_scheduler=None, **kwargs
        ):
            session.integration = "transformers"
            if session.batch_tuning is not None:
                from sagemaker_tc.tuning.trainer import describe_at_train_begin

                describe_at_train_begin(session, args, state, train_dataloader, lr_scheduler, optimizer)
            if session.config.enabled and model is not None:
                prepare_training(session, model, optimizer, args, state, bool(args.torch_compile), train_dataloader)

        def on_step_begin(self, args, state, control, **kwargs):
            session.timer.begin_step()

        def on_train_end(self, args, state, control, model=None, **kwargs):
            _restore_kv_cache(model)

        def on_step_end(self, args, state, control, optimizer=None, **kwargs):
            if optimizer is not None:
                session.track_optimizer(optimizer)
            per_device = getattr(state, "train_batch_size", None) or args.per_device_train_batch_size
            session.runtime.finish_step()
            session.timer.end_step(per_device * args.gradient_accumulation_steps * args.world_size)

    return CompilerReportCallback()


def install(session: CompilerSession) -> bool:
    """Add the session's compile-and-measure callback to every ``Trainer`` this process creates
    (``transformers.trainer.DEFAULT_CALLBACKS``; taken out again when the session closes).

    Returns:
        False when transformers is not installed (nothing to do), else True.
    """
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return False
    import transformers.trainer as trainer_module

    callback = make_callback(session)
    trainer_module.DEFAULT_CALLBACKS.append(callback)

    def remove() -> None:
        if callback in trainer_module.DEFAULT_CALLBACKS:
            trainer_module.DEFAULT_CALLBACKS.remove(callback)

    session.add_cleanup(remove)
    return True
