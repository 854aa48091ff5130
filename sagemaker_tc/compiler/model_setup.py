"""What setting a model up does besides attaching it: the pieces :meth:`CompilerSession.attach
<sagemaker_tc.compiler.session.CompilerSession.attach>` uses, the same for a Hugging Face ``Trainer``
(:mod:`sagemaker_tc.integrations.transformers`, at ``on_train_begin``) and a plain loop
(:func:`sagemaker_tc.compile_model`).

``use_cache``, decided once for both: when the config compiles and the model's ``config.use_cache``
is True, it is set to False (an INFO log line says so) and set back to True when the session closes
(the ``Trainer`` also sets it back at ``on_train_end``). Decoder models (GPT-2, T5, ...) build a KV
cache in every training forward when it is on, though training never reads it; each compiled block
then guards on the cache's state and recompiles once per layer until dynamo's recompile limit,
after which its last blocks run uncompiled; with ``use_cache=False`` it compiles one graph
(benchmarks/README.md, the tiny suite's recompiles). transformers does the same for gradient checkpointing.

The log lines keep the logger name ``sagemaker_tc.integrations`` (what a user filters on).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler.plans import describe
from sagemaker_tc.compiler.xla_runtime import XlaRuntime

if TYPE_CHECKING:
    from sagemaker_tc.compiler.regions import CompiledRegions
    from sagemaker_tc.compiler.runtime_protocol import SessionRuntime
    from sagemaker_tc.config import TrainingCompilerConfig

logger = logging.getLogger("sagemaker_tc.integrations")
_USE_CACHE_SAVED = "_sagemaker_tc_use_cache"


def kv_cache_off(model: Any) -> Callable[[], None] | None:
    """Switch ``model.config.use_cache`` off while the model trains compiled (module docstring).

    Returns:
        The undo (:func:`restore_kv_cache` of ``model``), or None when nothing was switched off.
    """
    config = getattr(model, "config", None)
    if getattr(config, "use_cache", None) is not True:
        return None
    config.use_cache = False
    setattr(model, _USE_CACHE_SAVED, True)
    logger.info(
        "%s: config.use_cache is off while training (a KV cache makes each compiled layer recompile); "
        "set back at train end",
        type(model).__name__,
    )
    return lambda: restore_kv_cache(model)


def restore_kv_cache(model: Any) -> None:
    """Set ``model.config.use_cache`` back to True if :func:`kv_cache_off` switched it off (a no-op
    otherwise, and the second time)."""
    if model is not None and getattr(model, _USE_CACHE_SAVED, False):
        model.config.use_cache = True
        delattr(model, _USE_CACHE_SAVED)


def xla_padding(runtime: SessionRuntime, moves_batches: bool, train_dataloader: Any) -> str:
    """Pad ``backend="xla"``'s training batches in ``train_dataloader`` when the integration's
    dataloader moves them to the device (``runtime`` an :class:`XlaRuntime`); returns where they are
    padded (the log's phrase)."""
    if not moves_batches:
        return "at the model's call"
    if (
        train_dataloader is not None
        and isinstance(runtime, XlaRuntime)
        and runtime.pad_batches_on_host(train_dataloader)
    ):
        return "on the host, in the dataloader"
    return "only by the script's collator (no DataLoader found)"


def log_setup(
    model: Any,
    config: TrainingCompilerConfig,
    plan: CompiledRegions | None,
    *,
    device_name: Callable[[], str],
    padding: Callable[[], str],
    auto_plans: Callable[[], list[str]],
) -> None:
    """Log the one line saying what is compiled for ``model`` (off; XLA with where batches are
    padded; or the plan, with the plans ``plan="auto"`` tries). The callables are asked only for
    the line that needs them."""
    name = type(model).__name__
    if plan is None or not config.compiles:
        logger.info("Compiler off for %s (enabled=%s, backend=%s)", name, config.enabled, config.backend)
    elif config.backend == "xla":
        logger.info(
            "Compiler for %s with xla on %s: one XLA graph per optimizer step, training batches padded to buckets "
            "%s; policy %s",
            name,
            device_name(),
            padding(),
            config.policy,
        )
    else:
        tries = auto_plans() if config.plan == "auto" else None
        shown = describe(config.plan, plan.regional, plan.block_class, plan.num_regions, tries)
        logger.info("Compiler for %s with %s: %s; policy %s", name, config.backend, shown, config.policy)
