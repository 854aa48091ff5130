"""Where to compile: regional compilation (each repeated block) or the whole model, in place.

In-place ``Module.compile()`` keeps the module object and its ``state_dict()`` keys unchanged (no
``_orig_mod.`` prefix), so a saved model loads in plain torch/transformers; it also keeps hooks that
wrappers such as FSDP add later working (accelerate's ``compile_regions_fsdp2`` docstring explains
why ``torch.compile(module)``'s wrapper would bypass them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.config import TrainingCompilerConfig

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class CompilePlan:
    """What :meth:`sagemaker_tc.compiler.runtime.CompilerRuntime.attach` compiled.

    Attributes:
        regional: True when repeated blocks were compiled one by one.
        block_class: the compiled block class name (regional), else None.
        num_regions: how many modules were compiled (blocks, or 1 for the whole model).
    """

    regional: bool
    block_class: str | None
    num_regions: int


def find_repeated_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks: instances of the classes named in ``model._no_split_modules``
    (how Hugging Face models name their transformer layer class) that occur more than once, else the
    children of the first ``ModuleList`` whose children all share one class (at least two of them).

    Returns:
        The blocks in module order; empty when the model has none.
    """
    import torch

    names = set(getattr(model, "_no_split_modules", None) or [])
    if names:
        named = [m for m in model.modules() if type(m).__name__ in names and m is not model]
        counts = Counter(type(m).__name__ for m in named)
        # _no_split_modules also names one-off parts (e.g. BertEmbeddings): keep the repeated classes.
        blocks = [m for m in named if counts[type(m).__name__] > 1]
        if blocks:
            return blocks
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 1:
            kinds = {type(child) for child in module}
            if len(kinds) == 1:
                return list(module)
    return []


def regions_for(model: torch.nn.Module, config: TrainingCompilerConfig) -> tuple[list[torch.nn.Module], bool]:
    """The modules a one-graph-per-region compile of ``model`` covers for ``config``: the repeated
    blocks for plan ``regional`` (and ``auto``, whose cheapest plan it is) when the model has them,
    else the whole model. Returns ``(regions, regional)`` (the batch-size finder's compiled tries)."""
    blocks = find_repeated_blocks(model) if config.plan in ("regional", "auto") else []
    return (blocks, True) if blocks else ([model], False)


def compile_region(region: torch.nn.Module, **kwargs: object) -> Any:
    """``torch.compile`` of the region's own call (hooks included), as ``Module.compile()`` does;
    the caller installs it with :func:`sagemaker_tc._internals.set_compiled_call`."""
    import torch

    return torch.compile(_internals.uncompiled_call(region), **kwargs)


def compile_plan_call(tag: str, recompile_limit: int, **kwargs: object) -> Any:
    """``torch.compile`` of ``nn.Module``'s own call, unbound (called as ``fn(module, *args,
    **kwargs)``), with a recompile budget of its own: one compiled function serves every module a
    plan compiles (a block graph is shared by every block whose guards pass), and its compiles count
    against ``recompile_limit`` alone, never against another plan's.

    Where ``torch.compile`` takes ``isolate_recompiles`` (torch 2.13) the budget is that call's;
    else the function is a copy of ``Module._call_impl`` with a code object of its own (named after
    ``tag``), and the caller must raise dynamo's global ``recompile_limit`` to ``recompile_limit``
    (:func:`sagemaker_tc._internals.own_budget_call`).
    """
    import torch

    if _internals.isolates_recompiles():
        return torch.compile(
            _internals.module_call_function(), recompile_limit=recompile_limit, isolate_recompiles=True, **kwargs
        )
    return torch.compile(_internals.module_call_function(copy_tag=tag), **kwargs)


def describe(regions: list[torch.nn.Module], regional: bool) -> CompilePlan:
    """The :class:`CompilePlan` for what :func:`regions_for` returned."""
    return CompilePlan(
        regional=regional, block_class=type(regions[0]).__name__ if regional else None, num_regions=len(regions)
    )


def compile_kwargs(config: TrainingCompilerConfig) -> dict[str, object]:
    """The ``torch.compile`` keyword arguments for ``config`` (backend, mode, dynamic, fullgraph).

    ``mode="default"`` is passed as None, torch's own default.
    """
    return {
        "backend": config.backend,
        "mode": None if config.mode == "default" else config.mode,
        "dynamic": config.dynamic,
        "fullgraph": config.fullgraph,
    }
