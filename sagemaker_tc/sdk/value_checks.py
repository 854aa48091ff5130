"""Checks of single values both front ends take (the estimators' arguments, ``ModelTrainer``'s
fields): flags, S3 URIs, the IAM role and the job's time limit, each raising a named error."""

from __future__ import annotations

import re
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.uris import s3_uri_problem

DEFAULT_MAX_RUN_SECONDS = 24 * 60 * 60  # SageMaker's default MaxRuntimeInSeconds (1 day)
MAX_RUN_SECONDS = 28 * 24 * 60 * 60  # StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days"
# CreateTrainingJob RoleArn: arn:aws[-partition]:iam::<account>:role/<path/name>, 20-2048 chars.
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[\w+=,.@/-]+\Z", re.ASCII)


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
