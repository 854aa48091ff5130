"""Every private API in sagemaker_tc/_internals.py, exercised against the installed torch, transformers
and sagemaker-core: a failure names the symbol that moved."""

import inspect
import logging
import tempfile
import types

import process_state
import pytest
import torch

from sagemaker_tc import _hf_internals, _internals
from sagemaker_tc.compiler import failures
from sagemaker_tc.errors import InternalAPIMissing
from sagemaker_tc.sdk import _internals as sdk_internals

TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])


def _compiled_module_slot():
    module = torch.nn.Linear(2, 2)
    assert _internals.compiled_call(module) is None
    module.compile()
    assert _internals.compiled_call(module) is not None
    _internals.set_compiled_call(module, None)
    assert _internals.compiled_call(module) is None
    assert _internals.uncompiled_call(module)(torch.ones(1, 2)).shape == (1, 2)
    assert _internals.compiled_wrapper_target(module) is None
    assert _internals.compiled_wrapper_target(torch.compile(module)) is module


def _force_non_lazy_backward_lowering():
    import torch._functorch.config as functorch_config

    if not hasattr(functorch_config, "force_non_lazy_backward_lowering"):  # torch 2.7 to 2.9: nothing to set
        assert TORCH < (2, 10)
        _internals.compile_backward_with_forward()()  # a no-op restore
        return
    before = functorch_config.force_non_lazy_backward_lowering
    restore = _internals.compile_backward_with_forward()
    assert functorch_config.force_non_lazy_backward_lowering is True
    restore()
    assert functorch_config.force_non_lazy_backward_lowering == before


def _counters_records_and_callbacks():
    seen = []

    def callback(*args):  # CallbackArgs from torch 2.8, no argument before
        seen.append(args[0] if args else None)

    remove = _internals.add_compile_start_callback(callback)
    try:
        _internals.keep_compilation_records()
        torch.compile(lambda x: x * 3 + 1, backend="eager")(torch.ones(3))
    finally:
        remove()
        remove()  # safe twice
    assert seen and _internals.is_frame_compile(seen[0]) and _internals.is_frame_compile(None)
    if TORCH >= (2, 8):
        assert hasattr(seen[0], "callback_trigger")
        from torch._dynamo.callback import CallbackTrigger  # the enum is_frame_compile reads by name

        lazy_backward = types.SimpleNamespace(callback_trigger=CallbackTrigger.LAZY_BACKWARD)
        assert not _internals.is_frame_compile(lazy_backward)
    else:
        assert seen[0] is None
    records = _internals.compilation_records()
    assert records and hasattr(records[-1], "compile_id") and hasattr(records[-1], "is_forward")
    assert "unique_graphs" in _internals.dynamo_counters()["stats"]
    assert callback not in process_state.compile_start_callbacks()


def _dynamo_state_kept():
    kept = []
    remove = _internals.add_compile_start_callback(lambda *args: kept.append(args))
    graphs = _internals.dynamo_counters()["stats"]["unique_graphs"]
    records = len(_internals.compilation_records())
    try:
        with _internals.dynamo_state_kept():
            torch.compile(lambda x: x - 2, backend="eager")(torch.ones(2))
        assert _internals.dynamo_counters()["stats"]["unique_graphs"] == graphs
        assert len(_internals.compilation_records()) == records
        inside = len(kept)
        assert inside >= 1
        torch.compile(lambda x: x * 5, backend="eager")(torch.ones(2))  # the callback survived the reset
        assert len(kept) > inside
    finally:
        remove()


def _recompile_limit():
    before = _internals.recompile_limit()
    _internals.set_recompile_limit(before + 3)
    try:
        assert torch._dynamo.config.recompile_limit == before + 3
    finally:
        _internals.set_recompile_limit(before)


def _recompile_limit_log_line():
    import torch._dynamo.convert_frame as convert_frame

    source = inspect.getsource(convert_frame)
    assert "torch._dynamo hit config.%s" in source, "dynamo's recompile-limit warning text changed"
    assert convert_frame.log.name == _internals.RECOMPILE_LIMIT_LOGGER
    assert _internals.is_recompile_limit_message("torch._dynamo hit config.recompile_limit (8)\n   function: 'f'")
    assert not _internals.is_recompile_limit_message("compiled fine")


def _artifact_loggers():
    from torch._logging import getArtifactLogger

    names = {getArtifactLogger(n, "graph_breaks").name for n in ("torch._dynamo.symbolic_convert",)}
    assert names <= set(_internals.GRAPH_BREAK_LOGGERS)
    assert getArtifactLogger("torch._dynamo.guards", "recompiles").name in _internals.RECOMPILE_LOGGERS
    undo = _internals.turn_on_compile_logs()
    try:
        assert logging.getLogger(_internals.RECOMPILE_LOGGERS[0]).isEnabledFor(logging.DEBUG)
    finally:
        undo()


def _optimizer_internals():
    assert {"cpu", "cuda"} <= set(_internals.fused_optimizer_devices())
    before = process_state.global_optimizer_step_hooks()
    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(lambda *args: None)
    assert process_state.global_optimizer_step_hooks() == before + 1
    handle.remove()


def _transformers_internals():
    from conftest import tiny_bert
    from transformers import Trainer, TrainerCallback, TrainingArguments

    model = tiny_bert()
    assert _hf_internals.attention_implementation(model) in ("sdpa", "eager")
    found = {}

    class Probe(TrainerCallback):
        def on_init_end(self, args, state, control, **kwargs):
            found["trainer"] = _hf_internals.calling_trainer()

    with tempfile.TemporaryDirectory(prefix="internals-probe-") as output_dir:
        args = TrainingArguments(output_dir=output_dir, report_to=[], use_cpu=True)
        trainer = Trainer(model=model, args=args, callbacks=[Probe()])
        assert found["trainer"] is trainer
        assert _hf_internals.set_trainer_batch_size(trainer, 24) and trainer._train_batch_size == 24


def _sagemaker_core_pipeline_hand_off():
    from sagemaker.core.workflow.pipeline_context import PipelineSession

    assert callable(getattr(PipelineSession, "_intercept_create_request", None))
    with pytest.raises(InternalAPIMissing, match="_intercept_create_request"):
        sdk_internals.hand_request_to_pipeline(object(), {})


def _sagemaker_core_docker_compose_lookup():
    try:
        command = sdk_internals.docker_compose_command()
    except ImportError:  # no docker compose on this machine: sagemaker-core's own lookup said so
        return
    assert command and all(isinstance(part, str) for part in command)


def _sagemaker_train_metric_definitions():
    from sagemaker.core.shapes import MetricDefinition
    from sagemaker.core.training.configs import SourceCode
    from sagemaker.train.model_trainer import Mode, ModelTrainer

    trainer = ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER, training_image="img", source_code=SourceCode(command="true")
    )
    assert sdk_internals.model_trainer_metric_definitions(trainer) is None
    definitions = [MetricDefinition(name="loss", regex="loss=([0-9.]+)")]
    trainer.with_metric_definitions(definitions)
    assert sdk_internals.model_trainer_metric_definitions(trainer) == definitions
    with pytest.raises(InternalAPIMissing, match="_metric_definitions"):
        sdk_internals.model_trainer_metric_definitions(object())


def _innermost_dataloader():
    """accelerate's shard iterates its base loader, whose collate function is the one that counts."""
    from accelerate.data_loader import DataLoaderShard
    from torch.utils.data import DataLoader

    shard = DataLoaderShard(list(range(4)), batch_size=2)
    inner = _hf_internals.innermost_dataloader(shard)
    assert inner is not shard and type(inner) is DataLoader
    inner.collate_fn = lambda samples: ("seen", samples)
    assert [batch[0] for batch in shard] == ["seen", "seen"]
    plain = DataLoader(list(range(4)))
    assert _hf_internals.innermost_dataloader(plain) is plain  # torch_xla's side: tests_xla/test_xla.py


def _recompile_budget_internals():
    limit = _internals.accumulated_recompile_limit()
    _internals.set_accumulated_recompile_limit(limit + 1)
    assert _internals.accumulated_recompile_limit() == limit + 1
    _internals.set_accumulated_recompile_limit(limit)
    isolates = _internals.isolates_recompiles()  # torch.compile's own arguments: there in 2.13
    assert isolates is True if torch.__version__.startswith("2.13.") else isinstance(isolates, bool)
    seen = []
    call = _internals.RecompileLimitCall(lambda: seen.append(_internals.recompile_limit()) or "ran", 3)
    before = _internals.recompile_limit()
    assert call() == "ran" and seen == [3] and _internals.recompile_limit() == before


def _error_and_scheduler_internals():
    overwritten = RuntimeError(
        "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. Stack trace: ..."
    )
    assert _internals.is_cudagraph_overwritten(overwritten) and not _internals.is_cudagraph_overwritten(ValueError())
    from torch._inductor.cudagraph_trees import CUDAGraphTreeManager  # the message's source (CPU builds have it)

    takes_grad = "is_grad_output" in inspect.signature(CUDAGraphTreeManager.format_dealloc_msg).parameters
    for grad_output in (False, True) if takes_grad else (None,):  # the gradient message came later than 2.8
        kwargs = {} if grad_output is None else {"is_grad_output": grad_output}
        message = CUDAGraphTreeManager.format_dealloc_msg("trace", **kwargs)
        assert _internals.is_cudagraph_overwritten(RuntimeError(message))
    try:
        raise RuntimeError("backend failed") from torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
    except RuntimeError as error:
        assert failures.is_out_of_memory(error)  # through the cause, as dynamo wraps it
        chain = _internals.error_chain(error)
        assert [type(e) for e in chain] == [RuntimeError, torch.OutOfMemoryError] and chain[0] is error
        wrapped = RuntimeError("backend failed")
        wrapped.__cause__ = RuntimeError(str(overwritten))
        assert _internals.is_cudagraph_overwritten(wrapped)  # found below the error dynamo raised
    assert not failures.is_out_of_memory(RuntimeError("shapes cannot be multiplied"))
    failures.free_device_memory()
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    torch.optim.lr_scheduler.StepLR(optimizer, 1)  # wraps optimizer.step to learn it was called
    assert _internals.is_lr_scheduler_step_wrapper(vars(optimizer)["step"])
    assert not _internals.is_lr_scheduler_step_wrapper(torch.optim.SGD.step)

    def replacement():
        return None

    stepped = _internals.keep_lr_scheduler_tracking(replacement, optimizer)
    assert _internals.is_lr_scheduler_step_wrapper(replacement)
    stepped()
    assert optimizer._opt_called is True


def _fsdp2_and_gloo_internals():
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    # 2.13's gloo averages (pytorch#162338 fixed); 2.8's sums, and sagemaker-tc refuses FSDP2 on gloo there
    average = _internals.gloo_reduce_scatter_average()
    assert average == 1.0 if TORCH >= (2, 13) else average in (1.0, 2.0)
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
        try:
            kept, freed = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
            fully_shard(kept, reshard_after_forward=False)
            fully_shard(freed, reshard_after_forward=True)
            assert _internals.fsdp2_reshards_after_forward(kept) is False
            assert _internals.fsdp2_reshards_after_forward(freed) is True
        finally:
            dist.destroy_process_group()


def _captured_step_internals():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    before = _internals.module_hook_count(model)
    handle = model[0].register_forward_hook(lambda *args: None)
    assert _internals.module_hook_count(model) == before + 1
    handle.remove()
    marked = torch.ones(2, 3)
    _internals.mark_dynamic_hint(marked, 1)
    assert 1 in getattr(marked, "_dynamo_weak_dynamic_indices", set())
    tensors = [torch.ones(2), torch.ones(3)]
    _internals.foreach_zero(tensors)
    assert all(not t.any() for t in tensors)
    # functional fused AdamW with a float64 LR tensor == AdamW(fused=True).step() with a float LR
    ours, theirs = torch.nn.Parameter(torch.tensor([1.0, -2.0])), torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    grad = torch.tensor([0.3, -0.7])
    theirs.grad = grad.clone()
    reference = torch.optim.AdamW([theirs], lr=0.01, fused=True)
    reference.step()
    state = {k: torch.zeros_like(ours) for k in ("exp_avg", "exp_avg_sq")}
    _internals.functional_adam(
        decoupled=True,
        params=[ours],
        grads=[grad],
        exp_avgs=[state["exp_avg"]],
        exp_avg_sqs=[state["exp_avg_sq"]],
        max_exp_avg_sqs=[],
        state_steps=[torch.zeros((), dtype=torch.float32)],
        amsgrad=False,
        beta1=0.9,
        beta2=0.999,
        lr=torch.tensor(0.01, dtype=torch.float64),
        weight_decay=0.01,
        eps=1e-8,
        maximize=False,
    )
    assert torch.equal(ours, theirs)
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    hooks = _internals.optimizer_step_hook_count(optimizer)
    handle = optimizer.register_step_post_hook(lambda *args: None)
    assert _internals.optimizer_step_hook_count(optimizer) == hooks + 1
    handle.remove()
    _internals.mark_lr_scheduler_stepped(optimizer)
    assert optimizer._opt_called is True
    if torch.cuda.is_available():  # the recording context: CUDA only (the GPU check runs it)
        graph, static = torch.cuda.CUDAGraph(), torch.ones(2, device="cuda")
        with _internals.cuda_graph_capture(graph, torch.cuda.graph_pool_handle(), torch.cuda.Stream()):
            static.mul_(2)
        graph.replay()
        assert static.tolist() == [2.0, 2.0]


def _trainer_step_internals():
    from transformers import Trainer, TrainingArguments

    with tempfile.TemporaryDirectory() as folder:
        args = TrainingArguments(output_dir=folder, report_to=[], use_cpu=True, per_device_train_batch_size=4)
        trainer = Trainer(model=torch.nn.Linear(2, 2), args=args)
    assert _hf_internals.trainer_rows(trainer) == 4
    assert _hf_internals.logged_loss_filler(trainer) is None  # before train(): no _tr_loss yet
    trainer._tr_loss, trainer._globalstep_last_logged, trainer.state.global_step = torch.tensor(3.0), 1, 3
    assert _hf_internals.logged_loss_filler(trainer).item() == 1.0  # 3 / (1 + 3 - 1)
    from accelerate import Accelerator

    loader = Accelerator(cpu=True).prepare(torch.utils.data.DataLoader(list(range(4)), batch_size=2))
    assert _hf_internals.set_dataloader_non_blocking(loader) and loader._non_blocking is True


CHECKS = {
    "torch.nn.Module._compiled_call_impl / _call_impl / OptimizedModule._orig_mod": _compiled_module_slot,
    "torch._functorch.config.force_non_lazy_backward_lowering": _force_non_lazy_backward_lowering,
    "torch._dynamo.utils.counters / get_compilation_metrics / torch._dynamo.callback.callback_handler": (
        _counters_records_and_callbacks
    ),
    "torch._dynamo.utils._compilation_metrics (dynamo_state_kept)": _dynamo_state_kept,
    "torch._dynamo.config.recompile_limit": _recompile_limit,
    "torch._dynamo.convert_frame's recompile-limit warning": _recompile_limit_log_line,
    "torch._logging artifact loggers and set_logs": _artifact_loggers,
    "torch.optim.optimizer._get_fused_kernels_supported_devices / _global_optimizer_*_hooks": _optimizer_internals,
    "transformers config._attn_implementation / Trainer._train_batch_size": _transformers_internals,
    "sagemaker-core PipelineSession._intercept_create_request": _sagemaker_core_pipeline_hand_off,
    "sagemaker-core _SageMakerContainer._get_compose_cmd_prefix": _sagemaker_core_docker_compose_lookup,
    "sagemaker-train ModelTrainer._metric_definitions": _sagemaker_train_metric_definitions,
    "torch_xla MpDeviceLoader._loader / accelerate DataLoaderAdapter.base_dataloader": _innermost_dataloader,
    "torch.compile(isolate_recompiles) / dynamo accumulated_recompile_limit": (_recompile_budget_internals),
    "FSDP2 param groups' post_forward_mesh_info / ProcessGroupGloo._reduce_scatter_base": _fsdp2_and_gloo_internals,
    "torch._foreach_zero_ / functional fused Adam(W) / Module hook dicts / torch.cuda.graph": (
        _captured_step_internals
    ),
    "transformers Trainer._tr_loss / _globalstep_last_logged / accelerate DataLoaderShard._non_blocking": (
        _trainer_step_internals
    ),
    "cudagraph trees' overwritten error / torch.OutOfMemoryError / LR scheduler's _wrapped_by_lr_sched": (
        _error_and_scheduler_internals
    ),
}


@pytest.mark.parametrize("symbol", list(CHECKS))
def test_private_api_is_where_internals_expects_it(symbol):
    try:
        CHECKS[symbol]()
    except (AttributeError, ImportError, AssertionError, TypeError) as error:
        pytest.fail(f"{symbol}: {type(error).__name__}: {error}")


@pytest.mark.parametrize("module", [_internals, sdk_internals], ids=lambda module: module.__name__)
def test_every_wrapper_in_internals_is_checked_here(module):
    """A new wrapper gets a check: every public function of the two private-API modules (torch and
    transformers: ``sagemaker_tc._internals``; sagemaker-core and sagemaker-train: the SDK side's
    ``sagemaker_tc.sdk._internals``) is called by one above."""
    source = inspect.getsource(__import__(__name__))
    alias = "_internals" if module is _internals else "sdk_internals"
    wrappers = [
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value) and not name.startswith("_") and value.__module__ == module.__name__
    ]
    unchecked = [name for name in wrappers if f"{alias}.{name}(" not in source]
    assert not unchecked, f"wrappers without a check in tests/test_internals.py: {unchecked}"
