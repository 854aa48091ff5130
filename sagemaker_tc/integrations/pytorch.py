"""Plain PyTorch loops: one call, :func:`compile_model`, compiles the model and measures its steps."""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals
from sagemaker_tc.compiler.session import current_session, session_for
from sagemaker_tc.config import TrainingCompilerConfig, checked_config
from sagemaker_tc.errors import CheckpointArgumentError, ModelArgumentError

if TYPE_CHECKING:
    import torch

    from sagemaker_tc.compiler.runtime_protocol import SessionRuntime
    from sagemaker_tc.compiler.steps import StepTimer

logger = logging.getLogger(__name__)


def _batch_size(args: tuple, kwargs: dict) -> int:
    """Leading dim of the first tensor among the forward's inputs (0 when there is none)."""
    import torch

    for value in list(args) + list(kwargs.values()):
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    return 0


class StepWatcher:
    """A step runs from the first training-mode forward after an optimizer step to the next
    optimizer step; its samples are the batch sizes of the forwards in between.

    One per session, kept by its step timer (the session does not know the plain-loop integration):
    it hears every call of the models the session attached (outside any compiled graph) and every
    ``optimizer.step()`` through one global optimizer step hook, removed when the session closes (or
    when a failed ``compile_model`` setup is undone). The hook is never traced: a compiled optimizer
    update runs it eagerly after the graph.

    Args:
        timer: the session's step records (begins each step).
        runtime: the session's runtime (the optimizers it tracks, the gradient accumulation).
        end_step: ends an optimizer step of ``samples`` (the session's ``end_step``).
    """

    _of_timer: weakref.WeakKeyDictionary[StepTimer, StepWatcher] = weakref.WeakKeyDictionary()

    def __init__(self, timer: StepTimer, runtime: SessionRuntime, end_step: Callable[[int], None]) -> None:
        self.timer = timer
        self.runtime = runtime
        self.end_step = end_step
        self.samples = 0
        self.forwards = 0

    @classmethod
    def of(
        cls,
        timer: StepTimer,
        runtime: SessionRuntime,
        end_step: Callable[[int], None],
        add_cleanup: Callable[[Callable], None],
    ) -> StepWatcher:
        """The watcher of the session whose step records are ``timer``; the first call installs the
        global optimizer step hook and listens to the runtime's model calls (each undone by
        ``add_cleanup``'s callable)."""
        watcher = cls._of_timer.get(timer)
        if watcher is None:
            import torch
            from torch.optim.optimizer import register_optimizer_step_post_hook

            watcher = cls._of_timer[timer] = cls(timer, runtime, end_step)
            add_cleanup(lambda: cls._of_timer.pop(timer, None))
            hook = torch.compiler.disable(watcher.on_optimizer_step)
            add_cleanup(register_optimizer_step_post_hook(hook).remove)
            add_cleanup(runtime.calls.add_listener(watcher.on_forward))
        return watcher

    @classmethod
    def watching(cls, timer: StepTimer) -> bool:
        """True when the session of ``timer`` has a step watcher (``compile_model`` set one up, not undone)."""
        return timer in cls._of_timer

    def on_forward(self, module: Any, args: tuple, kwargs: dict) -> None:
        """Before a model call: the first training forward after an optimizer step begins a step."""
        if not module.training:
            return
        if not self.timer.step_open:
            self.samples = self.forwards = 0
            self.timer.begin_step()
        self.samples += _batch_size(args, kwargs)
        self.forwards += 1

    def on_optimizer_step(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        """After ``optimizer.step()``: the step ends."""
        self.runtime.track_optimizer(optimizer)
        if self.timer.step_open:
            calls = self.runtime.calls
            calls.set_accumulation(max(calls.forwards_per_step, self.forwards))
            self.end_step(self.samples)


def compile_model(model: torch.nn.Module, config: TrainingCompilerConfig | None = None) -> torch.nn.Module:
    """Compile ``model`` in place for training and measure its steps for the job's report.

    The config is, in order: ``config``; the job's (set by the estimator's ``compiler_config``);
    inside a SageMaker job whose estimator had no ``compiler_config``, none (the model stays
    uncompiled, with a warning: the estimator decides); outside a job, the default
    ``TrainingCompilerConfig()``. A disabled config or ``backend="eager"`` leaves the model
    uncompiled (still measured). The model object and its ``state_dict()`` keys are unchanged.
    With ``plan="auto"`` the job's length comes from ``config.expected_steps`` (else 1,000 steps
    are assumed). Call it on the bare model, before wrapping it in ``DistributedDataParallel`` or
    calling ``fully_shard`` (FSDP2: per block, then the root; a model sharded first still trains the
    same, with a :class:`~sagemaker_tc.errors.ShardingOrderWarning`; docs/distributed.md).
    When the config compiles, a Hugging Face model's ``config.use_cache`` is switched off (no KV cache
    in training forwards: it makes each compiled layer recompile) and set back to True when the
    session closes, as the ``Trainer`` integration does (:mod:`sagemaker_tc.compiler.model_setup`).

    The work is done by the process's compiler session: the job's, else one this call opens
    (:func:`sagemaker_tc.compiler.session.session_for`; ``current_session().close()`` ends it).

    Compiler failures are caught at the compiled call and handled by ``config.policy`` (see
    :mod:`sagemaker_tc.compiler.runtime`); the first ``config.baseline_steps`` optimizer steps run
    eagerly to measure the eager step for the report's ``break_even_steps``. Shape bucketing needs
    the batches padded: wrap the DataLoader's collate function in
    :class:`sagemaker_tc.BucketCollator`.

    Step timing: a step runs from the first forward in training mode after an optimizer step to the
    next ``optimizer.step()`` (any optimizer, via torch's global optimizer step hook); its samples are
    the leading dimension of the first tensor input of each forward.

    A call that raises leaves the process's compiler state as it was: the hooks it installed are
    undone, and a session it opened is closed, so a later call with a good model works.

    Returns:
        ``model`` itself.

    Raises:
        ModelArgumentError: ``model`` is not a ``torch.nn.Module`` instance (None, a name, a
            function, the model's class), is a TorchScript module, or is ``torch.compile(module)``'s
            wrapper (pass the module itself).
        ConfigError: ``config`` is not a ``TrainingCompilerConfig`` (a dict, say) or does not pass its
            checks, or the job's settings in the environment are malformed.
        GlooAveragingError: ``model`` is FSDP2-sharded on gloo and this torch's gloo sums where it
            should average (:mod:`sagemaker_tc.compiler.sharding`); for a model sharded after this
            call, raised at its first training call instead.
    """
    check_model(model)
    config = checked_config(config, argument="config")  # SMTC's config becomes ours
    opened = current_session() is None
    session = session_for(config)
    try:
        with session.setup():
            config = config or session.config
            session.record.join("pytorch", first_only=True)
            StepWatcher.of(session.timer, session.runtime, session.end_step, session.add_cleanup)
            length, first = (config.expected_steps, "expected_steps"), session.record.integration == "pytorch"
            session.attach(model, config, job_length=length, measure_calls=True, warn_shard_order=first)
            return model
    except BaseException:
        if opened:
            session.close()
        raise


def check_model(model: Any) -> None:
    """Refuse what ``compile_model`` cannot compile, before any compiler state is touched.

    Raises:
        ModelArgumentError: ``model`` is not a ``torch.nn.Module`` instance, is a TorchScript
            module (``torch.jit.script`` / ``torch.jit.trace``), which takes no forward hooks, or is
            the wrapper ``torch.compile(module)`` returns (its compiled call would bypass the fallback).
    """
    import torch

    script_module = getattr(getattr(torch, "jit", None), "ScriptModule", None)
    if script_module is not None and isinstance(model, script_module):
        raise ModelArgumentError(
            f"compile_model got a TorchScript module ({type(model).__qualname__}, from torch.jit.script or "
            "torch.jit.trace), which the compiler cannot hook or train through: pass the torch.nn.Module itself"
        )
    if _internals.compiled_wrapper_target(model) is not None:
        raise ModelArgumentError(
            "compile_model got a model that torch.compile already wrapped: pass the module itself "
            "(model._orig_mod, or the model before torch.compile); compile_model compiles it behind its "
            "fallback, and the compiled wrapper would run outside it, the eager baseline steps included"
        )
    if isinstance(model, torch.nn.Module):
        return
    name = getattr(model, "__qualname__", None)
    if isinstance(model, type) and issubclass(model, torch.nn.Module):
        got = f"the class {name} itself: build the model first, e.g. compile_model({name}(...))"
    elif isinstance(model, str):
        got = f"the string {model[:80]!r}: load the model first (from_pretrained(...)) and pass it"
    elif model is None:
        got = "None"
    else:
        got = f"{type(model).__module__}.{type(model).__qualname__}"
    raise ModelArgumentError(f"compile_model expected a torch.nn.Module instance (your model), got {got}")


def stop_requested() -> bool:
    """True once the job was asked to stop (SIGTERM: ``StopTrainingJob``, ``max_run``, a spot reclaim,
    ``latest_training_job.stop()``): save a checkpoint and leave the training loop. Call it once per
    optimizer step, at the same point on every rank: in a multi-process job it is a collective (an
    all-reduce of one integer over gloo, on the host; it never waits for the GPU) so that every rank
    stops at the same step (:mod:`sagemaker_tc.compiler.stopping`). Always False outside a job's
    launcher (no SIGTERM handler is installed there)."""
    session = current_session()
    return session is not None and session.stop_agreed()


def resume_from(checkpoint: str) -> None:
    """Tell the compiler that this plain loop resumes from ``checkpoint`` (a ``checkpoint-<step>``
    folder, e.g. :func:`sagemaker_tc.checkpoints.latest_complete`'s), before :func:`compile_model`:
    the report says ``resumed_from``, and ``plan="auto"`` runs the plan the interrupted job chose
    (saved by :func:`sagemaker_tc.checkpoints.writing`) with no new trials. The loop restores its own
    model, optimizer, scheduler, RNG and data position.

    Raises:
        CheckpointArgumentError: ``checkpoint`` is not the path of an existing folder (``""``, a
            missing path, a file): checked first, so the report never names a checkpoint that is not there.
        ModelArgumentError: no compiler session is open (call it in a job, or after opening one).
    """
    from pathlib import Path

    if not isinstance(checkpoint, (str, os.PathLike)) or not str(checkpoint).strip() or not Path(checkpoint).is_dir():
        raise CheckpointArgumentError(
            f"resume_from({checkpoint!r}): give the path of an existing checkpoint folder, such as "
            "sagemaker_tc.checkpoints.latest_complete(folder) returns (skip resume_from when it returns None)"
        )
    session = current_session()
    if session is None:
        raise ModelArgumentError("resume_from() needs the job's compiler session: call it inside a sagemaker-tc job")
    session.resume_from(Path(checkpoint))
