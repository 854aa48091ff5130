"""The compile plans' mechanics on a model: what each plan compiles, installed in place and taken out.

- ``regional``: each repeated block (transformer layer) compiled on its own; the code around the
  blocks (embeddings, masks, head, loss) and the optimizer run eagerly. Cheapest to compile: one
  graph serves every block.
- ``model``: the whole model's forward, loss included (Hugging Face models compute it when given
  labels), as one graph; AOTAutograd compiles its backward as one graph too.
- ``step``: ``model``, plus the optimizer's fused update (:mod:`sagemaker_tc.compiler.optimizers`),
  and on CUDA, asked for explicitly, forward and backward captured in CUDA graphs
  (``mode="reduce-overhead"``: cudagraph trees) for static shapes in one process only.

Each plan's compiled functions are shared by every module it compiles and have a cache and
recompile budget of their own (:func:`~sagemaker_tc.compiler.plan_call.plan_functions`, where every
plan's compile call lives), so one plan's graphs never make another run eagerly.

Everything is compiled in place: a plan installs a :class:`GuardedCall` in each module's compiled-call
slot (the one ``Module.compile()`` fills), which runs the module's hooks eagerly around the compiled
forward (:mod:`.plan_call`), so the module objects, their ``state_dict()`` keys and every forward hook
(the user's, and those wrappers add later) stay as they are, and taking a plan out is emptying the
slots. Only the active plan's slots are filled; an inactive plan costs nothing per call. The compiled
functions are kept, so a plan switched back in does not compile again; each is ``torch.compile``'d
only when a call first runs it (:class:`~sagemaker_tc.compiler.plan_call.PlanFunctions`).

Wrapping order with DDP/FSDP: call ``compile_model`` on the bare model before wrapping it
(``DistributedDataParallel(compile_model(model))``); the Hugging Face integration compiles the model
the Trainer trains, inside accelerate's wrapper. ``FSDP2``'s ``fully_shard`` keeps working on a model
compiled in place (its hooks are the module's own; :mod:`.sharding` has the order and what is
measured); FSDP1 is not tested.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler import failures, planner
from sagemaker_tc.compiler.plan_call import call_with_forward, plan_forward
from sagemaker_tc.compiler.regions import find_repeated_blocks

if TYPE_CHECKING:
    import torch


class GuardedCall:
    """Installed in a module's compiled-call slot: the module's own call, hooks eagerly, with the
    plan's compiled forward inside (:func:`~sagemaker_tc.compiler.plan_call.call_with_forward`), and
    eager fallback.

    ``functions(variant)`` gives the plan's compiled function of that variant of
    :func:`~sagemaker_tc.compiler.plan_call.plan_forward` (:meth:`.PlanFunctions.compiled`), shared by
    every module the plan compiles and called as ``function(module, *args, **kwargs)``: ``"dynamic"``
    (varying shapes), ``"static"``
    (training batches padded to bucket lengths: one graph per bucket) and, where CUDA graphs are
    allowed, ``"captured"``. ``select(module)`` names the variant for this call.

    When the compiled forward raises, the same forward runs eagerly (the hooks do not run again), on
    the caller's own arguments when ``before_call`` rewrote them (padding never reaches it): if
    eager works the plan failed (``on_failure(plan, error)`` decides by policy: step back to a safer
    plan, or raise); if eager fails too, the error is the model's own and propagates (an
    out-of-memory error included: the model does not fit eagerly either). ``before_call``, when
    given, may rewrite the call's arguments first (outside the compiled graph: padding to a bucket,
    step timing). A failure in the compiled backward surfaces in ``loss.backward()``, outside this
    call (:mod:`sagemaker_tc.compiler.backward`).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        plan: str,
        functions: Callable[[str], Callable[..., Any]],
        select: Callable[[Any], str],
        on_failure: Callable[[str, BaseException], None],
        before_call: Callable[[Any, tuple, dict], tuple[tuple, dict]] | None = None,
        on_eval_failure: Callable[[str, BaseException], None] | None = None,
        running: list[int] | None = None,
    ) -> None:
        self.module_ref = weakref.ref(module)
        self.on_eval_failure = on_eval_failure or on_failure
        self.running = running if running is not None else [0]  # compiled calls under way: [count]
        self.plan = plan
        self.functions = functions
        self.select = select
        self.on_failure = on_failure
        self.before_call = before_call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module = self.module_ref()
        original: tuple[tuple, dict] | None = None
        if self.before_call is not None:
            new_args, new_kwargs = self.before_call(module, args, kwargs)
            if new_args is not args or new_kwargs is not kwargs:
                original = (args, kwargs)  # the caller's own (unpadded) arguments, for an eager rerun
            args, kwargs = new_args, new_kwargs

        def forward(module: Any, *args: Any, **kwargs: Any) -> Any:
            return self._forward(module, args, kwargs, original)

        return call_with_forward(module, forward, args, kwargs)

    def _forward(self, module: Any, args: tuple, kwargs: dict, original: tuple[tuple, dict] | None = None) -> Any:
        """The module's forward for one call (its hooks run around it, eagerly, once): compiled, and
        rerun eagerly when the compiled call raises, with the caller's ``original`` arguments when
        ``before_call`` rewrote them (padding never reaches an eager rerun), else the same ones. A
        failure in evaluation (the module in eval mode) goes to ``on_eval_failure``: it need not end
        the plan for training."""
        variant = self.select(module)
        if variant == planner.EAGER:  # calls of this kind run uncompiled (evaluation after it failed compiled)
            return plan_forward(module, *args, **kwargs)
        try:
            return self._compiled(module, variant, args, kwargs)
        except Exception as error:
            if failures.is_out_of_memory(error):
                failures.free_device_memory()  # room for the eager rerun
            # Eager decides whose error it is: if the same call fails eagerly, it is the model's.
            eager_args, eager_kwargs = original if original is not None else (args, kwargs)
            result = plan_forward(module, *eager_args, **eager_kwargs)
            (self.on_failure if module.training else self.on_eval_failure)(self.plan, error)
            return result

    def _compiled(self, module: Any, variant: str, args: tuple, kwargs: dict) -> Any:
        """The compiled call, counted in :attr:`running` while under way (a recompile-limit warning
        logged then is this plan's, not a function the script compiled itself)."""
        self.running[0] += 1
        try:  # the variant is torch.compile'd at its first request (PlanFunctions): that may fail too
            function = self.functions(variant)
            return function(module, *args, **kwargs)
        finally:
            self.running[0] -= 1


@dataclass
class PlanSlots:
    """What one plan installs on one model: each module and the call that goes in its slot."""

    name: str
    modules: list[Any] = field(default_factory=list)
    calls: list[GuardedCall] = field(default_factory=list)

    def install(self) -> None:
        """Fill the slots (the plan is active)."""
        for module, call in zip(self.modules, self.calls, strict=True):
            _internals.set_compiled_call(module, call)

    def uninstall(self) -> None:
        """Empty the slots (the modules run their own, uncompiled call)."""
        for module in self.modules:
            _internals.set_compiled_call(module, None)


@dataclass
class Attached:
    """A model a runtime attached: the slots each prepared plan fills on it, and the hooks on it."""

    model: Any
    slots: dict[str, PlanSlots]
    hook: Any = None  # the forward pre-hook while the model itself is not compiled
    after_hook: Any = None  # the forward hook that ends an evaluation call (every plan)


def plan_modules(model: torch.nn.Module, plan: str) -> list[torch.nn.Module]:
    """The modules ``plan`` compiles on ``model``: the repeated blocks (``regional``, and ``auto``,
    whose cheapest plan it is; the whole model when it has none), the model itself (``model``,
    ``step``), nothing (``eager``). The one answer for the runtime, the planner and the batch-size
    finder's compiled tries."""
    if plan == "eager":
        return []
    if plan in ("regional", "auto"):
        return find_repeated_blocks(model) or [model]
    return [model]


def leaf_modules(module: torch.nn.Module) -> int:
    """Modules without children under ``module`` (itself when it has none): what a compile's cost
    grows with (:mod:`sagemaker_tc.compiler.planner`)."""
    return sum(1 for m in module.modules() if next(m.children(), None) is None) or 1


def plan_leaf_modules(model: torch.nn.Module, plan: str) -> int:
    """Leaf modules one graph of ``plan`` covers on ``model`` (one block for ``regional``): what the
    planner's compile estimate grows with."""
    modules = plan_modules(model, plan)
    return leaf_modules(modules[0]) if modules else 0


def device_of(model: torch.nn.Module) -> tuple[str, str]:
    """The model's device type (``"cpu"``, ``"cuda"``) and name (the GPU's, e.g. ``"NVIDIA H200"``)."""
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cuda":
        return (parameter.device.type if parameter is not None else "cpu"), "cpu"
    import torch

    return "cuda", torch.cuda.get_device_name(parameter.device)


def model_device(model: torch.nn.Module) -> Any:
    """The ``torch.device`` of ``model``'s first parameter (None for a model without parameters)."""
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else None


def build_slots(
    model: torch.nn.Module,
    plan: str,
    functions: Callable[[str], Callable[..., Any]],
    select: Callable[[Any], str],
    on_failure: Callable[[str, BaseException], None],
    before_model_call: Callable[[Any, tuple, dict], tuple[tuple, dict]] | None = None,
    on_eval_failure: Callable[[str, BaseException], None] | None = None,
    running: list[int] | None = None,
) -> PlanSlots:
    """The slots ``plan`` fills on ``model``: a :class:`GuardedCall` of ``functions`` (the plan's
    compiled variants, compiled lazily at their first call) for each module the plan compiles.
    ``before_model_call`` runs before a call of the model itself (plans that compile the whole
    model), outside the graph; ``on_eval_failure`` and ``running``: :class:`GuardedCall`'s."""
    slots = PlanSlots(plan)
    for module in plan_modules(model, plan):
        before = before_model_call if module is model else None
        slots.modules.append(module)
        call = GuardedCall(module, plan, functions, select, on_failure, before, on_eval_failure, running)
        slots.calls.append(call)
    return slots


def describe(
    config_plan: str, regional: bool, block_class: str | None, num_regions: int, tries: Sequence[str] | None = None
) -> str:
    """One phrase for the log: what the configured plan compiles (``auto``: the plans it may try,
    ``tries``, in order: only those, so a plan ``auto`` leaves out is not listed)."""
    blocks = f"{num_regions} {block_class} blocks" if regional else "the whole model"
    if config_plan == "auto":
        tries = planner.COMPILED_PLANS if tries is None else tries
        if not tries:
            return "plan auto (eager: no compile plan to try on this model and device)"
        named = ", ".join(f"regional on {blocks}" if plan == "regional" else plan for plan in tries)
        return f"plan auto (eager steps first, then {named}, as far as they can pay off)"
    if config_plan == "regional":
        return f"plan regional ({blocks})"
    return f"plan {config_plan} (the whole model{' and the optimizer update' if config_plan == 'step' else ''})"
