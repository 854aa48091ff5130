"""FSDP2 (``fully_shard``) as the compiler sees it: detection, the gloo averaging check, the order,
and the report's ``distributed`` section.

The order (torchtitan's; measured equal to unsharded training, ``tests/test_fsdp2.py``): activation
checkpointing (if asked), then the per-block compile in place (``compile_model``, or the ``Trainer``
callback), then ``fully_shard`` on each block, then on the root. A plan compiles a module in place
(its compiled-call slot, :mod:`.plans`): the module's own call runs eagerly with the hooks
``fully_shard`` adds, and only its forward is compiled (:mod:`.regions`), so FSDP2's all-gathers and
reduce-scatters fire around each compiled block as they do eagerly, on every supported torch (the
tests count the all-gathers per step, compiled vs eager). A
model sharded before ``compile_model`` still trains the same; the call warns
(:class:`~sagemaker_tc.errors.ShardingOrderWarning`) because the documented order is the one
measured. The ``Trainer`` shards the model (accelerate's ``fully_shard``) before the callback's
``on_train_begin`` compiles it: in place, so nothing is bypassed and no warning is given.

The planner: FSDP2's hooks are ``dynamo.disable``'d, so a plan that compiles across units
(``model``, ``step``) breaks its graph at every unit. Under FSDP2 ``plan="auto"`` tries only
:data:`FSDP2_AUTO_PLANS` (eager is always an option); ``model`` and ``step`` stay available through
an explicit ``plan=``.

gloo: FSDP2 reduces fp32 gradients with ``ReduceOp.AVG`` (``_get_gradient_divide_factors`` in
``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``, torch 2.7 to 2.13). Where gloo's
``reduce_scatter`` sums instead (pytorch#162338), the gradients come out multiplied by the world size
and training silently diverges from unsharded training. :func:`check_gloo_averaging` asks the
installed torch (:func:`sagemaker_tc._internals.gloo_reduce_scatter_average`, in-process, once) and
refuses FSDP2 on gloo there with :class:`~sagemaker_tc.errors.GlooAveragingError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler.plans import plan_modules
from sagemaker_tc.errors import GlooAveragingError, ShardingOrderWarning
from sagemaker_tc.warn import warn_user

logger = logging.getLogger("sagemaker_tc.compiler")

FSDP2_AUTO_PLANS: tuple[str, ...] = ("regional",)
"""The compile plans ``plan="auto"`` may try on an FSDP2 model (module docstring)."""

_gloo_average: list[float | None] = []  # the probe's answer, once per process


def fsdp2_units(model: Any) -> list[tuple[str, Any]]:
    """The modules of ``model`` that ``fully_shard`` sharded (``FSDPModule`` instances), with their
    qualified names (``""`` for ``model`` itself), in module order; empty when torch has no FSDP2."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return []
    return [(name, module) for name, module in model.named_modules() if isinstance(module, FSDPModule)]


def plan_fits_sharding(plan: str, models: Iterable[Any]) -> bool:
    """False for a plan outside :data:`FSDP2_AUTO_PLANS` when a model is FSDP2-sharded: a plan across
    units breaks at each unit's hooks."""
    return plan in FSDP2_AUTO_PLANS or not is_sharded(models)


def is_sharded(models: Iterable[Any]) -> bool:
    """True when any of ``models`` holds an FSDP2 unit."""
    return any(fsdp2_units(model) for model in models)


def activation_checkpointing(model: Any) -> bool:
    """True when ``model`` recomputes activations: a Hugging Face model with gradient checkpointing on
    (``is_activation_checkpointing``, transformers 5; ``is_gradient_checkpointing`` before), or a module
    wrapped by torch's ``checkpoint_wrapper``."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            if getattr(model, name) is True:
                return True
            break
    return any(type(module).__name__ == "CheckpointWrapper" for module in model.modules())


def check_gloo_averaging(model: Any) -> None:
    """Refuse FSDP2 on gloo where the installed torch's gloo sums instead of averaging (module
    docstring). Does nothing for a model without FSDP2 units, or when the default process group is
    not gloo (or not up).

    Raises:
        GlooAveragingError: the model is sharded, the process group is gloo, and gloo's
            ``reduce_scatter`` with ``ReduceOp.AVG`` summed in the probe.
    """
    if not fsdp2_units(model):
        return
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_backend() != "gloo":
        return
    if not _gloo_average:
        _gloo_average.append(_internals.gloo_reduce_scatter_average())
    average = _gloo_average[0]
    if average is None:
        logger.warning("FSDP2 on gloo: could not check whether gloo averages gradients (pytorch#162338)")
    elif abs(average - 1.0) > 1e-6:
        raise GlooAveragingError(
            f"FSDP2 (fully_shard) on gloo with torch {torch.__version__}: gloo's reduce_scatter with ReduceOp.AVG "
            f"gave {average:g} for the average of ones over 2 ranks, so FSDP2 would sum gradients instead of "
            "averaging them (pytorch#162338) and train differently from one process. Use the nccl backend on "
            "GPUs, DistributedDataParallel on CPUs, or a torch whose gloo averages."
        )


def on_attach(
    model: Any,
    plan: str | None,
    *,
    listen: Callable[[Callable[[Any, tuple, dict], None]], None],
    warn_order: bool,
) -> None:
    """A model joins a session compiled by ``plan`` (None: not compiled): if it is sharded already,
    check gloo now (and, with ``warn_order``, warn that ``fully_shard`` came before ``compile_model``);
    else check at its first training call, after the script's ``fully_shard``, heard through
    ``listen`` (the session's ``add_model_call_listener``).

    Raises:
        GlooAveragingError: see :func:`check_gloo_averaging`.
    """
    if fsdp2_units(model):
        if warn_order:
            warn_user(
                f"compile_model got {type(model).__name__} already sharded by fully_shard: it trains the same, "
                "but the documented order is compile_model(model) first, then fully_shard on each block, then "
                "on the root (docs/distributed.md)",
                ShardingOrderWarning,
            )
        check_gloo_averaging(model)
        _note_plan(plan)
        return
    checked: list[bool] = []

    def first_training_call(module: Any, args: tuple, kwargs: dict) -> None:
        if checked or not module.training:
            return
        checked.append(True)
        check_gloo_averaging(module)
        if fsdp2_units(module):
            _note_plan(plan)

    listen(first_training_call)


def note_trainer_fsdp(args: Any, model: Any) -> bool:
    """Warn when ``TrainingArguments`` asked for FSDP2 (``fsdp=...`` with ``fsdp_config`` version 2,
    transformers' default) but the model the ``Trainer`` trains holds no FSDP2 unit: accelerate (1.15)
    turns FSDP on only for GPUs and other accelerators, so with ``use_cpu=True`` (or one process) the
    ``Trainer`` trains unsharded, with DDP across processes. Returns True when it warned."""
    config = getattr(args, "fsdp_config", None) or {}
    if not getattr(args, "fsdp", None) or int(config.get("version", 2)) != 2 or fsdp2_units(model):
        return False
    logger.warning(
        "TrainingArguments(fsdp=...) asked for FSDP2, but the model is not sharded: accelerate shards only on "
        "GPUs and other accelerators, so this Trainer trains unsharded (DDP across processes; the report's "
        "distributed.strategy says which)"
    )
    return True


def _note_plan(plan: str | None) -> None:
    """Say once, in the log, that an explicit plan across FSDP2 units breaks its graph at each unit."""
    if plan in ("model", "step"):
        logger.warning(
            "plan=%r on an FSDP2 model: its graph breaks at every fully_shard unit (FSDP2's hooks are not "
            "compiled); plan='regional' compiles each block between them",
            plan,
        )


def report_section(models: list[Any], final_plan: str, world: int) -> dict[str, Any] | None:
    """The report's ``distributed`` section for the attached ``models`` (None when there are none),
    trained to the end under ``final_plan`` by ``world`` processes::

        {"strategy": "fsdp2" | "ddp" | None, "world_size": 2, "units_sharded": 3,
         "reshard_after_forward": True | False | "mixed" | None, "activation_checkpointing": False,
         "units": [{"module": "model.layers.0", "class": "LlamaDecoderLayer",
                    "reshard_after_forward": True, "plan": "regional"}, ...]}

    ``strategy`` is ``"fsdp2"`` when a model holds FSDP2 units; else ``"ddp"`` for more than one
    process (replicated data parallel: the model an integration sees is the bare one, whatever wraps
    it); else None. A unit's ``plan`` is the job's final plan when that plan compiles the unit (or a
    module that contains it), else ``"eager"`` (under ``regional`` the root's own code: embeddings,
    final norm, head, loss).
    """
    if not models:
        return None
    final = final_plan
    units = []
    for model in models:
        compiled = plan_modules(model, final) if final != "eager" else []
        for name, unit in fsdp2_units(model):
            inside = any(unit is region or _contains(region, unit) for region in compiled)
            units.append(
                {
                    "module": name or "<root>",
                    "class": _model_class(unit),
                    "reshard_after_forward": _internals.fsdp2_reshards_after_forward(unit),
                    "plan": final if inside else "eager",
                }
            )
    strategy = "fsdp2" if units else ("ddp" if world > 1 else None)
    reshard = {unit["reshard_after_forward"] for unit in units}
    return {
        "strategy": strategy,
        "world_size": world,
        "units_sharded": len(units),
        "reshard_after_forward": (reshard.pop() if len(reshard) == 1 else "mixed") if reshard else None,
        "activation_checkpointing": any(activation_checkpointing(model) for model in models),
        "units": units,
    }


def _model_class(unit: Any) -> str:
    """The unit's own class name (``fully_shard`` swaps in a subclass named ``FSDP<class>``)."""
    from torch.distributed.fsdp import FSDPModule

    return next(c for c in type(unit).__mro__ if not issubclass(c, FSDPModule)).__name__


def _contains(outer: Any, inner: Any) -> bool:
    return any(module is inner for module in outer.modules())
