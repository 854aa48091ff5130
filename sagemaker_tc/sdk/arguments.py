"""Checks of the estimators' arguments, each raising a named error before any job starts.

The estimators (:class:`~sagemaker_tc.sdk.spec.EstimatorSpec`) call these when built, and ``fit()`` calls
:func:`check_logs` (:mod:`sagemaker_tc.sdk.job_status`'s, which the job handles' ``wait()`` share) and
:func:`check_experiment_config` (SDK v2's ``EstimatorBase.fit`` took both) before any upload or job;
the run modes (:mod:`sagemaker_tc.sdk.modes`) call :func:`check_role` at ``fit()``. Each function checks one
argument (or a pair that only make sense together) and returns the value the estimator keeps.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable

from sagemaker_tc.config import TrainingCompilerConfig, checked_config
from sagemaker_tc.contract import ENV_HANG_GRACE
from sagemaker_tc.errors import ConfigError, EstimatorArgumentError, LauncherError, UnsupportedInstanceTypeError
from sagemaker_tc.paths import unwritable_reason
from sagemaker_tc.sdk.instances import InstanceKind, classify_instance
from sagemaker_tc.sdk.job_environment import check_reserved_names
from sagemaker_tc.sdk.job_paths import (
    check_local_uri,
    local_path,
)
from sagemaker_tc.sdk.job_status import check_logs as check_logs  # fit()'s and wait()'s, with the job handles
from sagemaker_tc.sdk.source import SourceSpec, check_user_home
from sagemaker_tc.uris import has_control_character, looks_like_s3, s3_uri_problem

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_PATH = "sagemaker-tc-output"
DEFAULT_MAX_RUN_SECONDS = 24 * 60 * 60  # SageMaker's default MaxRuntimeInSeconds (1 day)
MAX_RUN_SECONDS = 28 * 24 * 60 * 60  # StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days"
# CreateTrainingJob RoleArn: arn:aws[-partition]:iam::<account>:role/<path/name>, 20-2048 chars.
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[\w+=,.@/-]+\Z", re.ASCII)
CLOUD_KINDS = (InstanceKind.GPU, InstanceKind.CPU)
# local_process runs each host as a toolkit process group on this machine; it is for trying a
# multi-host job, not for scale, and each host holds a whole copy of the training script's memory.
MAX_LOCAL_PROCESS_HOSTS = 8
# CreateTrainingJob Environment (SageMaker API reference): at most 100 entries, names matching
# [a-zA-Z_][a-zA-Z0-9_]* of at most 512 characters, values of at most 512 characters.
_ENV_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")
MAX_ENV_ENTRIES = 100
MAX_ENV_CHARS = 512
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


def check_flag(name: str, value: Any) -> bool:
    """Return ``value`` if it is a bool.

    Raises:
        EstimatorArgumentError: any other type (an opt-in is never implied by a truthy string).
    """
    if not isinstance(value, bool):
        raise EstimatorArgumentError(f"{name} must be True or False, got {value!r}")
    return value


def check_s3_uri(name: str, uri: str) -> str:
    """Return ``uri`` if it is a well-formed ``s3://bucket[/prefix]`` URI.

    Raises:
        EstimatorArgumentError: it is not (the message says what is wrong).
    """
    problem = s3_uri_problem(uri)
    if problem is not None:
        raise EstimatorArgumentError(f"{name}={uri!r} is not an S3 URI: {problem}")
    return uri


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
    count_variable = isinstance(instance_count, PipelineVariable)
    instance_count = _count_checked_by_default(instance_count)
    kind = classify_instance(checked, instance_count)
    if kind is InstanceKind.LOCAL_PROCESS and instance_count > MAX_LOCAL_PROCESS_HOSTS:
        raise UnsupportedInstanceTypeError(
            f"instance_count={instance_count} with instance_type='local_process' would start {instance_count} "
            f"training processes on this machine; local_process runs at most {MAX_LOCAL_PROCESS_HOSTS} hosts (it is "
            "for trying a multi-host job): use ml.* instances for more"
        )
    if count_variable and kind not in CLOUD_KINDS:
        raise UnsupportedInstanceTypeError(
            f"instance_count is a pipeline variable, and instance_type {checked!r} is not a SageMaker instance type: "
            "pipelines run SageMaker training jobs (ml.* instance types)"
        )
    if is_parameter and kind not in CLOUD_KINDS:
        raise UnsupportedInstanceTypeError(
            f"a pipeline parameter instance_type must default to an ml.* instance type (pipelines run SageMaker "
            f"training jobs), got default {checked!r}"
        )
    return checked, kind


def _count_checked_by_default(instance_count: Any) -> Any:
    """A pipeline variable ``instance_count`` as its ``default_value`` (what is checked), else as given.

    Raises:
        UnsupportedInstanceTypeError: a pipeline variable without an integer default (a step's
            property has none: the host count must be checkable when the step is defined).
    """
    if not isinstance(instance_count, PipelineVariable):
        return instance_count
    default = getattr(instance_count, "default_value", None)
    if not isinstance(default, int) or isinstance(default, bool):
        name = getattr(instance_count, "name", type(instance_count).__name__)
        raise UnsupportedInstanceTypeError(
            f"instance_count is a pipeline variable ({name}) without an integer default_value: it is checked by its "
            "default when the step is defined (give ParameterInteger(name=..., default_value=1))"
        )
    return default


def check_compiler_config(config: Any) -> TrainingCompilerConfig | None:
    """Return ``config`` if it is None or a :class:`~sagemaker_tc.config.TrainingCompilerConfig` that
    passes its own validators (:func:`~sagemaker_tc.config.checked_config`); SMTC's own class
    (sagemaker-core's ``sagemaker.core.training_compiler_config``) becomes ours with its ``enabled``
    and ``debug``.

    Raises:
        ConfigError: any other object, a config built around its validators
            (``model_copy(update={"backend": "bogus"})``), or SMTC's with a pipeline variable.
    """
    return checked_config(config, argument="compiler_config")


def check_backend(
    config: TrainingCompilerConfig | None, kind: InstanceKind, instance_type: str, *, default_image: bool = False
) -> None:
    """``backend="xla"`` only where an XLA device exists (not on a GPU) and torch_xla is installed.

    PyTorch/XLA deprecated XLA:CUDA in 2.8 and removed it in 2.9 (pytorch/xla PRs #9597, #9598,
    #9603, #9618), so a GPU job compiles with Inductor; ``xla`` runs on PJRT devices (TPU, and the
    CPU: CPU instance types and ``local``/``local_process`` on a CPU machine).

    ``default_image``: the job would run in the AWS PyTorch / Hugging Face training image, which has
    no torch_xla.

    Raises:
        ConfigError: ``backend="xla"`` on a GPU instance type or ``local_gpu``, or in a default image.
    """
    if config is None or not config.compiles or config.backend != "xla":
        return
    if kind is InstanceKind.GPU or instance_type in ("local_gpu",):
        raise ConfigError(
            f"TrainingCompilerConfig(backend='xla') on {instance_type}, a GPU: XLA:CUDA was removed upstream in "
            "torch_xla 2.9 (deprecated in 2.8), so XLA cannot use this GPU; use backend='inductor' (the default) "
            "for GPUs, or a CPU instance type for backend='xla'"
        )
    if default_image and kind is not InstanceKind.LOCAL_PROCESS:
        raise ConfigError(
            f"TrainingCompilerConfig(backend='xla') on {instance_type} needs torch_xla in the training image, and the "
            "AWS PyTorch and Hugging Face training images have none: pass image_uri= of an image with "
            "'sagemaker-tc[xla]' (torch 2.9.0 and torch_xla 2.9.0) installed, or use instance_type='local_process'"
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


def check_environment(environment: Any, *, cloud: bool) -> dict[str, str]:
    """Return ``environment`` as a dict of str -> str (``{}`` for None).

    Names follow CreateTrainingJob's rule (``[a-zA-Z_][a-zA-Z0-9_]*``) in every mode, so a job that
    runs locally runs on SageMaker unchanged; values may not hold a NUL byte (no process environment
    can). SageMaker jobs also get the API's limits: 100 variables, 512 characters per name and value.

    Names the job sets itself are refused, or warned about (:mod:`sagemaker_tc.sdk.job_environment`).

    Raises:
        EstimatorArgumentError: not a mapping of strings to strings, a name or value those rules
            refuse, or a reserved name (``SM_MODEL_DIR``, ``SAGEMAKER_BASE_DIR``, ...).

    Warns:
        ReservedEnvironmentWarning: a name torchrun sets in each process (``RANK``, ...).
    """
    if environment is None:
        return {}
    if not isinstance(environment, Mapping):
        raise EstimatorArgumentError(f"environment must be a dict of str -> str, got {type(environment).__name__}")
    for name, value in environment.items():
        if not isinstance(name, str) or not isinstance(value, str):
            # Name the key and the types, never the value (it may be a secret).
            shown = repr(name) if isinstance(name, str) else f"a {type(name).__name__} key"
            raise EstimatorArgumentError(
                f"environment must be a dict of str -> str: {shown} has a {type(value).__name__} value; pass "
                "every value as a string (e.g. str(8080))"
            )
    for name, value in environment.items():
        if not _ENV_NAME_RE.match(name):
            raise EstimatorArgumentError(
                f"environment variable name {name!r} is not accepted: SageMaker takes names of letters, digits and "
                "'_' that do not start with a digit ([a-zA-Z_][a-zA-Z0-9_]*)"
            )
        if "\x00" in value:
            raise EstimatorArgumentError(f"environment variable {name!r} holds a NUL byte, which no process accepts")
        _check_known_value(name, value)
        if cloud and max(len(name), len(value)) > MAX_ENV_CHARS:
            raise EstimatorArgumentError(
                f"environment variable {name!r}: SageMaker training jobs take names and values of at most "
                f"{MAX_ENV_CHARS} characters"
            )
    check_reserved_names(environment)
    if cloud and len(environment) > MAX_ENV_ENTRIES:
        raise EstimatorArgumentError(
            f"environment has {len(environment)} variables; SageMaker training jobs take at most {MAX_ENV_ENTRIES}"
        )
    return dict(environment)


def check_local_process_path(environment: Mapping[str, Any], machine_path: str | None) -> None:
    """A ``PATH`` in a ``local_process`` job's environment replaces this machine's for the job's
    processes (the toolkit, torchrun, the compilers the script runs): it must keep every folder of
    ``machine_path`` (this machine's ``PATH``), extending it rather than replacing it.

    Raises:
        EstimatorArgumentError: ``environment["PATH"]`` lacks a folder of ``machine_path`` (the job
            would fail with exit 127, "command not found"). The value is never shown.
    """
    given = environment.get("PATH")
    if not isinstance(given, str) or machine_path is None:
        return
    kept = set(given.split(os.pathsep))
    missing = [folder for folder in machine_path.split(os.pathsep) if folder and folder not in kept]
    if missing:
        raise EstimatorArgumentError(
            f"environment['PATH'] leaves out {len(missing)} folder(s) of this machine's PATH: a local_process job "
            "runs this machine's programs (the training toolkit, torchrun, compilers), and without them it fails "
            "with exit 127 (command not found). Extend PATH instead, e.g. '/my/bin:' + os.environ['PATH'], or "
            "leave it out (on SageMaker, environment['PATH'] replaces the container's PATH)"
        )


def _check_known_value(name: str, value: str) -> None:
    """Variables sagemaker-tc reads in the job, checked now rather than after the job started."""
    if name == ENV_HANG_GRACE:
        from sagemaker_tc.container.watchdog import grace_seconds

        try:
            grace_seconds(None, {name: value})
        except LauncherError as error:
            raise EstimatorArgumentError(str(error)) from None


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


def check_max_run(max_run: Any) -> int:
    """``max_run``: the job's time limit, seconds (SageMaker's StoppingCondition.MaxRuntimeInSeconds).
    A pipeline variable is checked by its ``default_value`` (which is returned).

    Raises:
        EstimatorArgumentError: not a positive integer, or more than SageMaker's 28 days; a pipeline
            variable without an integer default.
    """
    if isinstance(max_run, PipelineVariable):
        default = getattr(max_run, "default_value", None)
        if not isinstance(default, int) or isinstance(default, bool):
            raise EstimatorArgumentError(
                f"max_run is a pipeline variable ({getattr(max_run, 'name', type(max_run).__name__)}) without an "
                "integer default_value: it is checked by its default when the step is defined"
            )
        max_run = default
    if not isinstance(max_run, int) or isinstance(max_run, bool) or max_run < 1:
        raise EstimatorArgumentError(f"max_run must be a positive number of seconds, got {max_run!r}")
    if max_run > MAX_RUN_SECONDS:
        raise EstimatorArgumentError(
            f"max_run={max_run} seconds is more than SageMaker allows: a training job runs at most 28 days "
            f"({MAX_RUN_SECONDS} seconds)"
        )
    return max_run


def check_volume_size(volume_size: Any) -> int:
    """``volume_size``: the job's storage volume, GB (SageMaker's ResourceConfig.VolumeSizeInGB, an
    integer >= 0; local modes record it in the request only).

    Raises:
        EstimatorArgumentError: not a whole number of GB.
    """
    if not isinstance(volume_size, int) or isinstance(volume_size, bool) or volume_size < 0:
        raise EstimatorArgumentError(f"volume_size must be a whole number of GB (>= 0), got {volume_size!r}")
    return volume_size


def resolve_cache(config: TrainingCompilerConfig | None, kind: InstanceKind) -> TrainingCompilerConfig | None:
    """The config with a local ``cache`` folder made absolute against the caller's working folder
    (the job runs in another folder), and a local cache refused where the job cannot see it.

    Raises:
        EstimatorArgumentError: a local ``cache`` folder for a SageMaker job or Docker local mode; one
            that is a file, cannot be written (``/dev/null``, ``/proc/...``, read-only), or has
            whitespace around it.
    """
    if config is None or config.cache is None or looks_like_s3(config.cache):
        return config
    if kind is not InstanceKind.LOCAL_PROCESS:
        where = (
            "a SageMaker training job runs on other machines"
            if kind in CLOUD_KINDS
            else ("Docker local mode mounts only the code and the channels into the container")
        )
        raise EstimatorArgumentError(
            f"compiler_config.cache={config.cache!r} is a local folder, which this job cannot see ({where}); use "
            "an s3:// URI such as 's3://my-bucket/sagemaker-tc-cache', or instance_type='local_process'"
        )
    if config.cache != config.cache.strip():
        raise EstimatorArgumentError(
            f"compiler_config.cache={config.cache!r} starts or ends with whitespace; give the folder's path as it is"
        )
    check_user_home("compiler_config.cache", config.cache)
    folder = os.path.abspath(os.path.expanduser(config.cache))
    reason = "it is not a folder" if os.path.exists(folder) and not os.path.isdir(folder) else unwritable_reason(folder)
    if reason is not None:
        raise EstimatorArgumentError(
            f"compiler_config.cache={config.cache!r} cannot be a cache folder: {reason}; give a folder you can write "
            "to (it is created if missing), or an s3:// URI"
        )
    return config.model_copy(update={"cache": folder})


def check_role_characters(role: str) -> None:
    """A role given in any mode holds only ASCII characters, as every IAM role ARN does
    (CreateTrainingJob's ``RoleArn`` pattern), so a job that runs locally runs on SageMaker unchanged.

    Raises:
        EstimatorArgumentError: a character outside ASCII (named by its code point).
    """
    if not role.isascii():
        odd = next(character for character in role if not character.isascii())
        raise EstimatorArgumentError(
            f"role={role!r} holds {odd!r} (U+{ord(odd):04X}), not an ASCII character: IAM role ARNs are ASCII "
            "(CreateTrainingJob's RoleArn pattern), e.g. 'arn:aws:iam::111122223333:role/SageMakerRole'"
        )


def check_role(role: Any) -> str:
    """The IAM role a SageMaker job runs as, checked at ``fit()`` (local modes need none).

    Raises:
        EstimatorArgumentError: no role, or not a full role ARN (CreateTrainingJob's RoleArn).
    """
    if not role:
        raise EstimatorArgumentError("role is required for SageMaker training jobs (an IAM role ARN)")
    if isinstance(role, str):
        check_role_characters(role)
    if not _ROLE_ARN_RE.match(str(role)):
        raise EstimatorArgumentError(
            f"role must be a full IAM role ARN such as 'arn:aws:iam::111122223333:role/SageMakerRole', got {role!r}"
        )
    return role


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
