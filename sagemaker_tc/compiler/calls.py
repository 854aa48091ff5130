"""Each call of an attached model, outside any compiled graph: the per-call hooks of a runtime.

:class:`ModelCalls` holds the forward pre-hook and the forward hook a runtime puts on each attached
model: before a call it tells the runtime (device, evaluation), calls the listeners (the plain-loop
step watcher) and pads a training call's keyword tensors to a bucket (noted per call, so the compiled
variant it runs is known: :meth:`ModelCalls.variant`); after it, it ends an evaluation call and cuts
a padded output back to the caller's lengths. It is handed what it reads of the runtime as callables
(the plan that runs, the shape policy, the device, the plan's recompile budget) and imports no runtime.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.padding import trim_output
from sagemaker_tc.compiler.ranks import process_group_size
from sagemaker_tc.compiler.shapes import ShapePolicy


@dataclass
class RuntimeView:
    """What :class:`ModelCalls` reads of its runtime, each a callable read at the call.

    Attributes:
        active: the plan that runs (a step record's label).
        shapes: the runtime's shape policy (None before the first attach).
        device: the model's device type (``"cuda"``, ``"cpu"``, an XLA label).
        budget: a plan's recompile budget (None: the plan has none).
        invalidate: ``(plan, reason)``: the plan's trial is not to be trusted.
        training_call: ``(module)``: a training call begins (the runtime reads the device, ends an
            evaluation run).
        evaluation_call: ``(signature)``: an evaluation call begins (``signature``: its input shapes).
        evaluation_ended: an evaluation call ended (its forward returned or raised).
        evaluates_compiled: evaluation calls run the active plan's compiled variant.
    """

    active: Callable[[], str]
    shapes: Callable[[], ShapePolicy | None]
    device: Callable[[], str]
    budget: Callable[[str], int | None] = lambda plan: None
    invalidate: Callable[[str, str], None] = lambda plan, reason: None
    training_call: Callable[[Any], None] = lambda module: None
    evaluation_call: Callable[[tuple], None] = lambda signature: None
    evaluation_ended: Callable[[], None] = lambda: None
    evaluates_compiled: Callable[[], bool] = lambda: False


class ModelCalls:
    """The per-call hooks of one runtime (module docstring).

    Args:
        view: what the hooks read of the runtime.
        to_device: rewrites a call's inputs after padding (``backend="xla"``: onto the XLA device);
            None leaves them where they are.
        on_device: a call whose inputs are all on the device already runs as given (listeners only).
    """

    def __init__(
        self,
        view: RuntimeView,
        to_device: Callable[[tuple, dict], tuple[tuple, dict]] | None = None,
        on_device: Callable[[tuple, dict], bool] | None = None,
    ) -> None:
        self.view = view
        self.to_device = to_device
        self.on_device = on_device
        self.listeners: list[Any] = []
        self.forwards_per_step = 1
        self.accumulation_known = False  # set by set_accumulation: a Trainer's at attach, a plain loop's after step 1
        self.whole_step_recorded = False  # a Trainer's whole step is recorded (captured_trainer): no trees inside
        self._call = threading.local()  # per call: ``bucketed``, the model call's shapes (static_shapes)
        self._unbucketed_shapes: dict[str, set[tuple]] = {}  # plan -> distinct unbucketed training shapes

    def add_listener(self, listener: Any) -> Callable[[], None]:
        """Call ``listener(module, args, kwargs)`` before each call of an attached model (outside any
        compiled graph; the plain-loop step watcher). Returns the listener's removal."""
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def set_accumulation(self, forwards: int) -> None:
        """Gradient accumulation is known: ``forwards`` training forwards per optimizer step (at least 1)."""
        self.forwards_per_step = max(1, int(forwards))
        self.accumulation_known = True

    @property
    def pads_training_batches(self) -> bool:
        """True while a compiled plan runs (eager never pads)."""
        return self.view.active() != planner.EAGER

    def static_shapes(self) -> bool:
        """The current training call's shapes are bucketed: every sequence length padded to a bucket, by
        the policy or a collator, while a compiled plan runs (:meth:`before_call` notes it per call; a
        call it never saw, positional inputs, audio/vision inputs: not bucketed)."""
        return self.pads_training_batches and getattr(self._call, "bucketed", False)

    def variant(self, module: Any) -> str:
        """The compiled variant a call runs: ``captured`` (CUDA graphs) only while :meth:`captures` holds,
        ``static`` for other bucketed training calls, else ``dynamic``; an evaluation call (the module
        in eval mode) ``dynamic`` only once compiling evaluation pays (:mod:`.evaluation`), else eager."""
        if not module.training:
            return "dynamic" if self.view.evaluates_compiled() else planner.EAGER
        if not self.static_shapes():
            return "dynamic"
        if self.captures():
            return "captured"
        return "dynamic" if self.whole_step_recorded else "static"

    def captures(self) -> bool:
        """CUDA graphs may run now: a CUDA model, static shapes, one process (no DDP/FSDP), and gradient
        accumulation known to be off (cudagraph trees support neither collectives across ranks nor
        gradients kept across replays; a plain loop's accumulation is known after its first step, so
        that step never runs captured)."""
        return (
            self.view.device() == "cuda"
            and not self.whole_step_recorded
            and self.static_shapes()
            and process_group_size() == 1
            and self.accumulation_known
            and self.forwards_per_step == 1
        )

    def before_call(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Before a model call: its inputs as the call runs them (padded, and on the device)."""
        if self.on_device is not None and self.on_device(args, kwargs):
            for listener in self.listeners:
                listener(module, args, kwargs)
            return args, kwargs
        args, kwargs = self._prepare(module, args, kwargs)
        return self.to_device(args, kwargs) if self.to_device is not None else (args, kwargs)

    def _prepare(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Before a model call, outside any graph: the runtime's training or evaluation call, the
        listeners, and the training call's padding to a bucket (noted for the variant it runs)."""
        if module.training:
            self.view.training_call(module)
        else:
            self.view.evaluation_call(shape_signature(args, kwargs))
        for listener in self.listeners:
            listener(module, args, kwargs)
        bucketed, self._call.trim = False, None
        shapes = self.view.shapes()
        if module.training and shapes is not None and not _holds_tensor(args):
            original = kwargs
            kwargs, bucketed = shapes.bucket(kwargs)
            if kwargs is not original:  # padded here: the output is cut back to the caller's lengths
                self._call.trim = (shapes.dims(original), shapes.dims(kwargs))
        self._call.bucketed = bucketed
        if bucketed and self.whole_step_recorded and shapes is not None:
            _lengths_dynamic(kwargs, shapes.dims(kwargs))  # one compile serves every bucket's recording
        if module.training and not bucketed and self.pads_training_batches:
            self._note_unbucketed(args, kwargs)
        return args, kwargs

    def _note_unbucketed(self, args: tuple, kwargs: Mapping[str, Any]) -> None:
        """Count the distinct shapes of the training calls a compiled plan runs unbucketed (dynamic
        variant); past the plan's recompile budget its trial is not to be trusted (never chosen, and
        the report says why)."""
        plan = self.view.active()
        shapes = self._unbucketed_shapes.setdefault(plan, set())
        budget = self.view.budget(plan)
        if budget is None or len(shapes) > budget:
            return  # no budget, or already past it (the set stops growing)
        shapes.add(shape_signature(args, kwargs))
        if len(shapes) > budget:
            self.view.invalidate(
                plan, f"{len(shapes)} distinct unbucketed input shapes, above its recompile budget of {budget}"
            )

    def _pre_hook(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        new_args, new_kwargs = self.before_call(module, args, kwargs)
        return (new_args, new_kwargs) if new_kwargs is not kwargs or new_args is not args else None

    def _after_call(self, module: Any, args: tuple, output: Any) -> Any:
        """End an evaluation call; a training call padded at the call returns its output cut back to
        the caller's lengths (:func:`~.padding.trim_output`): a script that reads token-level outputs
        against its own unpadded labels sees the shapes eager gives."""
        if not module.training:
            self.view.evaluation_ended()
            return None
        trim, self._call.trim = getattr(self._call, "trim", None), None
        shapes = self.view.shapes()
        if trim is None or None in trim or shapes is None:
            return None
        return trim_output(output, *trim, left=bool(shapes.left))

    def set_pre_hook(self, attached: Any, *, enabled: bool) -> None:
        """Put :meth:`before_call` on ``attached.model`` as its forward pre-hook (while the model
        itself is not compiled), or take it off; the handle is kept in ``attached.hook``."""
        if enabled and attached.hook is None:
            import torch

            hook = torch.compiler.disable(self._pre_hook)
            attached.hook = attached.model.register_forward_pre_hook(hook, with_kwargs=True, prepend=True)
        elif not enabled and attached.hook is not None:
            attached.hook.remove()
            attached.hook = None

    def set_after_hook(self, attached: Any, *, enabled: bool) -> None:
        """The forward hook that ends an evaluation call of ``attached.model`` (it runs when the
        forward raises too), on every plan: the model's own call runs its hooks under each."""
        if enabled and attached.after_hook is None:
            import torch

            hook = torch.compiler.disable(self._after_call)
            attached.after_hook = attached.model.register_forward_hook(hook, always_call=True)
        elif not enabled and attached.after_hook is not None:
            attached.after_hook.remove()
            attached.after_hook = None


def _lengths_dynamic(kwargs: Mapping[str, Any], dims: Mapping[str, int] | None) -> None:
    """Mark the sequence dimension of a bucketed call's tensors dynamic for dynamo (a hint: a model
    that needs it static keeps it static), so the compiled forward is made once for every padded
    length instead of once per bucket; the batch dimension stays static."""
    import torch

    from sagemaker_tc import _internals

    lengths = set((dims or {}).values())
    for value in kwargs.values():
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[1] in lengths:
            _internals.mark_dynamic_hint(value, 1)


def _holds_tensor(values: tuple) -> bool:
    """A positional argument is a tensor (the shape policy pads keyword arguments only)."""
    import torch

    return any(isinstance(value, torch.Tensor) for value in values)


def shape_signature(args: tuple, kwargs: Mapping[str, Any]) -> tuple:
    """The shapes of a call's tensor arguments (no tensor is read)."""
    import torch

    named = [(str(i), v) for i, v in enumerate(args)] + sorted(kwargs.items(), key=lambda item: item[0])
    return tuple((name, tuple(value.shape)) for name, value in named if isinstance(value, torch.Tensor))
