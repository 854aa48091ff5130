"""Switch a torch optimizer between its configured implementation and the fused kernel, in place.

torch's Adam and AdamW read ``group["fused"]`` / ``group["foreach"]`` on every ``step()``, so the
implementation can change between steps without touching the optimizer's state (moments, step
counts). Fused kernels exist for CPU and CUDA tensors since torch 2.4
(:func:`sagemaker_tc._internals.fused_optimizer_devices`); fused AdamW is faster per step than
foreach (benchmarks/README.md has the figure).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

from sagemaker_tc import _internals

logger = logging.getLogger("sagemaker_tc.compiler")


def unwrap(optimizer: Any) -> Any:
    """The torch optimizer inside wrappers such as accelerate's ``AcceleratedOptimizer`` (``.optimizer``;
    it subclasses ``torch.optim.Optimizer`` itself, so the wrapper is recognised by what it wraps)."""
    seen = 0
    while is_torch_optimizer(getattr(optimizer, "optimizer", None)) and seen < 4:
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
FailureHandler = Callable[[str, BaseException], None]


class StepPlanOptimizer:
    """What the ``step`` plan changed on one torch optimizer, so :meth:`restore` can undo it exactly.

    :meth:`enter` picks, for torch's Adam, AdamW and SGD:

    - ``"fused"`` (the default): the fused kernel, one kernel per step for all parameters, where the
      parameters' device has one (CPU and CUDA since torch 2.4). It is eager: no graph, no CUDA graph.
    - ``"compiled"`` (only with ``compile_update=True``, i.e. ``TrainingCompilerConfig(
      compile_optimizer=True)``, and only where no wrapper patched the optimizer's ``step``): the
      update compiled with ``torch.compile`` as one graph, never CUDA-graphed (cudagraph trees
      would start a new generation at that call and free the gradients the backward just wrote); the
      learning rate (and Adam's betas) turned into 0-dim float64 tensors on the parameters' device
      that the scheduler updates in place, so a schedule never recompiles, and the groups set
      ``foreach=True, capturable=True``: dynamo traces the capturable update whatever the group
      says, and the single-tensor capturable Adam divides by the learning rate, which is 0 at the
      start of a warm-up (NaN; pytorch#126514).

    Either way the optimizer's ``step`` is guarded: when the switched update raises, the optimizer
    goes back to how it was built, the same step runs that way, and ``on_failure("step", error)``
    decides (step back to a safer plan, or raise by policy); if the as-built step fails too, the
    error is the optimizer's own and propagates. A wrapper that reassigns ``optimizer.step`` itself
    on every step (accelerate's mixed precision) bypasses the guard but keeps the group settings.
    Other optimizers are left as built (``kind`` ``"as built"``).

    Args:
        optimizer: a torch optimizer (not a wrapper: see :func:`unwrap`).
        on_failure: called with the plan name and the error when the switched update failed.
    """

    def __init__(self, optimizer: Any, on_failure: FailureHandler | None = None) -> None:
        self.optimizer = optimizer
        self.on_failure = on_failure
        self.kind = "as built"
        self.skipped_steps = 0
        self._saved_groups: list[dict[str, Any]] = []
        self._saved_state: list[tuple[dict[str, Any], Any]] = []
        self._had_step_attr = "step" in vars(optimizer)
        self._step_attr = vars(optimizer).get("step")
        self._guard: Any = None
        self._after_update: Callable[[], None] = lambda: None

    def enter(self, *, compile_update: bool = False) -> str:
        """Switch to the fused kernel or, when asked, the compiled update (class docstring); returns
        the kind."""
        optimizer = self.optimizer
        name = type(optimizer).__name__
        if name not in _STEP_PLAN_TYPES or type(optimizer).__module__.split(".")[:2] != ["torch", "optim"]:
            return self.kind
        by_scheduler = _internals.is_lr_scheduler_step_wrapper(self._step_attr)
        patched = self._had_step_attr and not by_scheduler  # a scheduler's wrapper only counts the call
        if compile_update and patched:
            logger.info("The optimizer's step is patched by a wrapper: the step plan keeps its update eager")
        compiled = compile_update and not patched
        if not compiled and not _fusable(optimizer):
            return self.kind
        keys = ("fused", "foreach", "capturable", *(_TENSOR_KEYS[name]))
        self._saved_groups = [{key: group.get(key) for key in keys if key in group} for group in optimizer.param_groups]
        self._saved_state = _step_state_snapshot(optimizer)
        previous = optimizer.step
        if compiled:
            update = _compiled_update(optimizer)
            self.kind = "compiled"
        else:
            for group in optimizer.param_groups:
                group["fused"], group["foreach"] = True, False
            update = previous
            self.kind = "fused"
        _steps_to_parameter_devices(optimizer)
        self._guard = self._guarded(update, previous)
        if by_scheduler:
            stepped = _internals.keep_lr_scheduler_tracking(self._guard, optimizer)
            if compiled:  # the compiled update does not go through the scheduler's wrapper
                self._after_update = stepped
        optimizer.step = self._guard
        return self.kind

    def _guarded(self, update: Callable[..., Any], previous: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            closure = args[0] if args else kwargs.get("closure")  # accelerate passes closure=None positionally
            if self.kind == "as built" or closure is not None:
                return previous(*args, **kwargs)  # restored (a stale reference), or a closure: as built
            try:
                result = update()
                self._after_update()
                return result
            except Exception as error:
                self.restore()
                try:
                    result = previous()
                except Exception:
                    if not _internals.is_cudagraph_overwritten(error):
                        raise  # the optimizer's own error
                    # The gradients a CUDA graph wrote were freed: this step cannot be computed.
                    self.optimizer.zero_grad(set_to_none=True)
                    self.skipped_steps += 1
                    logger.error("OPTIMIZER STEP SKIPPED: its gradients were overwritten by a CUDA graph replay")
                    result = None
                if self.on_failure is not None:
                    self.on_failure("step", error)
                return result

        return step

    def restore(self) -> None:
        """Put the optimizer back exactly as it was before :meth:`enter`: implementation flags,
        learning rate and betas (floats again: read once, at the plan switch), its ``step``, and the
        device and dtype of each ``state["step"]`` tensor (those created under the plan go where
        torch puts them for the as-built kind: on the CPU unless the group is fused or capturable,
        so a foreach update never reads a step count back from the GPU). Safe to call twice."""
        if self.kind == "as built":
            return
        for group, saved in zip(self.optimizer.param_groups, self._saved_groups, strict=False):
            for key in ("fused", "foreach", "capturable"):
                if key in saved:
                    group[key] = saved[key]
                else:
                    group.pop(key, None)
            for key in ("lr", "betas"):  # the scheduler's current values, floats again where the plan made tensors
                if key in saved and key in group:
                    group[key] = _as_float(saved[key], group[key], key)
        _restore_step_state(self.optimizer, self._saved_state)
        if vars(self.optimizer).get("step") is self._guard:  # a wrapper may have replaced it since
            if self._had_step_attr:
                self.optimizer.step = self._step_attr
            else:
                vars(self.optimizer).pop("step", None)
        self.kind = "as built"


def _compiled_update(optimizer: Any) -> Callable[[], Any]:
    """The optimizer's own update compiled as one graph, learning rate (and betas) as tensors (class
    docstring of :class:`StepPlanOptimizer`). Never CUDA-graphed."""
    import torch

    name = type(optimizer).__name__
    for group in optimizer.param_groups:
        device = group["params"][0].device
        group["fused"], group["foreach"], group["capturable"] = False, True, True
        group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float64, device=device)
        if "betas" in _TENSOR_KEYS[name] and not isinstance(group["betas"][0], torch.Tensor):
            group["betas"] = tuple(torch.tensor(float(b), dtype=torch.float64, device=device) for b in group["betas"])
    raw_step = type(optimizer).step
    return compile_update(lambda: raw_step(optimizer))


def compile_update(function: Callable[[], Any]) -> Callable[[], Any]:
    """``torch.compile(function)`` with torch's default mode (no CUDA graphs) and backend."""
    import torch

    return torch.compile(function)


def _as_float(saved: Any, current: Any, key: str) -> Any:
    """A learning rate or betas the plan made tensors, back as floats with the value the scheduler
    last wrote (one read per plan switch, never per step); else ``current`` untouched."""
    if key == "lr" and hasattr(current, "item") and not hasattr(saved, "item"):
        return float(current.item())
    if key == "betas" and hasattr(current[0], "item") and not hasattr(saved[0], "item"):
        return tuple(float(b.item()) for b in current)
    return current


def _fusable(optimizer: Any) -> bool:
    """True when every parameter is floating point on a device with fused kernels (Adam, AdamW, SGD)."""
    import torch

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


def _step_state_snapshot(optimizer: Any) -> list[tuple[dict[str, Any], Any]]:
    """Each parameter's state dict with the ``step`` tensor it holds now (before the plan moves it)."""
    snapshot = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state.get(param)
            if state and hasattr(state.get("step"), "to"):
                snapshot.append((state, state["step"]))
    return snapshot


def _restore_step_state(optimizer: Any, snapshot: list[tuple[dict[str, Any], Any]]) -> None:
    """``step`` tensors back on the device and dtype they had before the plan (values as counted
    since), and those created under the plan where the as-built update expects them."""
    import torch

    before = {id(state): step for state, step in snapshot}
    for group in optimizer.param_groups:
        on_device = bool(group.get("fused") or group.get("capturable"))
        for param in group["params"]:
            state = optimizer.state.get(param)
            step = state.get("step") if state else None
            if not isinstance(step, torch.Tensor):
                continue
            old = before.get(id(state))
            device = old.device if old is not None else (param.device if on_device else torch.device("cpu"))
            dtype = old.dtype if old is not None else step.dtype
            if step.device != device or step.dtype != dtype:
                state["step"] = step.to(device=device, dtype=dtype)


class StepOptimizers:
    """The torch optimizers a job steps, and what the ``step`` plan did to each
    (:class:`StepPlanOptimizer`): switched while the plan runs, given back as built when it stops.

    Args:
        on_failure: called with the plan name and the error when a switched update failed.
        compile_update: whether the job asked for the compiled update (``compile_optimizer=True``).
    """

    def __init__(self, on_failure: FailureHandler, compile_update: Callable[[], bool]) -> None:
        self.on_failure = on_failure
        self.compile_update = compile_update
        self.kind: str | None = None  # the step plan's update: "fused", "compiled", "as built" (None: never ran)
        self.tracked: weakref.WeakSet = weakref.WeakSet()
        self._switched: dict[int, StepPlanOptimizer] = {}
        self._counters: list[StepPlanOptimizer] = []  # every switch, for the steps skipped

    def track(self, optimizer: Any, *, step_runs: bool) -> None:
        """Remember an optimizer the job steps (unwrapped); switch it now when the step plan runs."""
        inner = unwrap(optimizer)
        if is_torch_optimizer(inner) and inner not in self.tracked:
            self.tracked.add(inner)
            if step_runs:
                self._enter(inner)

    def switch(self, before: str, after: str) -> None:
        """The plan that runs goes from ``before`` to ``after``: entering ``step`` switches every
        tracked optimizer, leaving it gives them back as built."""
        if after == "step" and before != "step":
            for optimizer in list(self.tracked):
                self._enter(optimizer)
        elif after != "step" and before == "step":
            for state in self._switched.values():
                state.restore()
            self._switched.clear()

    def steps_skipped(self) -> int:
        """Optimizer steps the step plan's guard could not compute (their gradients were overwritten
        by a CUDA graph replay; :class:`StepPlanOptimizer`)."""
        return sum(state.skipped_steps for state in self._counters)

    def _enter(self, optimizer: Any) -> None:
        state = StepPlanOptimizer(optimizer, on_failure=self.on_failure)
        self.kind = state.enter(compile_update=self.compile_update())
        self._switched[id(optimizer)] = state
        self._counters.append(state)
