"""Hugging Face ``Trainer`` integration: compile with no change to the script, and measure steps.

A ``TrainerCallback`` is added to ``transformers.trainer.DEFAULT_CALLBACKS``, the list every
``Trainer`` starts its callbacks from. At ``on_train_begin`` (after ``Trainer`` has prepared the
model, optimizer and training dataloader) it:

- compiles the model's regions in place through the runtime (so compiler failures fall back to eager
  by policy, and ``.eval()``, label names and ``state_dict()`` keys reach the real model);
- wraps the training dataloader's collate function in a :class:`~sagemaker_tc.compiler.shapes.
  BucketCollator` when the config has ``buckets`` (dynamic padding becomes bucketed padding);
- times each optimizer step (``on_step_begin`` / ``on_step_end``) for the report.

With the config's ``batch_size`` set, ``on_init_end`` (before ``train()`` builds the dataloader)
finds or sets the per-device batch and rescales the learning rate (:mod:`sagemaker_tc.tuning.trainer`).

A script that sets ``TrainingArguments(torch_compile=True)`` compiles itself (accelerate wraps the
whole model); the callback then leaves compilation alone and only measures.
"""

from __future__ import annotations

import logging
from typing import Any

from sagemaker_tc.compiler.session import CompilerSession
from sagemaker_tc.compiler.shapes import BucketCollator, buckets_for_model, pad_token_id_for

logger = logging.getLogger(__name__)


def prepare_training(session: CompilerSession, model, train_dataloader, optimizer, torch_compile: bool) -> None:
    """Compile ``model`` and bucket ``train_dataloader``'s batches by the session's config (what
    ``on_train_begin`` does; separate so it can be called with a Trainer's parts directly)."""
    config = session.config
    if optimizer is not None:
        session.track_optimizer(optimizer)
    if not config.compiles:
        return
    if torch_compile:
        logger.info("TrainingArguments(torch_compile=True): the script compiles itself; sagemaker-tc only measures")
        return
    _training_without_kv_cache(model)
    plan = session.attach(model)
    logger.info(
        "Compiled %s in place (%s, %d region(s)); policy %s",
        type(model).__name__,
        f"regional: {plan.block_class}" if plan.regional else "whole model",
        plan.num_regions,
        config.policy,
    )
    buckets = buckets_for_model(config.buckets, model)
    # accelerate's prepared dataloader may be an adapter around the torch DataLoader that iterates.
    loader = getattr(train_dataloader, "base_dataloader", train_dataloader)
    collate = getattr(loader, "collate_fn", None)
    if buckets and collate is not None and not isinstance(collate, BucketCollator):
        loader.collate_fn = BucketCollator(collate, buckets, pad_token_id=pad_token_id_for(model))
        logger.info("Shape bucketing: training batches padded to the next of %s tokens", buckets)
    elif buckets and collate is None:
        logger.warning("Shape bucketing is on but the training dataloader has no collate_fn to wrap: not bucketed")


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


def make_callback(session: CompilerSession) -> Any:
    """The ``TrainerCallback`` that compiles and measures for ``session``."""
    from transformers import TrainerCallback

    class CompilerReportCallback(TrainerCallback):
        """Compiles the model at train begin and times each optimizer step for the sagemaker-tc
        report (global batch = per-device batch x gradient accumulation x world size)."""

        def on_init_end(self, args, state, control, model=None, **kwargs):
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
                prepare_training(session, model, train_dataloader, optimizer, bool(args.torch_compile))

        def on_step_begin(self, args, state, control, **kwargs):
            session.timer.begin_step()

        def on_train_end(self, args, state, control, model=None, **kwargs):
            _restore_kv_cache(model)

        def on_step_end(self, args, state, control, optimizer=None, **kwargs):
            if optimizer is not None:
                session.track_optimizer(optimizer)
            per_device = getattr(state, "train_batch_size", None) or args.per_device_train_batch_size
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
