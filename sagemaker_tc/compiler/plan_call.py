"""How every compile plan compiles and calls a module's forward: one home for the compile call.

- **What is compiled**: :func:`plan_forward`, a module's own forward without its hooks. One compiled
  copy serves every module a plan compiles (the module is an argument).
- **How it is called**: :func:`call_with_forward` runs the module's own call (``nn.Module._call_impl``,
  every forward pre-hook and hook eagerly, once) with the compiled forward standing in for ``forward``.
  So the module, its ``state_dict()`` keys and every forward hook (a wrapper's added later, FSDP2's,
  or a probe's on one chosen layer) behave as without the compiler, on every supported torch. Dynamo
  traces only our own function and the forward it calls, never ``_call_impl``, whose treatment
  differs between torch releases (2.13 skips that frame and compiles ``forward``; 2.7 to 2.12 wrap a
  copy of it in ``external_utils.wrap_inline``, one code object for every such copy, and trace the
  hooks into the graph, guarding on empty hook dicts).
- **The compile call**: :func:`compile_forward` (``torch.compile`` of a copy of :func:`plan_forward`
  with a code object of its own) and its keyword arguments (:func:`compile_kwargs`); a plan's variants
  (:func:`plan_functions`) and their recompile budget (:func:`plan_recompile_budget`). The runtime's
  plans and the batch-size finder's compiled tries both compile through :func:`compile_forward`.

Which modules a plan compiles is :func:`sagemaker_tc.compiler.plans.plan_modules` (the repeated
blocks are found by :mod:`.regions`); how a compiled call falls back is :class:`GuardedCall`, in the
module's compiled-call slot while its plan runs.
"""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler import failures, planner
from sagemaker_tc.compiler.shapes import MAX_LEARNED_BUCKETS, auto_buckets
from sagemaker_tc.config import TrainingCompilerConfig

if TYPE_CHECKING:
    import torch


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
    :func:`compile_forward` result) as its forward and no fallback (the batch-size finder's tries)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return call_with_forward(module, function, args, kwargs)

    return call


def compile_forward(tag: str, recompile_limit: int, **kwargs: object) -> Any:
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


class PlanFunctions:
    """A plan's compiled functions by variant (``dynamic``, ``static``, maybe ``captured``), each
    ``torch.compile``'d when :meth:`compiled` first asks for it: a plan that never runs costs no
    ``torch.compile`` call (the first one in a process imports Inductor's compile path), so a job that
    stays eager pays nothing for the plans held ready.

    Attributes:
        plan: the plan's name.
        budget: the recompile budget of each variant (:func:`plan_recompile_budget`).
        variants: the variants' names.
    """

    def __init__(self, plan: str, budget: int, kwargs_by_variant: dict[str, dict[str, Any]]) -> None:
        self.plan, self.budget = plan, budget
        self._kwargs = kwargs_by_variant
        self._compiled: dict[str, Any] = {}

    @property
    def variants(self) -> list[str]:
        return list(self._kwargs)

    @property
    def compiled_variants(self) -> list[str]:
        """The variants compiled so far, in the order they were first asked for."""
        return list(self._compiled)

    def compiled(self, variant: str) -> Callable[..., Any]:
        """The compiled function of ``variant`` (the ``static`` one for a variant the plan does not
        have), called as ``fn(module, *args, **kwargs)``; compiled at the first request.

        Raises:
            Exception: whatever ``torch.compile`` raised (an unknown backend, say): the caller's
                fallback handles it like a failing compiled call.
        """
        name = variant if variant in self._kwargs else "static"
        if name not in self._compiled:
            self._compiled[name] = compile_forward(f"{self.plan}_{name}", self.budget, **self._kwargs[name])
        return self._compiled[name]


def plan_functions(plan: str, regions: int, config: TrainingCompilerConfig) -> PlanFunctions:
    """The compiled functions of ``plan``, which compiles ``regions`` modules of the model (each
    function compiled at its first use: :class:`PlanFunctions`), with their recompile budget
    (:func:`plan_recompile_budget`): ``dynamic``
    and ``static`` without CUDA graphs, and, where the job asked for CUDA graphs on this plan
    (:func:`~sagemaker_tc.compiler.planner.wants_cuda_graphs`), ``captured``, which the runtime runs
    only on a CUDA model where torch supports them (never compiled elsewhere)."""
    kwargs = compile_kwargs(config)
    budget = plan_recompile_budget(regions, bucket_count(config.buckets))
    plain = {**kwargs, "mode": planner.without_cuda_graphs(kwargs["mode"])}
    variants = {"dynamic": plain, "static": {**plain, "dynamic": False}}
    if planner.wants_cuda_graphs(plan, config):
        variants["captured"] = {**kwargs, "dynamic": False, "mode": kwargs["mode"] or "reduce-overhead"}
    return PlanFunctions(plan, budget, variants)


def recompile_limit_for_buckets(count: int, current: int) -> int:
    """Dynamo's per-function ``recompile_limit`` (default 8) that lets ``count`` bucket graphs, in
    training and eval mode and for a second block class (e.g. encoder and decoder layers), fit:
    ``max(current, 8 + 4 * count)``. Bucketing bounds the shapes, so the limit's job (stopping
    endless recompiles) is done by the buckets."""
    return max(current, 8 + 4 * count)


def bucket_count(setting: list[int] | str | None) -> int:
    """How many bucket lengths a config's ``buckets`` setting can give: the list's length;
    ``"auto"``: :data:`MAX_LEARNED_BUCKETS` (the most it pads to), or :func:`auto_buckets` of
    BERT's 512 where that is more; None: 1 (no buckets)."""
    if isinstance(setting, list):
        return max(1, len(setting))
    if setting == "auto":
        return max(MAX_LEARNED_BUCKETS, len(auto_buckets(None)))
    return 1


def plan_recompile_budget(regions: int, buckets: int) -> int:
    """Compiles one variant of one plan may make before dynamo runs it eagerly (its own
    ``recompile_limit``): ``2 x regions x (buckets + 1)``, at least dynamo's default 8.

    Each region (a block, or the whole model) may need a graph of its own (a block's layer index
    guarded as a constant: GPT-2 and T5 layers with ``use_cache=True``), for each bucket length plus
    one dynamic-shape graph, in training and in eval mode. Bucketing bounds the shapes, so the limit's
    job (stopping endless recompiles) is done by the buckets.
    """
    return max(8, 2 * max(1, regions) * (max(1, buckets) + 1))


class GuardedCall:
    """Installed in a module's compiled-call slot: the module's own call, hooks eagerly, with the
    plan's compiled forward inside (:func:`call_with_forward`), and
    eager fallback.

    ``functions(variant)`` gives the plan's compiled function of that variant of
    :func:`plan_forward` (:meth:`PlanFunctions.compiled`), shared by
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
