"""The SageMaker configuration file's defaults (``~/.config/sagemaker/config.yaml``, the admin file,
``SAGEMAKER_USER_CONFIG_OVERRIDE`` / ``SAGEMAKER_ADMIN_CONFIG_OVERRIDE``), applied by the v2-style
estimators where SDK v2's estimators (since 2.148) applied them.

The files are read and resolved by sagemaker-core (``load_sagemaker_config``, or the session's
``sagemaker_config``; ``resolve_value_from_config`` with its ``TrainingJob`` schema paths): an
argument given explicitly always wins, a configured value fills one left out. SageMaker jobs (and
pipeline steps) take the role, ``VpcConfig``, the output and volume KMS keys, network isolation,
inter-container encryption, the environment and the tags (appended to the given ones, a given key
winning, as SDK v2 appended them); local modes take the environment only (the rest applies on
SageMaker only).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)


def _setting_paths() -> dict[str, str]:
    """SDK v2 job setting -> its path in the configuration file (sagemaker-core's schema constants)."""
    from sagemaker.core.config import config_schema as schema

    return {
        "subnets": schema.TRAINING_JOB_SUBNETS_PATH,
        "security_group_ids": schema.TRAINING_JOB_SECURITY_GROUP_IDS_PATH,
        "output_kms_key": schema.TRAINING_JOB_KMS_KEY_ID_PATH,
        "volume_kms_key": schema.TRAINING_JOB_VOLUME_KMS_KEY_ID_PATH,
        "enable_network_isolation": schema.TRAINING_JOB_ENABLE_NETWORK_ISOLATION_PATH,
        "encrypt_inter_container_traffic": schema.TRAINING_JOB_INTER_CONTAINER_ENCRYPTION_PATH,
    }


def load(sagemaker_config: dict[str, Any] | None) -> dict[str, Any]:
    """The configuration: ``sagemaker_config`` (the given SageMaker session's), else what sagemaker-core's
    ``load_sagemaker_config()`` reads from the default files and the override variables."""
    if sagemaker_config is not None:
        return sagemaker_config
    from sagemaker.core.config.config import load_sagemaker_config

    return load_sagemaker_config() or {}


def _tags_as_list(tags: Any) -> list[Any]:
    if isinstance(tags, Mapping):  # SDK v2's {key: value} form
        return [{"Key": key, "Value": value} for key, value in tags.items()]
    return list(tags or [])


def appended_tags(tags: Any, configured: list[dict[str, str]] | None) -> Any:
    """``tags`` with the configured tags whose key it does not have appended (SDK v2's
    ``_append_sagemaker_config_tags``); ``tags`` as given when nothing is configured."""
    if not configured:
        return tags
    merged = _tags_as_list(tags)
    keys = {tag.get("Key") for tag in merged if isinstance(tag, Mapping)}
    merged += [tag for tag in configured if tag.get("Key") not in keys]
    return merged


def apply(
    config: dict[str, Any],
    *,
    cloud: bool,
    instance_type: str,
    role: Any,
    environment: Any,
    settings: dict[str, Any],
) -> tuple[Any, Any, dict[str, Any]]:
    """``(role, environment, settings)`` with the configuration's defaults filled in where nothing
    was given (``settings``: the SDK v2 job settings given, by name; a new dict is returned).

    The volume KMS key is applied only to instance types that take one (sagemaker-core's
    ``instance_supports_kms``: not the types with instance storage only), as SDK v2 did.
    """
    from sagemaker.core.common_utils import (
        get_sagemaker_config_value,
        instance_supports_kms,
        resolve_value_from_config,
    )
    from sagemaker.core.config.config_schema import (
        TRAINING_JOB_ENVIRONMENT_PATH,
        TRAINING_JOB_ROLE_ARN_PATH,
        TRAINING_JOB_TAGS_PATH,
    )

    def resolve(given: Any, path: str) -> Any:
        # a given value wins without being handed to sagemaker-core (whose logger would see it)
        return given if given is not None else resolve_value_from_config(None, path, sagemaker_config=config)

    settings = dict(settings)
    if not config:
        return role, environment, settings
    environment = resolve(environment, TRAINING_JOB_ENVIRONMENT_PATH)
    if not cloud:
        return role, environment, settings
    role = resolve(role, TRAINING_JOB_ROLE_ARN_PATH)
    for name, path in _setting_paths().items():
        if name == "volume_kms_key" and not instance_supports_kms(instance_type):
            continue
        value = resolve(settings.get(name), path)
        if value is not None:
            settings[name] = value
    configured_tags = get_sagemaker_config_value(None, TRAINING_JOB_TAGS_PATH, sagemaker_config=config)
    if configured_tags:
        settings["tags"] = appended_tags(settings.get("tags"), configured_tags)
    return role, environment, settings
