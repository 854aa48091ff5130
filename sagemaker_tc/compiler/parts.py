"""The parts a compiler session builds and hands down.

:func:`resolve_config` is the config a session opens with (the one given, else the job's);
:func:`runtime_for` builds the session's runtime by its config's backend (:func:`prepare_xla` readies
the process for ``backend="xla"`` when the session opens). :class:`TrainerParts` is what a Hugging
Face ``Trainer``'s callback (:mod:`sagemaker_tc.integrations.transformers`) and the job launcher
(:mod:`sagemaker_tc.container.launcher`) take, never the session itself (torchtitan's way: the
trainer builds the parts, each function takes the part it uses).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker_tc import contract
from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.runtime import CompilerRuntime
from sagemaker_tc.compiler.xla_runtime import XlaRuntime
from sagemaker_tc.config import TrainingCompilerConfig

if TYPE_CHECKING:
    from sagemaker_tc.compiler.captured_step import GraphBackend
    from sagemaker_tc.compiler.job_report import JobRecord
    from sagemaker_tc.compiler.regions import CompiledRegions
    from sagemaker_tc.compiler.shapes import BucketStats
    from sagemaker_tc.compiler.steps import StepTimer

Runtime = CompilerRuntime | XlaRuntime  # a session's runtime, by its config's backend

logger = logging.getLogger("sagemaker_tc.session")  # resolve_config's warning, as the session logs it


def runtime_for(config: TrainingCompilerConfig, buckets: BucketStats, timer: StepTimer) -> Runtime:
    """The runtime ``config``'s backend runs: :class:`~sagemaker_tc.compiler.xla_runtime.XlaRuntime` for
    ``backend="xla"``, else :class:`~sagemaker_tc.compiler.runtime.CompilerRuntime` (Inductor's plans)."""
    if config.compiles and config.backend == "xla":
        from sagemaker_tc.compiler.xla import XlaBackend

        return XlaRuntime(XlaBackend(), buckets, timer)
    return CompilerRuntime(buckets, timer)


def prepare_xla(config: TrainingCompilerConfig, environ: Mapping[str, str]) -> Callable[[], None]:
    """``backend="xla"``: the PJRT device (and debug mode's HLO dump, under ``environ``'s compiler
    folder) in the process environment (``os.environ``), then torch_xla imported, before the script's
    first ``backward()``. Returns the process environment's undo.

    Raises:
        CompilerError: torch_xla is not installed (the environment is put back first).
    """
    from sagemaker_tc.compiler import xla

    debug_dir = contract.compiler_dir(environ) if config.debug else None
    undo = xla.prepare_environment(config, os.environ, debug_dir)
    try:
        xla.import_torch_xla()
    except Exception:
        undo()
        raise
    return undo


def torch_installed() -> bool:
    """True when torch can be imported (the session installs its torch hooks only then)."""
    return importlib.util.find_spec("torch") is not None


@dataclass(frozen=True, eq=False)
class TrainerParts:
    """One session's parts, as :meth:`CompilerSession.trainer_parts
    <sagemaker_tc.compiler.session.CompilerSession.trainer_parts>` builds them.

    Attributes:
        config: the session's resolved config.
        timer: the step records (``begin_step``, ``step_open``).
        runtime: the session's runtime (``CompilerRuntime`` or ``XlaRuntime``).
        record: what the job tells the session for the report.
        add_cleanup: run an undo when the session closes (last added first).
        attach: the session's ``attach`` (a model set up by the config, logged).
        end_step: end an optimizer step of ``samples`` (the backend's step, then the record).
        stop_agreed: True once every rank agreed to stop at the given optimizer step.
        resume_from: the job resumes from a checkpoint folder (before the model is attached).
        plan_record: ``(requested plan, plan="auto"'s decision or None)`` for a checkpoint.
        graph_backend_for: the graph backend that records a whole step on a device type, or None.
    """

    config: TrainingCompilerConfig
    timer: StepTimer
    runtime: Runtime
    record: JobRecord
    add_cleanup: Callable[[Callable[[], None]], None]
    attach: Callable[..., CompiledRegions | None]
    end_step: Callable[[int], None]
    stop_agreed: Callable[[int | None], bool]
    resume_from: Callable[[Path], dict[str, Any]]
    plan_record: Callable[[], tuple[str, dict[str, Any] | None]]
    graph_backend_for: Callable[[str], GraphBackend | None]

    @property
    def whole_step_named(self) -> bool:
        """The job named ``plan="step"`` with the default mode (Inductor), or ``plan="auto"`` where a
        committed GPU result backs it: a ``Trainer``'s whole step is recorded where the device records."""
        return whole_step_named(self.config, self.runtime.device)

    def whole_step_backend(self) -> GraphBackend | None:
        """The graph backend to record a whole training step with now, or None: the job named
        ``plan="step"`` with the default mode, the step plan runs, and its device records
        (:mod:`sagemaker_tc.integrations.captured_trainer`; under ``plan="auto"`` only where
        :func:`~.planner.whole_step_under_auto` allows it)."""
        if not self.whole_step_named or self.runtime.active != "step":
            return None
        return self.graph_backend_for(self.runtime.device)


def whole_step_named(config: TrainingCompilerConfig, device: str) -> bool:
    """``config`` names ``plan="step"`` with the default mode on Inductor, or ``plan="auto"`` with
    it where a committed GPU result for the whole step pays on ``device``
    (:func:`~.planner.whole_step_under_auto`; module docstring of
    :mod:`sagemaker_tc.integrations.captured_trainer`)."""
    named = config.plan == "step" or (config.plan == "auto" and planner.whole_step_under_auto(device))
    return config.compiles and config.backend == "inductor" and named and config.mode == "default"


def resolve_config(config: TrainingCompilerConfig | None, environ: Mapping[str, str]) -> TrainingCompilerConfig:
    """``config``; else the job's (the estimator's ``compiler_config``); inside a job whose estimator
    had none, a disabled config (with a warning: the estimator decides); outside a job, the default.

    Raises:
        ConfigError: the job's settings in the environment are malformed.
    """
    if config is not None:
        return config
    settings = contract.settings_from_environment(environ)
    if settings is not None:
        return settings.config
    if contract.ENV_TRAINING_ENV in environ:
        logger.warning(
            "compile_model: this job's estimator has no compiler_config, so the model is not compiled "
            "(add compiler_config=TrainingCompilerConfig() to the estimator, or pass config= here)"
        )
        return TrainingCompilerConfig(enabled=False)
    return TrainingCompilerConfig()
