"""What one captured training step computes: the Hugging Face ``Trainer``'s optimizer step
restructured so that it can be recorded once and replayed.

The ``Trainer`` runs, per optimizer step (gradient accumulation 1): ``model.zero_grad()``
(gradients set to None), the forward and loss, ``loss.backward()``, ``clip_grad_norm_`` (when
``max_grad_norm > 0``), ``optimizer.step()``, ``lr_scheduler.step()``. :class:`StepBody` computes
the same numbers with nothing a recording cannot hold:

- the gradients are allocated once, before any recording, and zeroed in place at the start of each
  step (``0 + g == g``: the backward's accumulation gives the same values as a fresh gradient);
- clipping is the caller's own clip (the ``Trainer``'s: accelerate's ``clip_grad_norm_``, which
  reads nothing back to the host), else torch's ``clip_grad_norm_``; the norm stays a tensor;
- the update is torch's functional fused Adam/AdamW (``capturable=True``) on the optimizer's own
  state tensors, the learning rate of each parameter group a 0-dim tensor on the device
  (:func:`learning_rate_dtype`) that :meth:`StepBody.set_learning_rates` fills from the group's
  Python float before each step. The optimizer's ``param_groups`` keep Python floats, so
  ``get_last_lr()`` never reads the device and ``state_dict()`` is what an uncaptured run saves;
- the loss and the gradient norm are copied into buffers allocated before recording.

The learning-rate scheduler stays on the host (Python floats). Only parameters that received a
gradient in the step the body was built after take part (the optimizer skips parameters whose
gradient is None: a frozen or unused parameter is not updated, as in the ``Trainer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sagemaker_tc import _internals
from sagemaker_tc.errors import StepBodyUnsupported

SUPPORTED_OPTIMIZERS = ("Adam", "AdamW")


def learning_rate_dtype(device: Any) -> Any:
    """The dtype of the learning-rate tensor the fused update reads on ``device``: float32 on CUDA
    (the kernel reads the tensor as float), float64 elsewhere (the CPU kernel reads a double: with
    float64 its update is bit for bit the one a Python-float learning rate gives)."""
    import torch

    return torch.float32 if torch.device(device).type == "cuda" else torch.float64


def unsupported_reason(optimizer: Any) -> str | None:
    """Why ``optimizer`` (a torch optimizer, not a wrapper) cannot run inside a captured step, or
    None when it can: torch's Adam or AdamW, with no ``differentiable`` group, floating-point
    parameters on one device type that has fused kernels."""
    import torch

    name = type(optimizer).__name__
    if name not in SUPPORTED_OPTIMIZERS or type(optimizer).__module__.split(".")[:2] != ["torch", "optim"]:
        return f"the optimizer is {type(optimizer).__module__}.{name}; a captured step runs torch's Adam or AdamW"
    devices = set(_internals.fused_optimizer_devices())
    for group in optimizer.param_groups:
        if group.get("differentiable"):
            return "a parameter group is differentiable=True"
        for param in group["params"]:
            if not torch.is_floating_point(param) or param.device.type not in devices:
                return f"a parameter ({param.dtype} on {param.device}) has no fused optimizer kernel"
    return None


class StepBody:
    """The captured step's computation for one model and optimizer (module docstring).

    Args:
        optimizer: torch's Adam or AdamW (not a wrapper).
        params: the parameters that take part, in the optimizer's order (those that received a
            gradient); each must have a gradient now (its storage is kept for every later step).
        max_grad_norm: clip the gradients' total 2-norm to this (the ``Trainer``'s
            ``max_grad_norm``); ``<= 0``: no clipping, no norm.
        loss_of: ``loss_of(inputs) -> loss``: the forward and loss (a 0-dim tensor) for one batch.
        clip: ``clip() -> norm``: clips the gradients (the caller's rule) and returns their total norm
            (a 0-dim tensor) without reading it, run at every step; None: torch's
            ``clip_grad_norm_`` to ``max_grad_norm`` when it is ``> 0``, else nothing.

    Raises:
        StepBodyUnsupported: the optimizer cannot run in a captured step (:func:`unsupported_reason`).
    """

    def __init__(
        self,
        optimizer: Any,
        params: list[Any],
        max_grad_norm: float,
        loss_of: Callable[[Any], Any],
        clip: Callable[[], Any] | None = None,
    ) -> None:
        import torch

        reason = unsupported_reason(optimizer)
        if reason is not None:
            raise StepBodyUnsupported(reason)
        self.optimizer = optimizer
        self.loss_of = loss_of
        self.clip = clip or (self._torch_clip if float(max_grad_norm or 0.0) > 0 else None)
        self.max_grad_norm = float(max_grad_norm or 0.0)
        taking_part = {id(p) for p in params}
        self.groups = [[p for p in g["params"] if id(p) in taking_part] for g in optimizer.param_groups]
        self.params = [p for group in self.groups for p in group]
        self.grads = [p.grad for p in self.params]
        if any(grad is None for grad in self.grads):
            raise StepBodyUnsupported("a parameter taking part has no gradient to keep")
        device = self.params[0].device if self.params else torch.device("cpu")
        self.learning_rates = [
            torch.tensor(float(g["lr"]), dtype=learning_rate_dtype(device), device=device)
            for g in optimizer.param_groups
        ]
        self.loss = torch.zeros((), dtype=torch.float32, device=device)
        self.grad_norm = torch.zeros((), dtype=torch.float32, device=device)
        self._materialize_state()

    def _materialize_state(self) -> None:
        """Each taking part parameter's optimizer state, created as the fused update creates it on
        its first step (zeros, step 0 as a float32 tensor on the parameter's device) where the
        optimizer has not stepped it yet; step counts held on the CPU move to the device."""
        import torch

        for group, params in zip(self.optimizer.param_groups, self.groups, strict=True):
            for param in params:
                state = self.optimizer.state[param]
                if len(state) == 0:
                    state["step"] = torch.zeros((), dtype=torch.float32, device=param.device)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    if group.get("amsgrad"):
                        state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                elif state["step"].device != param.device:
                    state["step"] = state["step"].to(param.device)

    def set_learning_rates(self) -> None:
        """Copy each group's learning rate (a Python float, as the scheduler left it) into its device
        tensor: one fill per group, queued on the stream, never a wait for the device."""
        for tensor, group in zip(self.learning_rates, self.optimizer.param_groups, strict=True):
            tensor.fill_(float(group["lr"]))

    def zero_grads(self) -> None:
        """Zero the kept gradients in place (their storage stays)."""
        if self.grads:
            _internals.foreach_zero(self.grads)

    def grads_kept(self) -> bool:
        """True while every taking part parameter still holds the gradient tensor allocated for it
        (code that set ``.grad`` to None or replaced it breaks a recording's addresses)."""
        return all(p.grad is g for p, g in zip(self.params, self.grads, strict=True))

    def run(self, inputs: Mapping[str, Any]) -> None:
        """One whole step on ``inputs``: zero, forward and loss, backward, clip, update, results into
        :attr:`loss` and :attr:`grad_norm`. Reads nothing back to the host."""
        self.zero_grads()
        loss = self.loss_of(inputs)
        loss.backward()
        if self.clip is not None:
            self.grad_norm.copy_(self.clip())
        for group, params, lr in zip(self.optimizer.param_groups, self.groups, self.learning_rates, strict=True):
            if params:
                self._update(group, params, lr)
        self.loss.copy_(loss.detach())

    def _torch_clip(self) -> Any:
        import torch

        return torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)

    def _update(self, group: Mapping[str, Any], params: list[Any], lr: Any) -> None:
        """The fused, capturable Adam/AdamW update of one parameter group, with ``lr`` a device tensor."""
        states = [self.optimizer.state[p] for p in params]
        beta1, beta2 = group["betas"]
        _internals.functional_adam(
            decoupled=type(self.optimizer).__name__ == "AdamW" or bool(group.get("decoupled_weight_decay")),
            params=params,
            grads=[p.grad for p in params],
            exp_avgs=[s["exp_avg"] for s in states],
            exp_avg_sqs=[s["exp_avg_sq"] for s in states],
            max_exp_avg_sqs=[s["max_exp_avg_sq"] for s in states] if group.get("amsgrad") else [],
            state_steps=[s["step"] for s in states],
            amsgrad=bool(group.get("amsgrad")),
            beta1=beta1,
            beta2=beta2,
            lr=lr,
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=bool(group.get("maximize")),
        )
