"""The setup both integrations share: a model joins the session the same way from a Hugging Face
``Trainer`` (:mod:`.transformers`, at ``on_train_begin``) and from a plain loop
(:func:`sagemaker_tc.compile_model`).

:func:`prepare_model` tells the session the job's length and gradient accumulation, switches the
model's KV cache off while it trains compiled, attaches the model (its compile plans) and logs one
line saying what will be compiled. Each integration keeps only what is its own: the Trainer's
callbacks and ``torch_compile`` check, the plain loop's step watcher.

``use_cache``, decided once for both: when the config compiles and the model's ``config.use_cache``
is True, it is set to False (an INFO log line says so) and set back to True when the session closes
(the ``Trainer`` also sets it back at ``on_train_end``). Decoder models (GPT-2, T5, ...) build a KV
cache in every training forward when it is on, though training never reads it; each compiled block
then guards on the cache's state and recompiles once per layer until dynamo's recompile limit,
after which its last blocks run uncompiled; with ``use_cache=False`` it compiles one graph
(benchmarks/README.md, the tiny suite's recompiles). transformers does the same for gradient checkpointing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler import sharding
from sagemaker_tc.compiler.plans import describe

if TYPE_CHECKING:
    from sagemaker_tc.compiler.regions import CompiledRegions
    from sagemaker_tc.compiler.session import CompilerSession
    from sagemaker_tc.config import TrainingCompilerConfig

logger = logging.getLogger("sagemaker_tc.integrations")
_USE_CACHE_SAVED = "_sagemaker_tc_use_cache"


def prepare_model(
    session: CompilerSession,
    model: Any,
    config: TrainingCompilerConfig | None = None,
    *,
    job_length: tuple[int | None, str],
    accumulation: int | None = None,
    measure_calls: bool = False,
    moves_batches: bool = False,
    train_dataloader: Any = None,
    warn_shard_order: bool = False,
) -> CompiledRegions | None:
    """Set ``model`` up in ``session`` by ``config`` (default the session's), the same for every
    integration (module docstring), and log what is compiled.

    Args:
        job_length: ``(optimizer steps, where the number came from)``; steps None or <= 0: unknown.
        accumulation: forwards per optimizer step (gradient accumulation); None leaves it as it is.
        measure_calls: attach the model even when the config does not compile (the plain-loop step
            watcher hears the model's calls); otherwise an uncompiled model is left alone.
        moves_batches: the integration's dataloader moves each batch to the device before the
            model's call (a ``Trainer``'s): with ``backend="xla"`` training batches are then padded
            in ``train_dataloader``'s collate function, on the host; otherwise at the model's call.
        train_dataloader: that dataloader (None: not known).
        warn_shard_order: warn when ``model`` is FSDP2-sharded already (``compile_model`` documents
            compiling before ``fully_shard``; a ``Trainer`` shards first by design).

    Returns:
        What the configured plan compiles, or None when the model was not attached.

    Raises:
        Exception: whatever :meth:`CompilerSession.attach` raised (``use_cache`` is set back when a
            :meth:`CompilerSession.setup` block around the call is undone).
    """
    config = config or session.config
    session.set_job_length(*job_length)
    if accumulation is not None:
        session.set_accumulation(accumulation)
    if config.compiles:
        _train_without_kv_cache(session, model)
    plan = session.attach(model, config) if config.compiles or measure_calls else None
    if plan is not None:
        sharding.on_attach(  # FSDP2: the gloo check, the order warning
            model,
            config.plan if config.compiles else None,
            listen=session.add_model_call_listener,
            warn_order=warn_shard_order,
        )
    name = type(model).__name__
    if plan is None or not config.compiles:
        logger.info("Compiler off for %s (enabled=%s, backend=%s)", name, config.enabled, config.backend)
    elif config.backend == "xla":
        logger.info(
            "Compiler for %s with xla on %s: one XLA graph per optimizer step, training batches padded to buckets "
            "%s; policy %s",
            name,
            session.device_name,
            _xla_padding(session, moves_batches, train_dataloader),
            config.policy,
        )
    else:
        tries = session.auto_plans() if config.plan == "auto" else None
        shown = describe(config.plan, plan.regional, plan.block_class, plan.num_regions, tries)
        logger.info("Compiler for %s with %s: %s; policy %s", name, config.backend, shown, config.policy)
    return plan


def _xla_padding(session: CompilerSession, moves_batches: bool, train_dataloader: Any) -> str:
    """Pad ``backend="xla"``'s training batches in the dataloader when it moves them; returns
    where they are padded (the log's phrase)."""
    if not moves_batches:
        return "at the model's call"
    if train_dataloader is not None and session.pad_batches_on_host(train_dataloader):
        return "on the host, in the dataloader"
    return "only by the script's collator (no DataLoader found)"


def _train_without_kv_cache(session: CompilerSession, model: Any) -> None:
    """``config.use_cache`` off while the model trains compiled (module docstring); set back by
    :func:`restore_kv_cache` when the session closes."""
    config = getattr(model, "config", None)
    if getattr(config, "use_cache", None) is True:
        config.use_cache = False
        setattr(model, _USE_CACHE_SAVED, True)
        session.add_cleanup(lambda: restore_kv_cache(model))
        logger.info(
            "%s: config.use_cache is off while training (a KV cache makes each compiled layer recompile); "
            "set back at train end",
            type(model).__name__,
        )


def restore_kv_cache(model: Any) -> None:
    """Set ``model.config.use_cache`` back to True if :func:`prepare_model` switched it off (a no-op
    otherwise, and the second time)."""
    if model is not None and getattr(model, _USE_CACHE_SAVED, False):
        model.config.use_cache = True
        delattr(model, _USE_CACHE_SAVED)
