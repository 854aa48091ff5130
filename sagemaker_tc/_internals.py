"""Every private API of torch, transformers and sagemaker-core that sagemaker-tc touches, in one place.

Each is wrapped in a small function whose docstring names the symbol, the versions it was checked
against, and what we do when it is missing. Nothing outside this module uses a ``torch._*`` module,
a ``_``-prefixed attribute of torch, transformers or sagemaker-core, or dynamo's log-message text;
``tests/test_internals.py`` calls every wrapper against the installed versions and fails naming the
symbol that moved.

"Checked against torch 2.7 to 2.13" means: the symbol exists with this meaning in the torch 2.7.1
and 2.13.0 sources (and the releases between, read where they differ). Imports are lazy (inside
each function): the SDK side imports this module without torch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)


def error_chain(error: BaseException, limit: int = 8) -> list[BaseException]:
    """``error`` and the errors it was raised from (``__cause__``, else ``__context__``), at most
    ``limit``, without repeats: dynamo wraps a backend's error in ``BackendCompilerFailed``, so the
    private errors this module recognises may sit below the one raised."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < limit and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


# -- torch: modules compiled in place ------------------------------------------------------------------
def compiled_call(module: Any) -> Callable[..., Any] | None:
    """The callable in ``module._compiled_call_impl`` (None when the module is not compiled).

    ``nn.Module._compiled_call_impl`` is the slot ``Module.compile()`` fills; ``Module.__call__``
    runs it instead of ``_call_impl`` when set (torch 2.2 to 2.13, ``torch/nn/modules/module.py``).
    """
    return getattr(module, "_compiled_call_impl", None)


def set_compiled_call(module: Any, function: Callable[..., Any] | None) -> None:
    """Install ``function`` as what ``module(...)`` runs (None: back to the module's own call)."""
    module._compiled_call_impl = function


def uncompiled_call(module: Any) -> Callable[..., Any]:
    """``module._call_impl``: the module's call with its hooks, never compiled (torch 2.0 to 2.13).

    This is what ``Module.compile()`` hands to ``torch.compile``, and what a compiled region runs
    when it falls back to eager.
    """
    return module._call_impl


def compiled_wrapper_target(model: Any) -> Any | None:
    """The module inside ``model`` when ``model`` is what ``torch.compile(module)`` returns
    (``torch._dynamo.eval_frame.OptimizedModule``, the module in its ``_orig_mod``; torch 2.0 to
    2.13), else None. Missing class: None (such a model is then taken as a plain module)."""
    try:
        from torch._dynamo.eval_frame import OptimizedModule
    except ImportError:
        logger.debug("torch._dynamo.eval_frame.OptimizedModule is missing: compiled wrappers are not recognised")
        return None
    return model._orig_mod if isinstance(model, OptimizedModule) else None


# -- torch: AOTAutograd ----------------------------------------------------------------------------------
def compile_backward_with_forward() -> Callable[[], None]:
    """From now on, compile each graph's backward together with its forward.

    ``torch._functorch.config.force_non_lazy_backward_lowering`` (torch 2.10 to 2.13): AOTAutograd
    otherwise compiles the backward at the first ``loss.backward()``, outside the compiled call, so
    a failing backward compile could not fall back to eager. Without the flag (torch 2.7 to 2.9)
    nothing changes and a backward compile failure surfaces in ``loss.backward()``.

    Returns:
        A function that puts the flag back as it was.
    """
    import torch._functorch.config as functorch_config

    if not hasattr(functorch_config, "force_non_lazy_backward_lowering"):
        return lambda: None
    previous = functorch_config.force_non_lazy_backward_lowering
    functorch_config.force_non_lazy_backward_lowering = True

    def restore() -> None:
        functorch_config.force_non_lazy_backward_lowering = previous

    return restore


# -- torch: dynamo's counters, compilation records and compile callbacks --------------------------------
COMPILATION_METRICS_LIMIT = 4096
"""Dynamo keeps its last 64 compilation records by default; a job keeps enough for its whole life."""


def dynamo_counters() -> Any:
    """``torch._dynamo.utils.counters``: dynamo's ``defaultdict`` of ``Counter`` by category
    (``"stats"``, ``"graph_break"``, ``"inductor"``, ``"aot_autograd"``; torch 2.0 to 2.13)."""
    from torch._dynamo.utils import counters

    return counters


def compilation_records() -> list[Any]:
    """Dynamo's compilation records, oldest first: ``torch._dynamo.utils.get_compilation_metrics()``,
    ``CompilationMetrics`` objects with ``compile_id`` (``"N/k"``: frame N, k-th compile),
    ``is_forward``, ``entire_frame_compile_time_s``, ``co_name``, ... (torch 2.2 to 2.13;
    ``recompile_reason`` only from 2.7: read it with ``getattr``)."""
    from torch._dynamo.utils import get_compilation_metrics

    return get_compilation_metrics()


def keep_compilation_records(limit: int = COMPILATION_METRICS_LIMIT) -> None:
    """Make dynamo keep ``limit`` compilation records (``set_compilation_metrics_limit``, torch 2.2 to
    2.13); raising it never drops a record."""
    from torch._dynamo.utils import set_compilation_metrics_limit

    if len(compilation_records()) <= limit:
        set_compilation_metrics_limit(limit)


@contextmanager
def dynamo_state_kept() -> Iterator[None]:
    """Run the block, then forget everything dynamo compiled in it and put its counters and
    compilation records back as they were (the batch-size finder's tries must not count as the
    job's compiles). Compile callbacks survive (``torch.compiler.reset()`` would clear them, so they
    are registered again).

    Uses ``torch._dynamo.utils.counters``, ``torch._dynamo.utils._compilation_metrics`` (the deque
    behind ``get_compilation_metrics``) and ``torch._dynamo.callback.callback_handler`` (torch 2.7
    to 2.13).
    """
    import torch
    import torch._dynamo.utils as dynamo_utils
    from torch._dynamo.callback import callback_handler

    counters = {key: dict(value) for key, value in dynamo_utils.counters.items()}
    records = list(dynamo_utils._compilation_metrics)
    starts, ends = list(callback_handler.start_callbacks), list(callback_handler.end_callbacks)
    try:
        yield
    finally:
        torch.compiler.reset()
        dynamo_utils.counters.clear()
        for key, value in counters.items():
            dynamo_utils.counters[key].update(value)
        dynamo_utils._compilation_metrics.clear()
        dynamo_utils._compilation_metrics.extend(records)
        for callback in starts:
            if callback not in callback_handler.start_callbacks:
                callback_handler.register_start_callback(callback)
        for callback in ends:
            if callback not in callback_handler.end_callbacks:
                callback_handler.register_end_callback(callback)


def add_compile_start_callback(callback: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``callback(args)`` whenever torch starts compiling: a dynamo frame, a lazily compiled
    backward, or a CUDA graph recording (``torch._dynamo.callback.callback_handler``, torch 2.5 to
    2.13; from 2.8 the callback gets ``CallbackArgs``, whose ``callback_trigger`` says which, before
    that no argument: ``callback`` must accept both).

    Returns:
        A function that removes the callback (safe to call twice).
    """
    from torch._dynamo.callback import callback_handler

    callback_handler.register_start_callback(callback)

    def remove() -> None:
        if callback in callback_handler.start_callbacks:
            callback_handler.remove_start_callback(callback)

    return remove


def is_frame_compile(args: Any) -> bool:
    """True when a compile start callback's ``args`` announce a dynamo frame compile; False for a
    backward AOTAutograd compiles lazily at the first ``loss.backward()``, a Triton autotuning run or
    a CUDA graph recording (``CallbackArgs.callback_trigger``, ``torch._dynamo.callback.CallbackTrigger``,
    torch 2.8 to 2.13). Before 2.8 the callback gets no argument (None here): a frame compile."""
    trigger = getattr(args, "callback_trigger", None)
    return trigger is None or getattr(trigger, "name", "DYNAMO") == "DYNAMO"


# -- torch: dynamo's recompile limit and its log line ---------------------------------------------------
def recompile_limit() -> int:
    """``torch._dynamo.config.recompile_limit`` (torch 2.7 to 2.13): compiles per code object before
    dynamo runs it uncompiled."""
    import torch._dynamo.config as dynamo_config

    return int(dynamo_config.recompile_limit)


def set_recompile_limit(limit: int) -> None:
    """Set dynamo's recompile limit (see :func:`recompile_limit`)."""
    import torch._dynamo.config as dynamo_config

    dynamo_config.recompile_limit = limit


RECOMPILE_LIMIT_LOGGER = "torch._dynamo.convert_frame"
"""The logger dynamo warns on when a function hits the recompile limit (torch 2.7 to 2.13)."""


def is_recompile_limit_message(message: str) -> bool:
    """True for dynamo's "torch._dynamo hit config.recompile_limit (8)" warning
    (``torch/_dynamo/convert_frame.py``; also ``accumulated_recompile_limit``; torch 2.7 to 2.13):
    past the limit dynamo runs the frame eagerly and says so only in that line."""
    return "hit config." in message and "limit" in message


def accumulated_recompile_limit() -> int:
    """``torch._dynamo.config.accumulated_recompile_limit`` (torch 2.7 to 2.13; default 256): a global cap on the
    compiles of one code object, over every budget."""
    import torch._dynamo.config as dynamo_config

    return int(dynamo_config.accumulated_recompile_limit)


def set_accumulated_recompile_limit(limit: int) -> None:
    """Set dynamo's accumulated recompile limit (see :func:`accumulated_recompile_limit`)."""
    import torch._dynamo.config as dynamo_config

    dynamo_config.accumulated_recompile_limit = limit


def isolates_recompiles() -> bool:
    """True when ``torch.compile`` takes ``recompile_limit=`` and ``isolate_recompiles=`` (public
    arguments in torch 2.13, ``torch/__init__.py``: each call gets its own recompile budget instead
    of sharing one per code object)."""
    import inspect

    import torch

    parameters = inspect.signature(torch.compile).parameters
    return "isolate_recompiles" in parameters and "recompile_limit" in parameters


class RecompileLimitCall:
    """``function`` called with dynamo's per-code-object recompile limit (:func:`recompile_limit`) set to
    ``limit`` for the call and put back after it: a compiled function's budget of its own on torch
    releases whose ``torch.compile`` cannot isolate one (2.7 to 2.12). Dynamo reads the limit when it
    decides whether a frame may compile again, inside the call; setting it per call is cheap
    (benchmarks/README.md has the figure).
    """

    def __init__(self, function: Callable[..., Any], limit: int) -> None:
        import torch._dynamo.config as dynamo_config

        self.function, self.limit = function, limit
        self._config, self._name = dynamo_config, "recompile_limit"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        config, name = self._config, self._name
        previous = getattr(config, name)
        setattr(config, name, self.limit)
        try:
            return self.function(*args, **kwargs)
        finally:
            setattr(config, name, previous)


# -- torch: cudagraph trees' error text ----------------------------------------------------------------------
_CUDAGRAPH_OVERWRITTEN = "output of CUDAGraphs that has been overwritten"
"""Cudagraph trees' error for a read of an output a later replay overwrote: "accessing tensor output
of CUDAGraphs that has been overwritten ..." (torch 2.1 to 2.13), and for a ``.grad`` allocated
during capture, "accessing gradient tensor output of CUDAGraphs ..." (torch 2.13;
``CUDAGraphTreeManager.format_dealloc_msg`` in ``torch/_inductor/cudagraph_trees.py``)."""


def is_cudagraph_overwritten(error: BaseException) -> bool:
    """True when ``error`` (or an error it was raised from) is cudagraph trees' "output overwritten"
    error: the compiler's fault (CUDA graphs freed memory a later step still read), never the model's."""
    return any(_CUDAGRAPH_OVERWRITTEN in str(e) for e in error_chain(error))


# -- torch: structured logs (debug mode) ---------------------------------------------------------------
GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
"""torch's ``graph_breaks`` artifact loggers (``torch._logging.getArtifactLogger(module, artifact)`` is
named ``"<module>.__<artifact>"``; torch 2.7 to 2.13)."""
RECOMPILE_LOGGERS = ("torch._dynamo.guards.__recompiles",)
"""torch's ``recompiles`` artifact logger (torch 2.7 to 2.13)."""


def turn_on_compile_logs() -> Callable[[], None]:
    """Turn torch's ``graph_breaks`` and ``recompiles`` log artifacts on, as ``TORCH_LOGS`` would
    (``torch._logging.set_logs``, torch 2.1 to 2.13).

    Returns:
        A function that turns every torch log setting back to its default (``set_logs()``).
    """
    import torch._logging

    torch._logging.set_logs(graph_breaks=True, recompiles=True)
    return torch._logging.set_logs


# -- torch: optimizers ---------------------------------------------------------------------------------
def fused_optimizer_devices() -> list[str]:
    """Device types with fused Adam/AdamW kernels:
    ``torch.optim.optimizer._get_fused_kernels_supported_devices()`` (``["mps", "cuda", "xpu",
    "hpu", "cpu", ...]``; torch 2.4 to 2.13). Missing: only ``cuda`` (fused since torch 2.0)."""
    try:
        from torch.optim.optimizer import _get_fused_kernels_supported_devices
    except ImportError:
        return ["cuda"]
    return list(_get_fused_kernels_supported_devices())


def is_lr_scheduler_step_wrapper(step: Any) -> bool:
    """True when ``step`` is the wrapper a torch LR scheduler puts on ``optimizer.step`` to learn that
    the optimizer stepped (attribute ``_wrapped_by_lr_sched``, ``torch/optim/lr_scheduler.py``,
    torch 2.0 to 2.13). It only records the call, so replacing it loses nothing the step needs."""
    return step is not None and hasattr(step, "_wrapped_by_lr_sched")


def keep_lr_scheduler_tracking(step: Any, optimizer: Any) -> Callable[[], None]:
    """Tag ``step`` (what replaces the scheduler's wrapper) as the scheduler's, so the scheduler does
    not warn that ``optimizer.step`` was overridden; returns what to call at each step in its stead
    (sets ``optimizer._opt_called``, which the scheduler reads at its first step; torch 2.0 to 2.13)."""
    step._wrapped_by_lr_sched = True

    def stepped() -> None:
        optimizer._opt_called = True

    return stepped


def optimizer_step_hook_count(optimizer: Any) -> int:
    """The step hooks that would run around ``optimizer.step()``: the optimizer's own
    (``_optimizer_step_pre_hooks`` / ``_optimizer_step_post_hooks``) and torch's global ones
    (``torch.optim.optimizer._global_optimizer_pre_hooks`` / ``_global_optimizer_post_hooks``), torch
    2.0 to 2.13. A missing dict counts 0."""
    from torch.optim import optimizer as module

    own = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")
    shared = ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")
    return sum(len(getattr(optimizer, name, None) or ()) for name in own) + sum(
        len(getattr(module, name, None) or ()) for name in shared
    )


def mark_lr_scheduler_stepped(optimizer: Any) -> None:
    """Tell a torch LR scheduler that ``optimizer`` stepped without calling its ``step``
    (``optimizer._opt_called = True``, read at the scheduler's first step; torch 2.0 to 2.13)."""
    optimizer._opt_called = True


def module_hook_count(model: Any) -> int:
    """The hooks registered on ``model``'s modules: the sizes of each module's ``_forward_hooks``,
    ``_forward_pre_hooks``, ``_backward_hooks`` and ``_backward_pre_hooks`` dicts (torch 2.0 to 2.13,
    ``torch/nn/modules/module.py``), summed. A missing dict counts 0."""
    names = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    return sum(len(getattr(module, name, None) or ()) for module in model.modules() for name in names)


def mark_dynamic_hint(tensor: Any, dim: int) -> None:
    """Ask dynamo to compile ``tensor``'s dimension ``dim`` as dynamic, without an error where the
    traced code needs it static: ``torch._dynamo.maybe_mark_dynamic`` (torch 2.2 to 2.13). Missing:
    nothing is marked (dynamo's automatic dynamic shapes recompile once instead)."""
    import torch

    mark = getattr(torch._dynamo, "maybe_mark_dynamic", None)
    if mark is not None:
        mark(tensor, dim)


def foreach_zero(tensors: list[Any]) -> None:
    """Zero ``tensors`` in place with one multi-tensor kernel: ``torch._foreach_zero_`` (torch 2.0 to
    2.13). Missing: zero them one by one."""
    import torch

    zero = getattr(torch, "_foreach_zero_", None)
    if zero is None:
        for tensor in tensors:
            tensor.zero_()
        return
    zero(tensors)


def functional_adam(*, decoupled: bool, **kwargs: Any) -> None:
    """torch's functional Adam (``torch.optim.adam.adam``) or AdamW (``torch.optim.adamw.adamw``),
    fused and capturable: the update ``Adam.step()`` / ``AdamW.step()`` runs with ``fused=True``,
    called on the optimizer's own state tensors with ``lr`` as a device tensor.

    Keyword arguments are the functions' own (``params``, ``grads``, ``exp_avgs``, ``exp_avg_sqs``,
    ``max_exp_avg_sqs``, ``state_steps``, ``amsgrad``, ``beta1``, ``beta2``, ``lr``,
    ``weight_decay``, ``eps``, ``maximize``), the same in torch 2.7 to 2.13 (``adam`` took
    ``decoupled_weight_decay`` from 2.7 on; AdamW goes through ``adamw`` on every version).

    Raises:
        RuntimeError: torch's own, e.g. a device without fused kernels.
    """
    if decoupled:
        from torch.optim.adamw import adamw as update
    else:
        from torch.optim.adam import adam as update
    update(foreach=False, capturable=True, differentiable=False, fused=True, has_complex=False, **kwargs)


def cuda_graph_capture(graph: Any, pool: Any, stream: Any) -> Any:
    """The context that records CUDA work into ``graph``: ``torch.cuda.graph(graph, pool=pool,
    stream=stream, capture_error_mode="thread_local")`` (public since torch 2.0; ``thread_local``
    lets the DataLoader's pin-memory thread allocate while the training thread records), under
    ``torch.compiler.set_stance("fail_on_recompile")`` (torch 2.6 to 2.13) so that a compiled
    function whose guards fail raises instead of compiling inside the recording. Without
    ``set_stance`` the recording runs without that check."""
    import contextlib

    import torch

    stack = contextlib.ExitStack()
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is not None:
        stack.enter_context(set_stance("fail_on_recompile"))
    stack.enter_context(torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"))
    return stack


# -- torch: FSDP2 (fully_shard) and gloo -----------------------------------------------------------
def fsdp2_reshards_after_forward(unit: Any) -> bool | None:
    """Whether an FSDP2 unit (a ``fully_shard``-ed module) frees its gathered parameters after forward:
    its param group's ``post_forward_mesh_info`` is set (``FSDPModule._get_fsdp_state()``, then
    ``_fsdp_param_groups`` (torch 2.10 to 2.13) or ``_fsdp_param_group`` (2.7 to 2.9)). None when the
    unit holds no parameters of its own or the fields moved (the report then says unknown)."""
    state = getattr(unit, "_get_fsdp_state", lambda: None)()
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is None:
        group = getattr(state, "_fsdp_param_group", None)
        groups = [group] if group is not None else []
    if not groups or not hasattr(groups[0], "post_forward_mesh_info"):
        return None
    return groups[0].post_forward_mesh_info is not None


def gloo_reduce_scatter_average() -> float | None:
    """What gloo's ``reduce_scatter`` with ``ReduceOp.AVG`` makes of ones from 2 ranks: 1.0 when it
    averages, 2.0 when it sums (pytorch#162338, where FSDP2 then sums gradients on gloo). Two gloo
    ranks in this process (threads over a ``HashStore``), so it is no collective of the job's (its
    cost: docs/distributed.md). Calls ``ProcessGroupGloo._reduce_scatter_base`` (torch 2.0 to 2.13), the call
    ``dist.reduce_scatter_tensor`` makes. None when it cannot run (gloo missing, AVG refused)."""
    import datetime
    import threading

    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        return None
    store, results = dist.HashStore(), {}

    def rank(index: int) -> None:
        try:
            group = dist.ProcessGroupGloo(store, index, 2, datetime.timedelta(seconds=30))
            options = dist.ReduceScatterOptions()
            options.reduceOp = dist.ReduceOp.AVG
            output = torch.empty(1)
            group._reduce_scatter_base(output, torch.ones(2), options).wait()
            results[index] = float(output[0])
        except Exception as error:  # noqa: BLE001 - any failure means "cannot tell"
            logger.debug("gloo reduce_scatter probe failed: %s", error)

    threads = [threading.Thread(target=rank, args=(index,), daemon=True) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results.get(0)
