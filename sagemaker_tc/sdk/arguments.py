"""Checks of the estimators' constructor arguments, each raising a named error before any job starts.

The estimators (:mod:`sagemaker_tc.sdk.estimator`) call these in ``__init__``; the run modes
(:mod:`sagemaker_tc.sdk.modes`) call :func:`check_role` at ``fit()``. Each function checks one
argument (or a pair that only make sense together) and returns the value the estimator keeps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable

from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import ConfigError, EstimatorArgumentError, UnsupportedInstanceTypeError
from sagemaker_tc.sdk.instances import InstanceKind, classify_instance
from sagemaker_tc.sdk.local_process import local_path
from sagemaker_tc.sdk.source import SourceSpec

DEFAULT_OUTPUT_PATH = "sagemaker-tc-output"
DEFAULT_MAX_RUN_SECONDS = 24 * 60 * 60  # SageMaker's default MaxRuntimeInSeconds (1 day)
# CreateTrainingJob RoleArn: arn:aws[-partition]:iam::<account>:role/<path/name>, 20-2048 chars.
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
CLOUD_KINDS = (InstanceKind.GPU, InstanceKind.CPU)


def check_flag(name: str, value: Any) -> bool:
    """Return ``value`` if it is a bool.

    Raises:
        EstimatorArgumentError: any other type (an opt-in is never implied by a truthy string).
    """
    if not isinstance(value, bool):
        raise EstimatorArgumentError(f"{name} must be True or False, got {value!r}")
    return value


def check_instance(instance_type: Any, instance_count: Any) -> tuple[str, InstanceKind]:
    """Check where the job runs.

    A pipeline parameter (``ParameterString``) is checked, and later picks the image, by its
    ``default_value``.

    Returns:
        ``(instance type as checked, where the job runs)``.

    Raises:
        UnsupportedInstanceTypeError: see :func:`~sagemaker_tc.sdk.instances.classify_instance`; also a
            pipeline parameter without a default, or one that defaults to a local mode.
    """
    checked = getattr(instance_type, "default_value", instance_type)
    is_parameter = isinstance(instance_type, PipelineVariable)
    if is_parameter and not isinstance(checked, str):
        raise UnsupportedInstanceTypeError(
            "a pipeline parameter instance_type needs a default_value such as 'ml.g5.2xlarge' "
            "(it picks the training image)"
        )
    kind = classify_instance(checked, instance_count)
    if is_parameter and kind not in CLOUD_KINDS:
        raise UnsupportedInstanceTypeError(
            f"a pipeline parameter instance_type must default to an ml.* instance type (pipelines run SageMaker "
            f"training jobs), got default {checked!r}"
        )
    return checked, kind


def check_compiler_config(config: Any) -> TrainingCompilerConfig | None:
    """Return ``config`` if it is None or a :class:`~sagemaker_tc.config.TrainingCompilerConfig`.

    Raises:
        ConfigError: any other object, e.g. SMTC's ``sagemaker.huggingface.TrainingCompilerConfig``.
    """
    if config is None or isinstance(config, TrainingCompilerConfig):
        return config
    raise ConfigError(
        f"compiler_config must be a sagemaker_tc.TrainingCompilerConfig, got {type(config).__module__}."
        f"{type(config).__qualname__}"
    )


def check_entry_point_language(source: SourceSpec, entry_point: str, compiler_enabled: bool) -> None:
    """With the compiler on, the entry point must be a Python script (the compiler runs in its process).

    Raises:
        EstimatorArgumentError: a non-``.py`` entry point with the compiler enabled.
    """
    if compiler_enabled and not source.entry_point.endswith(".py"):
        raise EstimatorArgumentError(
            f"entry_point {entry_point!r} is not a Python script: with compiler_config enabled the entry point "
            "must be a .py file (the compiler runs inside the Python process); shell entry points run without it"
        )


def check_environment(environment: Any) -> dict[str, str]:
    """Return ``environment`` as a dict of str -> str (``{}`` for None).

    Raises:
        EstimatorArgumentError: not a mapping of strings to strings.
    """
    if environment is None:
        return {}
    if not isinstance(environment, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        raise EstimatorArgumentError(f"environment must be a dict of str -> str, got {environment!r}")
    return dict(environment)


def check_output_path(output_path: Any, *, cloud: bool) -> str | None:
    """Where the job's artifacts go: an ``s3://`` URI for SageMaker jobs (None: the session's default
    bucket), a local folder or ``file://`` URI for local modes (default ``./sagemaker-tc-output``).

    Raises:
        EstimatorArgumentError: an ``s3://`` path for a local mode, or a local one for a SageMaker job.
    """
    if cloud:
        if output_path is not None and not str(output_path).startswith("s3://"):
            raise EstimatorArgumentError(
                f"output_path for SageMaker training jobs is an s3:// URI, got {output_path!r}"
            )
        return output_path
    output_path = output_path or DEFAULT_OUTPUT_PATH
    local_path(output_path)  # local modes write locally: refuse s3:// now
    return output_path


def check_max_run(max_run: Any) -> int:
    """``max_run``: the job's time limit, seconds (SageMaker's StoppingCondition.MaxRuntimeInSeconds).

    Raises:
        EstimatorArgumentError: not a positive integer.
    """
    if not isinstance(max_run, int) or max_run < 1:
        raise EstimatorArgumentError(f"max_run must be a positive number of seconds, got {max_run!r}")
    return max_run


def check_checkpoints(checkpoint_s3_uri: Any, checkpoint_local_path: Any, *, cloud: bool) -> None:
    """SageMaker's checkpoint sync: an ``s3://`` URI, and optionally the container folder synced with it.

    Raises:
        EstimatorArgumentError: a non-``s3://`` URI, a local path without a URI, or a URI for a local mode.
    """
    if checkpoint_s3_uri is not None and not str(checkpoint_s3_uri).startswith("s3://"):
        raise EstimatorArgumentError(f"checkpoint_s3_uri must be an s3:// URI, got {checkpoint_s3_uri!r}")
    if checkpoint_local_path is not None and checkpoint_s3_uri is None:
        raise EstimatorArgumentError("checkpoint_local_path needs checkpoint_s3_uri (the S3 side of the sync)")
    if checkpoint_s3_uri is not None and not cloud:
        raise EstimatorArgumentError("checkpoint_s3_uri applies to SageMaker training jobs (ml.* instance types)")


def check_role(role: Any) -> str:
    """The IAM role a SageMaker job runs as, checked at ``fit()`` (local modes need none).

    Raises:
        EstimatorArgumentError: no role, or not a full role ARN (CreateTrainingJob's RoleArn).
    """
    if not role:
        raise EstimatorArgumentError("role is required for SageMaker training jobs (an IAM role ARN)")
    if not _ROLE_ARN_RE.match(str(role)):
        raise EstimatorArgumentError(
            f"role must be a full IAM role ARN such as 'arn:aws:iam::111122223333:role/SageMakerRole', got {role!r}"
        )
    return role
