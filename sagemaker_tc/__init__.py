"""sagemaker-tc: the maintained successor to Amazon SageMaker Training Compiler.

Public API (imported lazily, so the container side never loads the SDK and the SDK never loads torch):

- ``TrainingCompilerConfig``: turn the compiler on for an estimator's job.
- ``HuggingFace``, ``PyTorch``: estimators with ``compiler_config``, on sagemaker-core 2.x.
- ``ModelTrainer``: SDK v3's ``ModelTrainer`` (sagemaker-train) with ``compiler_config`` (extra ``[v3]``).
- ``compile_model``: the one call a plain PyTorch training loop makes.
- ``stop_requested``, ``resume_from``: a plain loop's stop and resume hooks (checkpoint helpers in
  :mod:`sagemaker_tc.checkpoints`).
- ``BucketCollator``, ``pad_to_bucket``: shape bucketing for a plain loop's batches.
- ``tune_batch_size``, ``find_max_batch``, ``scale_learning_rate``: batch size and learning rate
  tuned with the compiler (:mod:`sagemaker_tc.tuning`).
- the error classes in :mod:`sagemaker_tc.errors`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from sagemaker_tc.errors import (
    BatchSizeSearchError,
    ChannelNotFoundError,
    CheckpointArgumentError,
    CollatorArgumentError,
    CompilerError,
    CompilerFallbackWarning,
    ConfigError,
    ConfigWarning,
    CpuInstanceWarning,
    DockerNotAvailableError,
    EstimatorArgumentError,
    GlooAveragingError,
    HyperparameterError,
    HyperparameterWarning,
    JobSettingWarning,
    LauncherError,
    MaxRuntimeExceededError,
    MemberNotOfferedError,
    ModelArgumentError,
    ModelTrainerArgumentError,
    OptMlNotMappedWarning,
    OptMlUnavailableError,
    ReservedEnvironmentWarning,
    SagemakerTCError,
    ShardingOrderWarning,
    SourceLinkError,
    SourceNotFoundError,
    TrainingJobFailedError,
    TuningError,
    UnsupportedImageError,
    UnsupportedInstanceTypeError,
)

__version__ = "0.1.0"

_LAZY = {
    "TrainingCompilerConfig": "sagemaker_tc.config",
    "HuggingFace": "sagemaker_tc.sdk.estimator",
    "PyTorch": "sagemaker_tc.sdk.estimator",
    "ModelTrainer": "sagemaker_tc.sdk.v3.trainer",
    "TrainingInput": "sagemaker_tc.sdk.inputs",
    "FileSystemInput": "sagemaker_tc.sdk.inputs",
    "compile_model": "sagemaker_tc.integrations.pytorch",
    "stop_requested": "sagemaker_tc.integrations.pytorch",
    "resume_from": "sagemaker_tc.integrations.pytorch",
    "BucketCollator": "sagemaker_tc.compiler.collator",
    "pad_to_bucket": "sagemaker_tc.compiler.shapes",
    "tune_batch_size": "sagemaker_tc.tuning.api",
    "find_max_batch": "sagemaker_tc.tuning.finder",
    "scale_learning_rate": "sagemaker_tc.tuning.scaling",
}

__all__ = [
    "BatchSizeSearchError",
    "BucketCollator",
    "ChannelNotFoundError",
    "CheckpointArgumentError",
    "CollatorArgumentError",
    "CompilerError",
    "CompilerFallbackWarning",
    "ConfigError",
    "ConfigWarning",
    "CpuInstanceWarning",
    "DockerNotAvailableError",
    "EstimatorArgumentError",
    "FileSystemInput",
    "GlooAveragingError",
    "HuggingFace",
    "HyperparameterError",
    "HyperparameterWarning",
    "JobSettingWarning",
    "LauncherError",
    "MaxRuntimeExceededError",
    "MemberNotOfferedError",
    "ModelArgumentError",
    "ModelTrainer",
    "ModelTrainerArgumentError",
    "OptMlNotMappedWarning",
    "OptMlUnavailableError",
    "PyTorch",
    "ReservedEnvironmentWarning",
    "SagemakerTCError",
    "ShardingOrderWarning",
    "SourceLinkError",
    "SourceNotFoundError",
    "TrainingCompilerConfig",
    "TrainingInput",
    "TrainingJobFailedError",
    "TuningError",
    "UnsupportedImageError",
    "UnsupportedInstanceTypeError",
    "compile_model",
    "find_max_batch",
    "pad_to_bucket",
    "resume_from",
    "scale_learning_rate",
    "stop_requested",
    "tune_batch_size",
]


def __getattr__(name: str) -> Any:
    if name == "checkpoints":  # the documented sagemaker_tc.checkpoints.writing(...) after `import sagemaker_tc`
        return import_module("sagemaker_tc.checkpoints")
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sagemaker_tc' has no attribute {name!r}")
