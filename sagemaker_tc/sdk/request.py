"""The ``CreateTrainingJob`` request, built once from sagemaker-core's typed shapes.

Every way of running a job consumes this one request: the docker-free ``local_process`` engine
reads it like SageMaker would, and the cloud path sends it through sagemaker-core.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from sagemaker.core.shapes import (
    AlgorithmSpecification,
    Channel,
    CheckpointConfig,
    DataSource,
    MetricDefinition,
    OutputDataConfig,
    ResourceConfig,
    S3DataSource,
    StoppingCondition,
)
from sagemaker.core.utils.utils import serialize, snake_to_pascal

from sagemaker_tc import contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk.hyperparameters import encode_hyperparameters, is_pipeline_variable
from sagemaker_tc.uris import has_control_character

# CreateTrainingJob: TrainingJobName matches ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}.
# MetricDefinition (SageMaker API reference): Name 1-255 characters, Regex 1-500.
MAX_METRIC_NAME_CHARS = 255
MAX_METRIC_REGEX_CHARS = 500
_JOB_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")
MAX_JOB_NAME_CHARS = 63


def make_job_name(base_job_name: str, *, now: float | None = None) -> str:
    """``<base>-YYYY-MM-DD-HH-MM-SS-mmm``, as SageMaker SDK v2 names jobs; the base is cut to fit 63 chars.

    Raises:
        EstimatorArgumentError: ``base_job_name`` has characters a job name may not contain.
    """
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    base = base_job_name[: MAX_JOB_NAME_CHARS - len(stamp) - 1].rstrip("-")
    name = f"{base}-{stamp}"
    if not _JOB_NAME_RE.match(name):
        raise EstimatorArgumentError(
            f"base_job_name {base_job_name!r} is not accepted: use letters, digits and '-', "
            "starting with a letter or digit"
        )
    return name


def check_job_name(job_name: str) -> str:
    """Return ``job_name`` if SageMaker accepts it as a TrainingJobName.

    Raises:
        EstimatorArgumentError: not 1-63 letters, digits and '-', starting with a letter or digit.
    """
    if not isinstance(job_name, str) or not _JOB_NAME_RE.match(job_name):
        raise EstimatorArgumentError(
            f"job_name {job_name!r} is not accepted: 1-63 letters, digits and '-', starting with a letter or digit"
        )
    return job_name


def metric_definitions(definitions: Sequence[Mapping[str, str]] | None) -> list[MetricDefinition]:
    """Check SDK-v2-style ``[{"Name": ..., "Regex": ...}]`` and turn them into shapes.

    Raises:
        EstimatorArgumentError: an entry lacks ``Name``/``Regex``, either is not a string of
            CreateTrainingJob's length (Name 1-255, Regex 1-500 characters) without a control
            character, or its regex does not compile.
    """
    shapes = []
    for item in definitions or []:
        if not isinstance(item, Mapping) or set(item) != {"Name", "Regex"}:
            raise EstimatorArgumentError(f"metric_definitions entries are {{'Name': str, 'Regex': str}}, got {item!r}")
        for field, most in (("Name", MAX_METRIC_NAME_CHARS), ("Regex", MAX_METRIC_REGEX_CHARS)):
            value = item[field]
            if not isinstance(value, str) or not value or len(value) > most or has_control_character(value):
                raise EstimatorArgumentError(
                    f"metric_definitions: {field} must be a string of 1-{most} characters (CreateTrainingJob's "
                    f"limit) with no control character such as a newline, got {type(value).__name__} of length "
                    f"{len(value) if isinstance(value, str) else '-'}"
                )
        try:
            re.compile(item["Regex"])
        except re.error as error:
            raise EstimatorArgumentError(f"metric {item['Name']!r} has an invalid Regex: {error}") from None
        shapes.append(MetricDefinition(name=item["Name"], regex=item["Regex"]))
    return shapes


def job_hyperparameters(
    user: Mapping[str, str],
    distribution: Mapping[str, Any],
    compiler_config: TrainingCompilerConfig | None,
    entry_point: str,
) -> dict[str, str]:
    """The job's hyperparameters before the script-mode keys, all JSON-encoded.

    Args:
        user: the user's hyperparameters, already encoded.
        distribution: raw values from :func:`~sagemaker_tc.sdk.distribution.distribution_hyperparameters`.
        compiler_config: adds SMTC's compiler keys and ours (:func:`sagemaker_tc.contract.encode`).
        entry_point: the user's script, relative to the code folder.
    """
    encoded = dict(user)
    encoded.update(encode_hyperparameters(distribution, allow_reserved=True))
    if compiler_config is not None:
        wire = contract.encode(compiler_config, entry_point=entry_point)
        encoded.update(encode_hyperparameters(wire, allow_reserved=True))
    return encoded


def script_mode_hyperparameters(
    *, program: str, submit_directory: str, job_name: str, region: str | None = None
) -> dict[str, str]:
    """The toolkit's script-mode keys, JSON-encoded: the program to run, where the code is, the
    job's name, the log level and (cloud jobs) the region."""
    script_mode: dict[str, Any] = {
        contract.HP_PROGRAM: program,
        contract.HP_SUBMIT_DIRECTORY: submit_directory,
        contract.HP_JOB_NAME: job_name,
        contract.HP_LOG_LEVEL: logging.INFO,
    }
    if region:
        script_mode[contract.HP_REGION] = region
    return encode_hyperparameters(script_mode, allow_reserved=True)


@dataclass(frozen=True)
class TrainingJobRequest:
    """One ``CreateTrainingJob`` request, in sagemaker-core shapes.

    Attributes mirror the API's fields (snake_case).
    """

    training_job_name: str
    algorithm_specification: AlgorithmSpecification
    hyper_parameters: dict[str, str]
    environment: dict[str, str]
    input_data_config: list[Channel]
    output_data_config: OutputDataConfig
    resource_config: ResourceConfig
    stopping_condition: StoppingCondition
    role_arn: str | None = None
    checkpoint_config: CheckpointConfig | None = None
    # The optional top-level fields SDK v2 arguments set (:mod:`sagemaker_tc.sdk.job_settings`),
    # each a sagemaker-core shape (or list of shapes, or a bool); None: not sent.
    vpc_config: Any = None
    tags: Any = None
    enable_network_isolation: bool | None = None
    enable_inter_container_traffic_encryption: bool | None = None
    enable_managed_spot_training: bool | None = None
    retry_strategy: Any = None
    tensor_board_output_config: Any = None
    debug_hook_config: Any = None
    debug_rule_configurations: Any = None
    profiler_config: Any = None
    profiler_rule_configurations: Any = None
    remote_debug_config: Any = None
    infra_check_config: Any = None
    session_chaining_config: Any = None
    experiment_config: Any = None

    def optional_fields(self) -> dict[str, Any]:
        """The optional top-level fields that are set, by their snake_case names (``TrainingJob.create``'s)."""
        required = {"training_job_name", "algorithm_specification", "hyper_parameters", "environment"}
        required |= {"input_data_config", "output_data_config", "resource_config", "stopping_condition", "role_arn"}
        return {
            field.name: getattr(self, field.name)
            for field in fields(self)
            if field.name not in required and getattr(self, field.name) is not None
        }

    def to_api_dict(self) -> dict[str, Any]:
        """The request as the SageMaker API takes it (PascalCase keys), e.g. for logging or a pipeline step."""
        body = {
            "TrainingJobName": self.training_job_name,
            "AlgorithmSpecification": serialize(self.algorithm_specification),
            "HyperParameters": dict(self.hyper_parameters),
            "Environment": dict(self.environment),
            "InputDataConfig": serialize(self.input_data_config),
            "OutputDataConfig": serialize(self.output_data_config),
            "ResourceConfig": serialize(self.resource_config),
            "StoppingCondition": serialize(self.stopping_condition),
        }
        if self.role_arn:
            body["RoleArn"] = self.role_arn
        for name, value in self.optional_fields().items():
            body[snake_to_pascal(name)] = serialize(value)
        return body


def build_request(
    *,
    job_name: str,
    image_uri: str | None,
    hyperparameters: dict[str, str],
    environment: dict[str, str],
    channels: Mapping[str, str | Channel],
    output_path: str,
    instance_type: str,
    instance_count: int,
    volume_size_gb: int,
    max_run_seconds: int,
    role: str | None,
    metrics: list[MetricDefinition],
    checkpoint_s3_uri: str | None = None,
    checkpoint_local_path: str | None = None,
) -> TrainingJobRequest:
    """Assemble the request from already-checked parts (the estimator checks them).

    Args:
        channels: channel name -> URI (``s3://...`` or ``file://...``: S3Prefix, FullyReplicated),
            or a ``Channel`` shape sent as it is (a ``TrainingInput``'s).
        output_path: where ``<job>/output/model.tar.gz`` goes (``s3://`` or ``file://``).
        checkpoint_s3_uri, checkpoint_local_path: SageMaker's CheckpointConfig (the container folder
            defaults to ``/opt/ml/checkpoints``); None for no checkpoint sync.
        max_run_seconds: StoppingCondition.MaxRuntimeInSeconds.
    """
    input_data_config = [
        uri
        if isinstance(uri, Channel)
        else Channel(
            channel_name=name,
            data_source=DataSource(
                s3_data_source=S3DataSource(
                    s3_data_type="S3Prefix", s3_uri=uri, s3_data_distribution_type="FullyReplicated"
                )
            ),
        )
        for name, uri in channels.items()
    ]
    return TrainingJobRequest(
        training_job_name=job_name,
        algorithm_specification=AlgorithmSpecification(
            training_input_mode="File", training_image=image_uri, metric_definitions=metrics or None
        ),
        hyper_parameters=dict(hyperparameters),
        environment=dict(environment),
        input_data_config=input_data_config,
        output_data_config=OutputDataConfig(s3_output_path=output_path),
        resource_config=ResourceConfig(
            instance_type=instance_type, instance_count=instance_count, volume_size_in_gb=volume_size_gb
        ),
        stopping_condition=_stopping_condition(max_run_seconds),
        role_arn=role,
        checkpoint_config=(
            CheckpointConfig(s3_uri=checkpoint_s3_uri, local_path=checkpoint_local_path) if checkpoint_s3_uri else None
        ),
    )


def _stopping_condition(max_run_seconds: Any) -> StoppingCondition:
    """``StoppingCondition`` with ``MaxRuntimeInSeconds``; a pipeline variable (checked by its default
    when the estimator was built) is carried as a reference, as SDK v2 sent it: sagemaker-core's shape
    types the field ``int``, so it is built without validation then."""
    if is_pipeline_variable(max_run_seconds):
        return StoppingCondition.model_construct(max_runtime_in_seconds=max_run_seconds)
    return StoppingCondition(max_runtime_in_seconds=max_run_seconds)


def with_submit_directory(request: TrainingJobRequest, submit_directory: str) -> TrainingJobRequest:
    """``request`` with the toolkit's ``sagemaker_submit_directory`` set to where a run mode staged the
    code (an archive path, a ``file://`` folder or an ``s3://`` URI); every other field unchanged."""
    hyperparameters = dict(request.hyper_parameters)
    hyperparameters.update(
        encode_hyperparameters({contract.HP_SUBMIT_DIRECTORY: submit_directory}, allow_reserved=True)
    )
    return replace(request, hyper_parameters=hyperparameters)
