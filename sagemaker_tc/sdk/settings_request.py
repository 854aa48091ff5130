"""Where each SDK v2 job setting goes in the ``CreateTrainingJob`` request, as SDK v2 sends it.

SDK v2 field mapping (``sagemaker.estimator.EstimatorBase`` / ``sagemaker.job._Job`` /
``sagemaker.session.Session.train`` in sagemaker 2.x):

- ``input_mode`` -> ``AlgorithmSpecification.TrainingInputMode``
- ``enable_sagemaker_metrics`` -> ``AlgorithmSpecification.EnableSageMakerMetricsTimeSeries``
- ``container_entry_point``/``container_arguments`` -> ``AlgorithmSpecification.ContainerEntrypoint``/``...Arguments``
- ``training_repository_access_mode`` -> ``AlgorithmSpecification.TrainingImageConfig.TrainingRepositoryAccessMode``
- ``training_repository_credentials_provider_arn`` -> ``...TrainingImageConfig.TrainingRepositoryAuthConfig``
- ``output_kms_key`` -> ``OutputDataConfig.KmsKeyId``
- ``disable_output_compression=True`` -> ``OutputDataConfig.CompressionType="NONE"``
- ``volume_kms_key`` -> ``ResourceConfig.VolumeKmsKeyId``
- ``keep_alive_period_in_seconds`` -> ``ResourceConfig.KeepAlivePeriodInSeconds``
- ``training_plan`` -> ``ResourceConfig.TrainingPlanArn``
- ``max_wait`` -> ``StoppingCondition.MaxWaitTimeInSeconds``
- ``use_spot_instances=True`` -> ``EnableManagedSpotTraining``
- ``subnets`` + ``security_group_ids`` -> ``VpcConfig.Subnets`` + ``VpcConfig.SecurityGroupIds``
- ``tags`` -> ``Tags``
- ``enable_network_isolation=True`` -> ``EnableNetworkIsolation``
- ``encrypt_inter_container_traffic=True`` -> ``EnableInterContainerTrafficEncryption``
- ``max_retry_attempts`` -> ``RetryStrategy.MaximumRetryAttempts``
- ``tensorboard_output_config`` -> ``TensorBoardOutputConfig``
- ``debugger_hook_config`` (an object) -> ``DebugHookConfig``
- ``rules`` -> ``DebugRuleConfigurations`` / ``ProfilerRuleConfigurations``
- ``profiler_config`` -> ``ProfilerConfig``; ``disable_profiler=True`` -> ``ProfilerConfig.DisableProfiler``
  (SDK v2's ``EstimatorBase._prepare_profiler_for_training`` sends a disabled ProfilerConfig then)
- ``enable_remote_debug`` -> ``RemoteDebugConfig.EnableRemoteDebug``
- ``enable_infra_check`` -> ``InfraCheckConfig.EnableInfraCheck``
- ``enable_session_tag_chaining`` -> ``SessionChainingConfig.EnableSessionTagChaining``
- ``container_log_level`` -> ``HyperParameters.sagemaker_container_log_level``
- ``model_uri``/``model_channel_name`` -> a channel (see :func:`model_channel`)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from sagemaker.core.shapes import (
    InfraCheckConfig,
    ProfilerConfig,
    RemoteDebugConfig,
    RetryStrategy,
    SessionChainingConfig,
    Tag,
    TrainingImageConfig,
    TrainingRepositoryAuthConfig,
    VpcConfig,
)

from sagemaker_tc import contract
from sagemaker_tc.errors import ChannelNotFoundError
from sagemaker_tc.sdk import debugger
from sagemaker_tc.sdk.inputs import MODEL_CONTENT_TYPE, TrainingInput, channel_shape

if TYPE_CHECKING:
    from sagemaker_tc.sdk.job_settings import JobSettings
    from sagemaker_tc.sdk.request import TrainingJobRequest


def _updated(shape, **changes):
    """``shape`` with the changes that are not None (a sagemaker-core shape is a pydantic model)."""
    changes = {name: value for name, value in changes.items() if value is not None}
    return shape.model_copy(update=changes) if changes else shape


def _image_config(settings: JobSettings) -> TrainingImageConfig | None:
    mode = settings.get("training_repository_access_mode")
    provider = settings.get("training_repository_credentials_provider_arn")
    if mode is None:
        return None
    auth = TrainingRepositoryAuthConfig(training_repository_credentials_provider_arn=provider) if provider else None
    return TrainingImageConfig(training_repository_access_mode=mode, training_repository_auth_config=auth)


def _flag_config(settings: JobSettings, name: str, shape: type, field: str):
    value = settings.get(name)
    return None if value is None else shape(**{field: value})


def _top_level(settings: JobSettings, *, output_path: str, region: str | None) -> dict[str, Any]:
    """The request's optional top-level fields the settings set (Debugger and Profiler ones completed
    with the job's ``output_path`` and ``region``, as SDK v2 did)."""
    get = settings.get
    rules = get("rules") or {}
    retries = get("max_retry_attempts")
    off = bool(get("disable_profiler"))
    vpc = None
    if get("subnets") is not None:
        vpc = VpcConfig(subnets=get("subnets"), security_group_ids=get("security_group_ids"))
    return {
        "vpc_config": vpc,
        "tags": [Tag(key=tag["Key"], value=tag["Value"]) for tag in get("tags")] if get("tags") else None,
        "enable_network_isolation": True if get("enable_network_isolation") else None,
        "enable_inter_container_traffic_encryption": True if get("encrypt_inter_container_traffic") else None,
        "enable_managed_spot_training": True if get("use_spot_instances") else None,
        "retry_strategy": RetryStrategy(maximum_retry_attempts=retries) if retries is not None else None,
        "tensor_board_output_config": get("tensorboard_output_config"),
        **debugger.complete(
            {
                "debug_hook_config": get("debugger_hook_config"),
                "debug_rule_configurations": rules.get("debug"),
                "profiler_config": get("profiler_config") or (ProfilerConfig(disable_profiler=True) if off else None),
                "profiler_rule_configurations": rules.get("profiler"),
                "rule_collections": rules.get("collections"),
            },
            hook_given="debugger_hook_config" in settings.values,
            output_path=output_path,
            region=region,
        ),
        "remote_debug_config": _flag_config(settings, "enable_remote_debug", RemoteDebugConfig, "enable_remote_debug"),
        "infra_check_config": _flag_config(settings, "enable_infra_check", InfraCheckConfig, "enable_infra_check"),
        "session_chaining_config": _flag_config(
            settings, "enable_session_tag_chaining", SessionChainingConfig, "enable_session_tag_chaining"
        ),
    }


def apply_settings(
    request: TrainingJobRequest, settings: JobSettings, *, cloud: bool, region: str | None = None
) -> TrainingJobRequest:
    """``request`` with ``settings`` in it. Local modes take only the container log level (the
    toolkit reads it everywhere); every other field applies on SageMaker only (``region``: the
    job's, for the Debugger rule images)."""
    get = settings.get
    hyperparameters = dict(request.hyper_parameters)
    if get("container_log_level") is not None:
        hyperparameters[contract.HP_LOG_LEVEL] = str(get("container_log_level"))
    if not cloud:
        return dataclasses.replace(request, hyper_parameters=hyperparameters)
    algorithm = _updated(
        request.algorithm_specification,
        training_input_mode=get("input_mode"),
        enable_sage_maker_metrics_time_series=get("enable_sagemaker_metrics"),
        container_entrypoint=get("container_entry_point"),
        container_arguments=get("container_arguments"),
        training_image_config=_image_config(settings),
    )
    output = _updated(
        request.output_data_config,
        kms_key_id=get("output_kms_key"),
        compression_type="NONE" if get("disable_output_compression") else None,
    )
    resources = _updated(
        request.resource_config,
        volume_kms_key_id=get("volume_kms_key"),
        keep_alive_period_in_seconds=get("keep_alive_period_in_seconds"),
        training_plan_arn=get("training_plan"),
    )
    stopping = _updated(request.stopping_condition, max_wait_time_in_seconds=get("max_wait"))
    top = _top_level(settings, output_path=request.output_data_config.s3_output_path, region=region)
    top = {name: value for name, value in top.items() if value is not None}
    return dataclasses.replace(
        request,
        hyper_parameters=hyperparameters,
        algorithm_specification=algorithm,
        output_data_config=output,
        resource_config=resources,
        stopping_condition=stopping,
        **top,
    )


def model_channel(settings: JobSettings, channels: dict, *, cloud: bool, local_uri) -> dict:
    """``channels`` plus ``model_uri`` as channel ``model_channel_name`` (default ``model``), as SDK v2
    adds it: on SageMaker an S3Prefix, FullyReplicated, File-mode channel with ContentType
    ``application/x-sagemaker-model``; locally the folder or file, like any other channel.

    Raises:
        ChannelNotFoundError: the channel name is taken by a ``fit()`` input; a cloud ``model_uri``
            that is not ``s3://``; a local one that does not exist.
    """
    uri = settings.get("model_uri")
    if uri is None:
        return channels
    name = settings.get("model_channel_name", "model")
    if name in channels:
        raise ChannelNotFoundError(
            f"model_uri goes to channel {name!r}, which fit() inputs also name: rename one (model_channel_name=)"
        )
    if not cloud:
        return {**channels, name: local_uri(name, uri)}
    if not uri.startswith("s3://"):
        raise ChannelNotFoundError(f"model_uri for a SageMaker training job is an s3:// URI, got {uri!r}")
    model = TrainingInput(uri, distribution="FullyReplicated", content_type=MODEL_CONTENT_TYPE, input_mode="File")
    return {**channels, name: channel_shape(name, model)}
