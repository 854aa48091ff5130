"""Switch a torch optimizer between its configured implementation and the fused kernel, in place.

torch's Adam and AdamW read ``group["fused"]`` / ``group["foreach"]`` on every ``step()``, so the
implementation can change between steps without touching the optimizer's state (moments, step
counts). Fused kernels exist for CPU and CUDA tensors since torch 2.4
(:func:`sagemaker_tc._internals.fused_optimizer_devices`); on a 2-core CPU, fused AdamW ran
~14% faster per MiniLM fine-tuning step than foreach (``shared/research`` notes).
"""

from __future__ import annotations

from typing import Any

_SAVED = "_sagemaker_tc_saved_impl"


def unwrap(optimizer: Any) -> Any:
    """The torch optimizer inside wrappers such as accelerate's ``AcceleratedOptimizer`` (``.optimizer``)."""
    seen = 0
    while not is_torch_optimizer(optimizer) and hasattr(optimizer, "optimizer") and seen < 4:
        optimizer = optimizer.optimizer
        seen += 1
    return optimizer


def is_torch_optimizer(optimizer: Any) -> bool:
    """True for instances of ``torch.optim.Optimizer``."""
    import torch

    return isinstance(optimizer, torch.optim.Optimizer)


def implementation(optimizer: Any) -> str:
    """``"fused"``, ``"foreach"``, ``"for-loop"`` or ``"default"`` (torch picks at step time)."""
    group = optimizer.param_groups[0] if optimizer.param_groups else {}
    if group.get("fused"):
        return "fused"
    if group.get("foreach") is True:
        return "foreach"
    if group.get("foreach") is False:
        return "for-loop"
    return "default"


def can_fuse(optimizer: Any) -> bool:
    """True when ``optimizer`` is a torch Adam/AdamW whose parameters are all floating point on
    devices with fused kernels, not already fused, differentiable or capturable."""
    import torch

    from sagemaker_tc import _internals

    if type(optimizer) not in (torch.optim.Adam, torch.optim.AdamW):
        return False
    devices = set(_internals.fused_optimizer_devices())
    for group in optimizer.param_groups:
        if group.get("fused") or group.get("differentiable") or group.get("capturable"):
            return False
        for param in group["params"]:
            if not torch.is_floating_point(param) or param.device.type not in devices:
                return False
    return True


def switchable(optimizer: Any) -> bool:
    """True when :func:`set_fused` can switch ``optimizer``: it can fuse, or this module fused it."""
    return getattr(optimizer, _SAVED, None) is not None or can_fuse(optimizer)


def set_fused(optimizer: Any, fused: bool) -> None:
    """Use the fused kernel (``fused=True``) or go back to the implementation the optimizer was
    built with (``fused=False``). State tensors are kept; scalar ``step`` tensors move to their
    parameter's device, where the fused kernel reads them."""
    if fused:
        if not hasattr(optimizer, _SAVED):
            setattr(optimizer, _SAVED, [(g.get("fused"), g.get("foreach")) for g in optimizer.param_groups])
        for group in optimizer.param_groups:
            group["fused"], group["foreach"] = True, False
            for param in group["params"]:
                state = optimizer.state.get(param)
                if state and hasattr(state.get("step"), "to"):
                    state["step"] = state["step"].to(param.device)
        return
    saved = getattr(optimizer, _SAVED, None)
    if saved is None:
        return
    for group, (was_fused, was_foreach) in zip(optimizer.param_groups, saved, strict=False):
        group["fused"], group["foreach"] = was_fused, was_foreach
