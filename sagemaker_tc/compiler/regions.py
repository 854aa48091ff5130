"""Where to compile (regional compilation of each repeated block, or the whole model) and the one
mechanism every plan compiles with, in place.

Each compiled module keeps its object: a call goes through the module's compiled-call slot (the one
``Module.compile()`` fills), which runs the module's own call eagerly, hooks included, with the plan's
compiled :func:`plan_forward` standing in for ``forward`` (:func:`call_with_forward`). So the module,
its ``state_dict()`` keys (no ``_orig_mod.`` prefix) and every forward hook, a wrapper's added later
(FSDP2's) or a probe's on one chosen layer, behave as without the compiler, on every supported torch.
Dynamo traces only our own function and the forward it calls, never ``nn.Module._call_impl``: how
torch treats that frame differs between releases (2.13 skips it and compiles ``forward``; 2.7 to
2.12 wrap a copy of it in ``external_utils.wrap_inline``, one code object for every such copy, and
trace the hooks into the graph, guarding on empty hook dicts).
"""

from __future__ import annotations

import functools
import types
from collections import Counter
from collections.abc import Callable
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


INSTANCE_FORWARD = "_sagemaker_tc_instance_forward"
"""Where :func:`call_with_forward` keeps a module's own instance ``forward`` (one a wrapper such as
accelerate's mixed precision put on the module object) while the plan's forward stands in for it."""


def plan_forward(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """What every compile plan compiles: ``module``'s own forward, without its hooks.

    That is the forward a wrapper installed on the module object, if any (kept under
    :data:`INSTANCE_FORWARD` by :func:`call_with_forward`), else the class's ``forward``. Called
    uncompiled, it is also the eager rerun of a failed compiled call. The module is an argument, not
    a constant: one compiled function serves every block a plan compiles (dynamo guards on the
    module's class and treats its parameters as inputs), so the blocks of one class share a graph.
    """
    own = getattr(module, INSTANCE_FORWARD, None)
    if own is not None:
        return own(*args, **kwargs)
    return type(module).forward(module, *args, **kwargs)


def call_with_forward(module: torch.nn.Module, forward: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run ``module``'s own call (``nn.Module._call_impl``: every forward pre-hook and hook, global
    and the module's, FSDP2's among them, eagerly and once) with ``forward(module, *args, **kwargs)``
    standing in for ``module.forward`` for this call only.

    An instance ``forward`` the module had is kept under :data:`INSTANCE_FORWARD` for
    :func:`plan_forward` and put back afterwards; a later wrapper's is picked up at its next call.
    """
    namespace = vars(module)
    own = namespace.get("forward")
    if own is not None and namespace.get(INSTANCE_FORWARD) is not own:
        namespace[INSTANCE_FORWARD] = own
    elif own is None and INSTANCE_FORWARD in namespace:
        del namespace[INSTANCE_FORWARD]
    namespace["forward"] = functools.partial(forward, module)
    try:
        return _internals.uncompiled_call(module)(*args, **kwargs)
    finally:
        if own is not None:
            namespace["forward"] = own
        else:
            namespace.pop("forward", None)


def forward_slot(module: torch.nn.Module, function: Callable[..., Any]) -> Callable[..., Any]:
    """What a module's compiled-call slot holds to run the module with ``function`` (a
    :func:`compile_plan_call` result) as its forward and no fallback (the batch-size finder's tries)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return call_with_forward(module, function, args, kwargs)

    return call


def compile_plan_call(tag: str, recompile_limit: int, **kwargs: object) -> Any:
    """``torch.compile`` of a copy of :func:`plan_forward` with a code object of its own, named
    ``plan_forward__<tag>`` (called as ``fn(module, *args, **kwargs)``; install it with
    :func:`call_with_forward`, which runs the module's hooks eagerly around it).

    Dynamo keeps compiled code, and counts recompiles, per code object: each plan variant's copy has
    its own cache and its own budget of ``recompile_limit`` compiles, so one plan's graphs never make
    another's run eagerly, on every torch release. Where ``torch.compile`` takes
    ``isolate_recompiles`` (torch 2.13) the budget is that call's; before, dynamo's limit is one
    global setting, which each call of the variant sets to its budget for the call
    (:class:`sagemaker_tc._internals.RecompileLimitCall`).
    """
    import torch

    code = plan_forward.__code__.replace(co_name=f"plan_forward__{tag}")
    function = types.FunctionType(code, plan_forward.__globals__, code.co_name, plan_forward.__defaults__)
    if _internals.isolates_recompiles():
        return torch.compile(function, recompile_limit=recompile_limit, isolate_recompiles=True, **kwargs)
    return _internals.RecompileLimitCall(torch.compile(function, **kwargs), recompile_limit)


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
