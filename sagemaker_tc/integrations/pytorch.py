"""Plain PyTorch loops: one call, :func:`compile_model`, compiles the model and measures its steps."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from sagemaker_tc import contract
from sagemaker_tc.compiler.recorder import RECORDER
from sagemaker_tc.compiler.runtime import RUNTIME
from sagemaker_tc.config import TrainingCompilerConfig

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)
# Set by the sagemaker-training toolkit for every job's script: tells "inside a job" from a laptop run.
IN_JOB_ENV = "SM_TRAINING_ENV"


def _batch_size(args: tuple, kwargs: dict) -> int:
    """Leading dim of the first tensor among the forward's inputs (0 when there is none)."""
    import torch

    for value in list(args) + list(kwargs.values()):
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    return 0


class _StepWatcher:
    """A step runs from the first training-mode forward after an optimizer step to the next
    optimizer step; its samples are the batch sizes of the forwards in between."""

    def __init__(self) -> None:
        self.samples = 0

    def on_forward(self, module, args, kwargs):
        if not module.training:
            return None
        if not RECORDER.step_open:
            self.samples = 0
            RECORDER.begin_step()
        self.samples += _batch_size(args, kwargs)
        return None

    def on_optimizer_step(self, optimizer, args, kwargs):
        RUNTIME.track_optimizer(optimizer)
        if RECORDER.step_open:
            RECORDER.end_step(self.samples)


_WATCHER = _StepWatcher()
_optimizer_hook_installed = False
_runtime_connected = False


def connect_runtime() -> None:
    """Let the runtime see every recorded step and label it (idempotent; imports torch)."""
    global _runtime_connected
    RECORDER.install_dynamo_hooks()
    if not _runtime_connected:
        RECORDER.on_step_end(RUNTIME.on_step_end, RUNTIME.current_label)
        _runtime_connected = True


def resolve_config(config: TrainingCompilerConfig | None) -> TrainingCompilerConfig:
    """``config``; else the job's (the estimator's ``compiler_config``); inside a job whose estimator
    had none, a disabled config (with a warning: the estimator decides); outside a job, the default."""
    if config is not None:
        return config
    settings = contract.settings_from_environment(os.environ)
    if settings is not None:
        return settings.config
    if IN_JOB_ENV in os.environ:
        logger.warning(
            "compile_model: this job's estimator has no compiler_config, so the model is not compiled "
            "(add compiler_config=TrainingCompilerConfig() to the estimator, or pass config= here)"
        )
        return TrainingCompilerConfig(enabled=False)
    return TrainingCompilerConfig()


def compile_model(model: torch.nn.Module, config: TrainingCompilerConfig | None = None) -> torch.nn.Module:
    """Compile ``model`` in place for training and measure its steps for the job's report.

    The config is, in order: ``config``; the job's (set by the estimator's ``compiler_config``);
    inside a SageMaker job whose estimator had no ``compiler_config``, none (the model stays
    uncompiled, with a warning: the estimator decides); outside a job, the default
    ``TrainingCompilerConfig()``. A disabled config or ``backend="eager"`` leaves the model
    uncompiled (still measured). The model object and its ``state_dict()`` keys are unchanged.

    Compiler failures are caught at the compiled call and handled by ``config.policy`` (see
    :mod:`sagemaker_tc.compiler.runtime`); the first ``config.baseline_steps`` optimizer steps run
    eagerly to measure the eager step for the report's ``break_even_steps``. Shape bucketing needs
    the batches padded: wrap the DataLoader's collate function in
    :class:`sagemaker_tc.BucketCollator`.

    Step timing: a step runs from the first forward in training mode after an optimizer step to the
    next ``optimizer.step()`` (any optimizer, via torch's global optimizer step hook); its samples are
    the leading dimension of the first tensor input of each forward.

    Returns:
        ``model`` itself.
    """
    global _optimizer_hook_installed
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    config = resolve_config(config)
    RECORDER.integration = RECORDER.integration or "pytorch"
    connect_runtime()
    if config.compiles:
        if getattr(getattr(model, "config", None), "use_cache", None) is True and model.training:
            logger.warning(
                "compile_model: %s has config.use_cache=True; training forwards build a KV cache that makes each "
                "compiled layer recompile. Set model.config.use_cache = False for training.",
                type(model).__name__,
            )
        plan = RUNTIME.attach(model, config)
        RECORDER.plan = plan
        logger.info(
            "Compiled %s with %s (%s, %d region(s)); policy %s",
            type(model).__name__,
            config.backend,
            f"regional: {plan.block_class}" if plan.regional else "whole model",
            plan.num_regions,
            config.policy,
        )
    else:
        logger.info(
            "Compiler off for %s (enabled=%s, backend=%s)", type(model).__name__, config.enabled, config.backend
        )
    # Not traced by dynamo: the hook only reads shapes and clocks, outside any compiled region.
    model.register_forward_pre_hook(torch.compiler.disable(_WATCHER.on_forward), with_kwargs=True)
    if not _optimizer_hook_installed:
        register_optimizer_step_post_hook(_WATCHER.on_optimizer_step)
        _optimizer_hook_installed = True
    return model
