"""Checks of the SDK v2 estimators' own arguments, each raising a named error before any job starts.

The estimators (:class:`~sagemaker_tc.sdk.spec.EstimatorSpec`) call these when built, and ``fit()`` calls
:func:`check_experiment_config` (SDK v2's ``EstimatorBase.fit`` took it) before any upload or job. Each
function checks one argument (or a pair that only make sense together) and returns the value the
estimator keeps. The rules both front ends apply (``ModelTrainer`` too) live beside the values they
check: where the job runs (:mod:`sagemaker_tc.sdk.instances`), its environment
(:mod:`sagemaker_tc.sdk.job_environment`), the compiler config (:mod:`sagemaker_tc.sdk.compiler_rules`),
flags, S3 URIs, the role and the time limit (:mod:`sagemaker_tc.sdk.value_checks`), folders
(:mod:`sagemaker_tc.sdk.folder_checks`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.paths import unwritable_reason
from sagemaker_tc.sdk.job_paths import DEFAULT_OUTPUT_PATH, check_local_uri, local_path
from sagemaker_tc.sdk.source import SourceSpec, check_user_home
from sagemaker_tc.sdk.value_checks import check_role_characters, check_s3_uri
from sagemaker_tc.uris import has_control_character

logger = logging.getLogger(__name__)

# Arguments that are text, checked for their type before any is used: name -> what is accepted.
_PATH = (str, os.PathLike)
TEXT_ARGUMENTS: dict[str, tuple[tuple[type, ...], str]] = {
    "source_dir": (_PATH, "a folder path"),
    "output_path": (_PATH, "a folder path or an s3:// URI"),
    "base_job_name": ((str,), "a string"),
    "role": ((str,), "an IAM role ARN string"),
    "py_version": ((str,), "a string such as 'py312'"),
    "image_uri": ((str,), "an image URI string"),
    "checkpoint_s3_uri": ((str,), "an s3:// URI string"),
    "checkpoint_local_path": ((str,), "a container path string"),
    "transformers_version": ((str,), "a version string such as '4.56'"),
    "pytorch_version": ((str,), "a version string such as '2.8'"),
    "framework_version": ((str,), "a version string such as '2.8'"),
}
# Text arguments where an empty string would silently mean something else (the default image, the
# current folder, the default output folder): refused, leave the argument out instead.
NON_EMPTY_ARGUMENTS = ("source_dir", "output_path", "image_uri", "checkpoint_s3_uri", "checkpoint_local_path")


def check_types(**values: Any) -> None:
    """Check the type of each text argument given (None is always accepted: the default).

    Raises:
        EstimatorArgumentError: an argument of :data:`TEXT_ARGUMENTS` has another type or holds a
            control character (a trailing newline), or one of :data:`NON_EMPTY_ARGUMENTS` is an empty
            string; the message names the argument and what it accepts.
    """
    for name, value in values.items():
        types, accepted = TEXT_ARGUMENTS[name]
        if value is not None and not isinstance(value, types):
            raise EstimatorArgumentError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
        if name in NON_EMPTY_ARGUMENTS and isinstance(value, str) and not value.strip():
            raise EstimatorArgumentError(
                f"{name}={value!r} is empty: give {accepted}, or leave {name} out for its default"
            )
        if isinstance(value, str) and has_control_character(value):
            raise EstimatorArgumentError(
                f"{name}={value!r} holds a control character (a newline, a tab...): give {accepted} without one"
            )
        if name == "role" and isinstance(value, str):
            check_role_characters(value)


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


def check_output_path(output_path: Any, *, cloud: bool) -> str | None:
    """Where the job's artifacts go: an ``s3://`` URI for SageMaker jobs (None: the session's default
    bucket), a local folder or ``file://`` URI for local modes (default ``./sagemaker-tc-output``).

    Raises:
        EstimatorArgumentError: an ``s3://`` path for a local mode, or a local one for a SageMaker job;
            an empty one; a local folder that cannot be written (a file on its path, a read-only or
            virtual file system such as ``/proc``).
    """
    if isinstance(output_path, str) and not output_path.strip():
        raise EstimatorArgumentError(
            f"output_path={output_path!r} is empty: give a folder path or an s3:// URI, or leave output_path out "
            f"for its default ({DEFAULT_OUTPUT_PATH!r} locally, the session's default bucket on SageMaker)"
        )
    if cloud:
        if output_path is not None and not str(output_path).startswith("s3://"):
            raise EstimatorArgumentError(
                f"output_path for SageMaker training jobs is an s3:// URI, got {output_path!r}"
            )
        return output_path if output_path is None else check_s3_uri("output_path", output_path)
    output_path = os.fspath(DEFAULT_OUTPUT_PATH if output_path is None else output_path)
    check_user_home("output_path", output_path)
    check_local_uri("output_path", output_path)
    folder = local_path(output_path)  # local modes write locally: refuse s3:// now
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not existing.is_dir():
        raise EstimatorArgumentError(
            f"output_path {output_path!r} cannot be a folder: {str(existing)!r} is a file; give a folder path "
            "(it is created if missing)"
        )
    reason = unwritable_reason(folder)
    if reason is not None:
        raise EstimatorArgumentError(
            f"output_path {output_path!r} cannot be written: {reason}; give a folder you can write to (it is created "
            "if missing)"
        )
    return output_path


# Arguments a pipeline variable may stand for: carried into the step's request (checked by its default).
PIPELINE_VARIABLE_ARGUMENTS = (
    "instance_type",
    "instance_count",
    "max_run",
    "output_path",
    "environment",
    "hyperparameters",
)


def check_pipeline_variables(given: Mapping[str, Any]) -> None:
    """Refuse a pipeline variable given for an argument sagemaker-tc reads when the estimator is built
    (``given``: argument name to value, as passed; the names in :data:`PIPELINE_VARIABLE_ARGUMENTS`
    are carried into the step instead).

    Raises:
        EstimatorArgumentError: naming each such argument and its variable, and the arguments that
            take pipeline variables.
    """
    named = [
        f"{name} ({getattr(value, 'name', None) or type(value).__name__})"
        for name, value in given.items()
        if name not in PIPELINE_VARIABLE_ARGUMENTS and isinstance(value, PipelineVariable)
    ]
    if named:
        raise EstimatorArgumentError(
            f"{', '.join(named)}: pipeline variables where sagemaker-tc needs the value when the estimator is built "
            "(it is checked, or picks the image and the compiler's launcher, before the pipeline runs); pass a "
            f"plain value. Pipeline variables are carried into the step for: {', '.join(PIPELINE_VARIABLE_ARGUMENTS)}"
        )


def check_volume_size(volume_size: Any) -> int:
    """``volume_size``: the job's storage volume, GB (SageMaker's ResourceConfig.VolumeSizeInGB, an
    integer >= 0; local modes record it in the request only).

    Raises:
        EstimatorArgumentError: not a whole number of GB.
    """
    if not isinstance(volume_size, int) or isinstance(volume_size, bool) or volume_size < 0:
        raise EstimatorArgumentError(f"volume_size must be a whole number of GB (>= 0), got {volume_size!r}")
    return volume_size


# ExperimentConfig's fields (CreateTrainingJob), as SDK v2 users spell them.
_EXPERIMENT_FIELDS = ("ExperimentName", "TrialName", "TrialComponentDisplayName", "RunName")


def check_experiment_config(value: Any, *, cloud: bool):
    """``fit(experiment_config=...)`` as sagemaker-core's ``ExperimentConfig`` shape (None: not sent).

    Local modes have no SageMaker Experiments: the value is checked, logged and not used.

    Raises:
        EstimatorArgumentError: not a dict of ExperimentConfig's fields (``ExperimentName``,
            ``TrialName``, ``TrialComponentDisplayName``, ``RunName``) with string values, or outside
            CreateTrainingJob's limits for them.
    """
    if value is None:
        return None
    from sagemaker.core.shapes import ExperimentConfig

    from sagemaker_tc.sdk.api_limits import check_limit

    unknown = sorted(set(value) - set(_EXPERIMENT_FIELDS)) if isinstance(value, Mapping) else None
    if unknown is None or unknown or not value:
        raise EstimatorArgumentError(
            f"experiment_config takes a dict of {', '.join(_EXPERIMENT_FIELDS)}, got "
            + (f"unknown keys {unknown}" if unknown else repr(value))
        )
    for key, text in value.items():
        check_limit(f"experiment_config[{key!r}]", "ExperimentEntityName", text)
    if not cloud:
        logger.info("experiment_config applies to SageMaker training jobs only: not used by this local job")
        return None
    return ExperimentConfig(
        experiment_name=value.get("ExperimentName"),
        trial_name=value.get("TrialName"),
        trial_component_display_name=value.get("TrialComponentDisplayName"),
        run_name=value.get("RunName"),
    )
