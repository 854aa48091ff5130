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

Everything is compiled in place: a plan installs a :class:`~.plan_call.GuardedCall` in each module's compiled-call
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.plan_call import GuardedCall, PlanFunctions, plan_functions
from sagemaker_tc.compiler.regions import CompiledRegions, find_repeated_blocks

if TYPE_CHECKING:
    import torch

    from sagemaker_tc.config import TrainingCompilerConfig


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


@dataclass
class PlanHooks:
    """What a plan's guarded calls are handed (:class:`~.plan_call.GuardedCall`): ``select(module)`` names
    a call's variant, ``on_failure``/``on_eval_failure(plan, error)`` end a plan or its compiled
    evaluation, ``before_call(module, args, kwargs)`` runs before a call of a whole compiled model."""

    select: Callable[[Any], str]
    on_failure: Callable[[str, BaseException], None]
    before_call: Callable[[Any, tuple, dict], tuple[tuple, dict]]
    on_eval_failure: Callable[[str, BaseException], None]


class ModelPlans:
    """The attached models and the compile plans prepared on each (compiled lazily, installed when
    their plan runs): one set of compiled variants per plan, shared by every model, each with its own
    recompile budget (:func:`~.plan_call.plan_functions`).

    Args:
        hooks: what every guarded call is handed.
    """

    def __init__(self, hooks: PlanHooks) -> None:
        self.hooks = hooks
        self.attached: list[Attached] = []
        self.functions: dict[str, PlanFunctions] = {}
        self.recompile_budgets: dict[str, int] = {}
        self.running = [0]  # compiled calls under way (GuardedCall.running)

    def add(self, model: Any, plans: Sequence[str], config: TrainingCompilerConfig) -> Attached:
        """Attach ``model`` with ``plans`` prepared on it (nothing installed yet)."""
        attached = Attached(model, {plan: self._slots(model, plan, config) for plan in plans})
        self.attached.append(attached)
        return attached

    def prepare(self, plan: str, config: TrainingCompilerConfig | None) -> None:
        """Prepare ``plan``'s slots on every attached model (lazily compiled) if not yet prepared."""
        for attached in self.attached:
            if plan not in attached.slots and config is not None:
                attached.slots[plan] = self._slots(attached.model, plan, config)

    def install(self, plan: str) -> list[tuple[Attached, bool]]:
        """Fill ``plan``'s slots on every model and empty the others'. Returns each attached model
        with whether ``plan`` compiles the whole of it."""
        installed = []
        for attached in self.attached:
            for name, slots in attached.slots.items():
                if name != plan:
                    slots.uninstall()
            if plan in attached.slots:
                attached.slots[plan].install()
            installed.append((attached, plan in attached.slots and attached.slots[plan].modules == [attached.model]))
        return installed

    def prepared(self) -> list[str]:
        """The compile plans prepared on the attached models (compiled lazily, installed when active)."""
        return [plan for plan in planner.COMPILED_PLANS if any(plan in a.slots for a in self.attached)]

    def models(self) -> list[Any]:
        """The models attached, in order."""
        return [attached.model for attached in self.attached]

    def _slots(self, model: Any, plan: str, config: TrainingCompilerConfig) -> PlanSlots:
        if plan not in self.functions:
            functions = plan_functions(plan, len(plan_modules(model, plan)), config)
            self.functions[plan], self.recompile_budgets[plan] = functions, functions.budget
        hooks = self.hooks
        return build_slots(
            model,
            plan,
            self.functions[plan].compiled,
            hooks.select,
            hooks.on_failure,
            hooks.before_call,
            on_eval_failure=hooks.on_eval_failure,
            running=self.running,
        )


def configured_regions(model: torch.nn.Module, plan: str) -> CompiledRegions:
    """What ``plan`` compiles on ``model``, for the log and the report (``auto``: the ``regional``
    plan's regions, the cheapest)."""
    shown = plan if plan != "auto" else "regional"
    regions = plan_modules(model, shown)
    regional = shown == "regional" and regions[0] is not model
    block_class = type(regions[0]).__name__ if regional else None
    return CompiledRegions(regional=regional, block_class=block_class, num_regions=len(regions))


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
