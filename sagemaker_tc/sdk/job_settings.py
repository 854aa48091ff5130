"""SDK v2's job-level estimator arguments (VPC, KMS, tags, spot, warm pools, retries, Debugger...).

Each is checked at construction against CreateTrainingJob's own limits
(:mod:`sagemaker_tc.sdk.api_limits`) and reaches the request as SDK v2 sends it, in sagemaker-core
shapes (:func:`sagemaker_tc.sdk.settings_request.apply_settings`, which reads :class:`JobSettings`;
this module never imports it). In local modes the cloud-only ones are accepted and logged once
as applying on SageMaker only, so the same notebook runs locally first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError, JobSettingWarning
from sagemaker_tc.sdk import debugger
from sagemaker_tc.sdk.api_limits import check_limit
from sagemaker_tc.sdk.value_checks import check_flag, check_s3_uri
from sagemaker_tc.warn import warn_user

logger = logging.getLogger(__name__)

_FLAGS = (
    "encrypt_inter_container_traffic",
    "enable_network_isolation",
    "use_spot_instances",
    "enable_sagemaker_metrics",
    "disable_output_compression",
    "enable_infra_check",
    "enable_remote_debug",
    "enable_session_tag_chaining",
    "disable_profiler",
)
# Arguments checked as one API shape: SDK v2 name -> CreateTrainingJob shape name.
_LIMITED = {
    "keep_alive_period_in_seconds": "KeepAlivePeriodInSeconds",
    "volume_kms_key": "KmsKeyId",
    "output_kms_key": "KmsKeyId",
    "input_mode": "TrainingInputMode",
    "max_wait": "MaxWaitTimeInSeconds",
    "max_retry_attempts": "MaximumRetryAttempts",
    "training_plan": "TrainingPlanArn",
    "training_repository_access_mode": "TrainingRepositoryAccessMode",
    "training_repository_credentials_provider_arn": "TrainingRepositoryCredentialsProviderArn",
    "model_channel_name": "ChannelName",
}
# Settings that mean something in local modes too (the rest apply on SageMaker only).
_LOCAL_TOO = {"container_log_level", "model_uri", "model_channel_name", "disable_profiler", "debugger_hook_config"}
MAX_TAGS = 50


def _check_list(name: str, shape_name: str, list_shape: str) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise EstimatorArgumentError(f"{name} must be a list of strings, got {value!r}")
        check_limit(name, list_shape, list(value))
        return [check_limit(name, shape_name, item) for item in value]

    return check


def check_tags(value: Any) -> list[dict[str, str]]:
    """SDK v2's tags: ``[{"Key": k, "Value": v}, ...]`` or ``{k: v}``, each key and value in the API's limits.

    Raises:
        EstimatorArgumentError: not such a list; a tag that is not a dict, lacks ``Key`` or ``Value``
            (CreateTrainingJob requires both), or holds a non-string (named by its index, never its
            value); a field other than ``Key``/``Value``; a key or value outside CreateTrainingJob's
            limits (control characters included); an ``aws:`` key; a key given twice.
    """
    if isinstance(value, Mapping):
        value = [{"Key": key, "Value": item} for key, item in value.items()]
    if not isinstance(value, (list, tuple)):
        raise EstimatorArgumentError(f"tags must be a list of {{'Key': str, 'Value': str}} (or a dict), got {value!r}")
    check_limit("tags", "TagList", list(value))
    seen: set[str] = set()
    for index, tag in enumerate(value):
        _check_tag_shape(index, tag)
        unknown = sorted(set(map(str, tag)) - {"Key", "Value"})
        if unknown:
            raise EstimatorArgumentError(f"tags: a tag takes 'Key' and 'Value' only, got also {unknown}")
        check_limit("tags: a key", "TagKey", tag["Key"])
        check_limit(f"tags: the value of {tag['Key']!r}", "TagValue", tag.get("Value", ""))
        if tag["Key"].lower().startswith("aws:"):
            raise EstimatorArgumentError(
                f"tags: the key {tag['Key']!r} starts with 'aws:', which AWS reserves for its own tags; rename it"
            )
        if tag["Key"] in seen:
            raise EstimatorArgumentError(f"tags: the key {tag['Key']!r} is given twice; a job takes each key once")
        seen.add(tag["Key"])
    return [{"Key": tag["Key"], "Value": tag["Value"]} for tag in value]


def _check_tag_shape(index: int, tag: Any) -> None:
    """One tag of ``tags``: a dict with a string ``Key`` and a string ``Value``.

    Raises:
        EstimatorArgumentError: anything else, named by the tag's index (its value is never echoed).
    """
    accepted = "each tag is {'Key': str, 'Value': str} (CreateTrainingJob requires both; 'Value' may be '')"
    if not isinstance(tag, Mapping):
        raise EstimatorArgumentError(f"tags[{index}] is a {type(tag).__name__}: {accepted}")
    for name in ("Key", "Value"):
        if name not in tag:
            raise EstimatorArgumentError(f"tags[{index}] has no {name!r}: {accepted}")
        if not isinstance(tag[name], str):
            raise EstimatorArgumentError(f"tags[{index}][{name!r}] is a {type(tag[name]).__name__}: {accepted}")


def _check_strings(name: str) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise EstimatorArgumentError(f"{name} must be a list of strings, got {value!r}")
        return list(value)

    return check


def _check_log_level(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise EstimatorArgumentError(f"container_log_level must be a logging level such as logging.INFO, got {value!r}")
    return value


def _check_text(name: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise EstimatorArgumentError(f"{name} must be a non-empty string, got {value!r}")
        return value

    return check


_CHECKS: dict[str, Callable[[Any], Any]] = {
    **{
        name: (lambda value, name=name, shape=shape: check_limit(name, shape, value))
        for name, shape in _LIMITED.items()
    },
    **{name: (lambda value, name=name: check_flag(name, value)) for name in _FLAGS},
    "tags": check_tags,
    "subnets": _check_list("subnets", "SubnetId", "Subnets"),
    "security_group_ids": _check_list("security_group_ids", "SecurityGroupId", "VpcSecurityGroupIds"),
    "container_log_level": _check_log_level,
    "container_entry_point": _check_strings("container_entry_point"),
    "container_arguments": _check_strings("container_arguments"),
    "model_uri": _check_text("model_uri"),
    "code_location": lambda value: check_s3_uri("code_location", _check_text("code_location")(value)),
    "tensorboard_output_config": debugger.tensorboard_shape,
    "debugger_hook_config": debugger.hook_shape,
    "profiler_config": debugger.profiler_shape,
    "rules": debugger.rule_shapes,
}
SETTING_NAMES = tuple(_CHECKS)


@dataclass
class JobSettings:
    """The SDK v2 job settings given to an estimator, checked (SDK v2 name -> checked value).

    Values are as the request takes them: lists of ids, tag dicts, sagemaker-core shapes for the
    Debugger/Profiler/TensorBoard objects (None for ``debugger_hook_config=False``).
    """

    values: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        """The checked value of ``name``, or ``default`` when it was not given."""
        return self.values.get(name, default)

    @property
    def cloud_only(self) -> list[str]:
        """The given settings that apply on SageMaker only."""
        hook_given = self.values.get("debugger_hook_config") is not None  # an object, not False
        return [
            name for name in self.values if name not in _LOCAL_TOO or (name == "debugger_hook_config" and hook_given)
        ]


def check_job_settings(
    given: Mapping[str, Any], *, cloud: bool, max_run: int, checkpoint_s3_uri: str | None, compiler_enabled: bool
) -> JobSettings:
    """Check every SDK v2 job setting given (None: not given, as SDK v2's defaults), then the pairs.

    Raises:
        EstimatorArgumentError: a value CreateTrainingJob would refuse (named with the API limit);
            ``subnets`` without ``security_group_ids`` or the reverse; spot without ``max_wait``,
            ``max_wait`` without spot or below ``max_run``; ``container_entry_point`` with the
            compiler on; ``profiler_config`` with ``disable_profiler=True``.
    """
    settings = JobSettings({name: _CHECKS[name](value) for name, value in given.items() if value is not None})
    _check_pairs(settings, max_run=max_run, compiler_enabled=compiler_enabled)
    if cloud:
        _warn_cloud(settings, checkpoint_s3_uri)
    else:
        cloud_only = settings.cloud_only + (["checkpoint_s3_uri"] if checkpoint_s3_uri is not None else [])
        if cloud_only:
            logger.warning(
                "%s: applies on SageMaker only (ml.* instance types); this local job runs without it",
                ", ".join(cloud_only),
            )
    return settings


def _check_pairs(settings: JobSettings, *, max_run: int, compiler_enabled: bool) -> None:
    if ("subnets" in settings.values) != ("security_group_ids" in settings.values):
        raise EstimatorArgumentError(
            "subnets and security_group_ids go together: a training job's VpcConfig needs both"
        )
    spot, max_wait = settings.get("use_spot_instances", False), settings.get("max_wait")
    if spot and max_wait is None:
        raise EstimatorArgumentError(
            "use_spot_instances=True needs max_wait (seconds to wait for spot capacity and run)"
        )
    if max_wait is not None and not spot:
        raise EstimatorArgumentError("max_wait applies to managed spot training only: set use_spot_instances=True")
    if max_wait is not None and max_wait < max_run:
        raise EstimatorArgumentError(
            f"max_wait={max_wait} is less than max_run={max_run}: SageMaker needs max_wait >= max_run"
        )
    if compiler_enabled and "container_entry_point" in settings.values:
        raise EstimatorArgumentError(
            "container_entry_point replaces the training toolkit, which starts the compiler's launcher: drop it, "
            "or pass compiler_config=None"
        )
    if settings.get("disable_profiler") and "profiler_config" in settings.values:
        raise EstimatorArgumentError("profiler_config and disable_profiler=True contradict each other: drop one")
    if settings.get("disable_profiler") and (settings.get("rules") or {}).get("profiler"):
        raise EstimatorArgumentError("ProfilerRule in rules and disable_profiler=True contradict each other: drop one")


def _warn_cloud(settings: JobSettings, checkpoint_s3_uri: str | None) -> None:
    if settings.get("use_spot_instances") and checkpoint_s3_uri is None:
        warn_user(
            "use_spot_instances=True without checkpoint_s3_uri: an interrupted spot job restarts from the beginning; "
            "set checkpoint_s3_uri and save checkpoints to /opt/ml/checkpoints to resume",
            JobSettingWarning,
        )
    warn_debugger_overhead(settings)


def warn_debugger_overhead(settings: JobSettings) -> None:
    """Warn that the Debugger / Profiler settings given add overhead to compiled training (SMTC's
    ``validate`` warned too)."""
    rules = settings.get("rules") or {}
    hooks = [name for name in ("debugger_hook_config", "profiler_config") if settings.get(name)]
    hooks += ["rules"] if any(rules.values()) else []
    if hooks:
        warn_user(
            f"{', '.join(hooks)}: sent as SDK v2 sends them; SageMaker Debugger and Profiler hooks add overhead to "
            "compiled training (SMTC documented it), so leave them out of timing runs",
            JobSettingWarning,
        )
