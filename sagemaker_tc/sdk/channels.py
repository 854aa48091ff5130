"""``fit()`` inputs: channel names and their data, checked before any job starts."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable
from sagemaker.core.shapes import Channel
from sagemaker.core.utils.utils import Unassigned

from sagemaker_tc.contract import ENV_CHANNEL_PREFIX
from sagemaker_tc.errors import ChannelNotFoundError
from sagemaker_tc.sdk.api_limits import limit_maximum, warn_limit
from sagemaker_tc.sdk.inputs import channel_shape, check_channel_fields, is_channel_object, s3_uri_of
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.settings_request import model_channel
from sagemaker_tc.uris import s3_uri_problem

logger = logging.getLogger(__name__)

# Channel names: CreateTrainingJob's ChannelName pattern [A-Za-z0-9\.\-_]+, at most 64 chars.
_CHANNEL_NAME_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}\Z")
DEFAULT_CHANNEL = "training"  # SDK v2: a bare string input is the "training" channel


def check_channels(inputs: Any, *, cloud: bool) -> dict[str, str | Channel]:
    """Check ``fit()`` inputs.

    Args:
        inputs: channel name -> data, or a bare string/path/``TrainingInput`` for the ``training``
            channel (as SDK v2). Data is a path or URI, a :class:`~sagemaker_tc.sdk.inputs.TrainingInput`
            or :class:`~sagemaker_tc.sdk.inputs.FileSystemInput` (or SDK v2's own, or any object
            with their ``config``).
        cloud: a SageMaker training job (``s3://`` URIs), else a local mode (local paths, ``file://``).

    Returns:
        Channel name -> URI (``s3://`` for cloud jobs, ``file://`` of the absolute path locally), or
        for a channel object on a cloud job, its sagemaker-core ``Channel`` (every field as given).

    Raises:
        ChannelNotFoundError: not a mapping; a name outside CreateTrainingJob's ChannelName rule
            (1-64 of letters, digits, ``.``, ``-``, ``_``) or two names that differ only in case
            (both would be ``SM_CHANNEL_<NAME>``); a value of the wrong type or scheme; a local
            path that does not exist; an empty path; a channel field CreateTrainingJob refuses; a
            file-system channel in a local mode; more channels than a SageMaker job takes (20; a local
            job runs with them and warns, :class:`~sagemaker_tc.errors.JobSettingWarning`).
    """
    if inputs is None:
        return {}
    if isinstance(inputs, (str, Path)) or is_channel_object(inputs):
        inputs = {DEFAULT_CHANNEL: inputs}
    if not isinstance(inputs, Mapping):
        raise ChannelNotFoundError(f"inputs must be a dict of channel name -> path, got {type(inputs).__name__}")
    most = limit_maximum("InputDataConfig")
    if cloud and most is not None and len(inputs) > most:
        raise ChannelNotFoundError(
            f"inputs has {len(inputs)} channels; a SageMaker training job takes at most {most} (CreateTrainingJob's "
            "InputDataConfig): put several data sets under one S3 prefix and read its subfolders"
        )
    if not cloud:
        warn_limit("inputs", "InputDataConfig", list(inputs))  # runs locally, told it would not on SageMaker
    channels: dict[str, str | Channel] = {}
    for name, uri in inputs.items():
        _check_name(name, channels)
        if is_channel_object(uri):
            channels[name] = _object_channel(name, uri, cloud=cloud)
            continue
        if isinstance(uri, PipelineVariable):
            channels[name] = _pipeline_channel(name, uri, cloud=cloud)
            continue
        if not isinstance(uri, (str, Path)):
            raise ChannelNotFoundError(f"channel {name!r}: expected a path or URI, got {uri!r}")
        if not str(uri).strip():  # Path("") is the current folder: never what an empty input meant
            raise ChannelNotFoundError(
                f"channel {name!r}: the path is empty; give a local folder or file (local modes) or an s3:// URI"
            )
        channels[name] = _cloud_uri(name, str(uri)) if cloud else _local_uri(name, str(uri))
    return channels


def estimator_channels(estimator: Any, inputs: Any, *, cloud: bool) -> dict[str, str | Channel]:
    """:func:`check_channels` plus the estimator's ``model_uri`` channel (SDK v2's ``model_channel_name``).

    Raises:
        ChannelNotFoundError: see :func:`check_channels` and
            :func:`~sagemaker_tc.sdk.settings_request.model_channel`.
    """
    channels = check_channels(inputs, cloud=cloud)
    return model_channel(estimator.settings, channels, cloud=cloud, local_uri=_local_uri)


def check_file_system_vpc(channels: Mapping[str, Any], subnets: Any) -> None:
    """A SageMaker job reads an EFS or FSx for Lustre channel through the VPC that holds the file
    system, so a file-system channel needs the job's VPC config (``subnets`` and ``security_group_ids``).

    Args:
        channels: channel name -> ``s3://`` URI or sagemaker-core ``Channel`` (as :func:`check_channels`
            returns them for a cloud job).
        subnets: the job's subnets (None or empty: no VPC config).

    Raises:
        ChannelNotFoundError: a file-system channel without subnets.
    """
    if subnets:
        return
    for name, channel in channels.items():
        source = getattr(getattr(channel, "data_source", None), "file_system_data_source", None)
        if isinstance(channel, Channel) and source is not None and not isinstance(source, Unassigned):
            raise ChannelNotFoundError(
                f"channel {name!r} is a file system (EFS/FSx for Lustre): a SageMaker training job mounts it "
                "through the file system's VPC, so pass subnets=[...] and security_group_ids=[...] of that VPC "
                "(or copy the data to S3 and pass an s3:// URI)"
            )


def _check_name(name: object, seen: Mapping[str, str]) -> None:
    if not isinstance(name, str) or not _CHANNEL_NAME_RE.match(name) or name in (".", ".."):
        raise ChannelNotFoundError(
            f"channel name {name!r} is not accepted: 1-64 characters of letters, digits, '.', '-', '_' "
            "(not '.' or '..')"
        )
    clash = next((other for other in seen if other.upper() == name.upper()), None)
    if clash is not None:
        raise ChannelNotFoundError(
            f"channel names {clash!r} and {name!r} both become {ENV_CHANNEL_PREFIX}{name.upper()}: rename one"
        )


def _object_channel(name: str, value: Any, *, cloud: bool) -> str | Channel:
    """A TrainingInput/FileSystemInput-like channel: its shape on SageMaker, its data's path locally
    (its fields checked as SageMaker checks them in both)."""
    check_channel_fields(name, value.config)
    uri = s3_uri_of(value)
    if cloud:
        if uri is not None:
            _cloud_uri(name, uri)
        return channel_shape(name, value)
    if uri is None:
        raise ChannelNotFoundError(
            f"channel {name!r}: a FileSystemInput (EFS/FSx) is mounted by SageMaker training jobs only; "
            "locally pass the folder's path instead"
        )
    if not uri.strip():
        raise ChannelNotFoundError(f"channel {name!r}: the path is empty")
    if value.config.get("InputMode") == "Pipe":
        logger.warning(
            "channel %r: input_mode='Pipe' applies on SageMaker only (ml.* instance types); this local job reads "
            "the channel as files (File mode)",
            name,
        )
    return _local_uri(name, uri)


def _pipeline_channel(name: str, value: PipelineVariable, *, cloud: bool) -> Channel:
    """A pipeline variable as a channel's data (a ``ParameterString``, a step's output): checked by its
    ``default_value`` when it has one, sent as a reference in the pipeline definition."""
    if not cloud:
        raise ChannelNotFoundError(
            f"channel {name!r} is a pipeline variable: pipelines run SageMaker training jobs (ml.* instance types)"
        )
    default = getattr(value, "default_value", None)
    if isinstance(default, str):
        _cloud_uri(name, default)
    return channel_shape(name, value)


def is_pipeline_channel(channel: Any) -> bool:
    """True for a channel whose data is a pipeline variable (it exists only in a pipeline definition)."""
    uri = s3_uri_of(channel) if is_channel_object(channel) else None
    if isinstance(channel, Channel):
        uri = channel.data_source.s3_data_source.s3_uri if channel.data_source.s3_data_source else None
    return isinstance(uri if uri is not None else channel, PipelineVariable)


def _cloud_uri(name: str, uri: str) -> str:
    if isinstance(uri, PipelineVariable):  # a TrainingInput(s3_data=<pipeline variable>)
        default = getattr(uri, "default_value", None)
        if isinstance(default, str):
            _cloud_uri(name, default)
        return uri
    if not uri.startswith("s3://"):
        raise ChannelNotFoundError(
            f"channel {name!r}: SageMaker training jobs read s3:// URIs, got {uri!r} "
            "(upload local data to S3 first, or use instance_type='local_process')"
        )
    problem = s3_uri_problem(uri)
    if problem is not None:
        raise ChannelNotFoundError(f"channel {name!r}: {uri!r} is not an S3 URI: {problem}")
    return uri


def _local_uri(name: str, uri: str) -> str:
    try:
        path = local_path(uri)
        found = path.exists()
    except (OSError, RuntimeError) as error:  # a link loop (RuntimeError before Python 3.13), no permission
        raise ChannelNotFoundError(f"channel {name!r}: {uri!r} cannot be read ({error})") from None
    if not found:
        raise ChannelNotFoundError(f"channel {name!r}: {uri!r} does not exist")
    if not (path.is_dir() or path.is_file()):
        raise ChannelNotFoundError(
            f"channel {name!r}: {uri!r} is neither a folder nor a file (a device, a pipe or a socket); a local "
            "channel's data is a folder or one file"
        )
    return path.as_uri()
