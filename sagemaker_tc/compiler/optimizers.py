"""Switch a torch optimizer between its configured implementation and the fused kernel, in place.

torch's Adam and AdamW read ``group["fused"]`` / ``group["foreach"]`` on every ``step()``, so the
implementation can change between steps without touching the optimizer's state (moments, step
counts). Fused kernels exist for CPU and CUDA tensors since torch 2.4
(:func:`sagemaker_tc._internals.fused_optimizer_devices`); on a 2-core CPU, fused AdamW ran
~14% faster per MiniLM fine-tuning step than foreach (``shared/research`` notes).
"""

from __future__ import annotations

from typing import Any


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


# -- the step plan's optimizer ------------------------------------------------------------------------
_STEP_PLAN_TYPES = ("Adam", "AdamW", "SGD")
_TENSOR_KEYS = {"Adam": ("lr", "betas"), "AdamW": ("lr", "betas"), "SGD": ("lr",)}


class StepPlanOptimizer:
    """What the ``step`` plan changed on one torch optimizer, so :meth:`restore` can undo it.

    :meth:`enter` picks, for torch's Adam, AdamW and SGD:

    - ``"fused"``: the fused kernel (one kernel per step for all parameters) where the parameters'
      device has one (CPU and CUDA since torch 2.4) and the step is not captured in a CUDA graph;
    - ``"compiled"``: otherwise (and always when ``capture``), the update compiled with
      ``torch.compile`` as one graph, the learning rate (and Adam's betas) turned into 0-dim float64
      tensors on the parameters' device that the scheduler updates in place, so a schedule never
      recompiles, and the real param groups set ``foreach=True, capturable=True``: dynamo traces the
      capturable update whatever the group says, and the single-tensor capturable Adam divides by
      the learning rate, which is 0 at the start of a warm-up (NaN; pytorch#126514).

    Other optimizers are left as built (``kind`` ``"as built"``).
    """

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.kind = "as built"
        self._saved_groups: list[dict[str, Any]] = []
        self._had_step_attr = "step" in vars(optimizer)
        self._step_attr = vars(optimizer).get("step")

    def enter(self, *, capture: bool, compile_kwargs: dict[str, Any] | None = None) -> str:
        """Switch to the fused kernel or the compiled update (class docstring); returns the kind."""
        optimizer = self.optimizer
        name = type(optimizer).__name__
        if name not in _STEP_PLAN_TYPES or type(optimizer).__module__.split(".")[:2] != ["torch", "optim"]:
            return self.kind
        keys = ("fused", "foreach", "capturable", *(_TENSOR_KEYS[name]))
        self._saved_groups = [{key: group.get(key) for key in keys if key in group} for group in optimizer.param_groups]
        if not capture and _fusable(optimizer):
            for group in optimizer.param_groups:
                group["fused"], group["foreach"] = True, False
            _steps_to_parameter_devices(optimizer)
            self.kind = "fused"
            return self.kind
        import torch

        for group in optimizer.param_groups:
            device = group["params"][0].device
            group["fused"], group["foreach"], group["capturable"] = False, True, True
            group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float64, device=device)
            if "betas" in _TENSOR_KEYS[name] and not isinstance(group["betas"][0], torch.Tensor):
                group["betas"] = tuple(
                    torch.tensor(float(b), dtype=torch.float64, device=device) for b in group["betas"]
                )
        _steps_to_parameter_devices(optimizer)
        raw_step = type(optimizer).step
        compiled = torch.compile(lambda: raw_step(optimizer), **(compile_kwargs or {}))

        def step(closure: Any = None) -> Any:
            if closure is not None:  # a closure re-runs the model: not something one graph can hold
                return raw_step(optimizer, closure)
            return compiled()

        optimizer.step = step
        self.kind = "compiled"
        return self.kind

    def restore(self) -> None:
        """Put the implementation, learning rate and betas back as they were built (floats again:
        read once, at the plan switch)."""
        for group, saved in zip(self.optimizer.param_groups, self._saved_groups, strict=False):
            for key, value in saved.items():
                current = group.get(key)
                if key == "lr" and hasattr(current, "item"):
                    group[key] = float(current.item())
                elif key == "betas" and current is not None and hasattr(current[0], "item"):
                    group[key] = tuple(float(b.item()) for b in current)
                else:
                    group[key] = value
        if self._had_step_attr:
            self.optimizer.step = self._step_attr
        else:
            vars(self.optimizer).pop("step", None)
        self.kind = "as built"


def _fusable(optimizer: Any) -> bool:
    """True when every parameter is floating point on a device with fused kernels (Adam, AdamW, SGD)."""
    import torch

    from sagemaker_tc import _internals

    devices = set(_internals.fused_optimizer_devices())
    for group in optimizer.param_groups:
        if group.get("differentiable"):
            return False
        for param in group["params"]:
            if not torch.is_floating_point(param) or param.device.type not in devices:
                return False
    return True


def _steps_to_parameter_devices(optimizer: Any) -> None:
    """Scalar ``step`` state tensors on their parameter's device (fused and capturable updates read
    them there)."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state.get(param)
            if state and hasattr(state.get("step"), "to"):
                state["step"] = state["step"].to(param.device)
