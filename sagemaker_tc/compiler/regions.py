"""Where a model's regions are: its repeated blocks (transformer layers), found once per model, and
the record of what a model's configured plan compiles (:class:`CompiledRegions`).

Which modules each plan compiles is :func:`sagemaker_tc.compiler.plans.plan_modules`; how they are
compiled and called is :mod:`sagemaker_tc.compiler.plan_call`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class CompiledRegions:
    """The regions a model's configured plan compiles (what
    :meth:`sagemaker_tc.compiler.runtime.CompilerRuntime.attach` returns).

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
