"""``fit()`` inputs: channel names and their data, checked before any job starts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemaker.core.shapes import Channel

from sagemaker_tc.contract import ENV_CHANNEL_PREFIX
from sagemaker_tc.errors import ChannelNotFoundError
from sagemaker_tc.sdk.inputs import channel_shape, is_channel_object, s3_uri_of
from sagemaker_tc.sdk.local_process import local_path
from sagemaker_tc.sdk.settings_request import model_channel

# Channel names: CreateTrainingJob's ChannelName pattern [A-Za-z0-9\.\-_]+, at most 64 chars.
_CHANNEL_NAME_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
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
            file-system channel in a local mode.
    """
    if inputs is None:
        return {}
    if isinstance(inputs, (str, Path)) or is_channel_object(inputs):
        inputs = {DEFAULT_CHANNEL: inputs}
    if not isinstance(inputs, Mapping):
        raise ChannelNotFoundError(f"inputs must be a dict of channel name -> path, got {type(inputs).__name__}")
    channels: dict[str, str | Channel] = {}
    for name, uri in inputs.items():
        _check_name(name, channels)
        if is_channel_object(uri):
            channels[name] = _object_channel(name, uri, cloud=cloud)
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
    """A TrainingInput/FileSystemInput-like channel: its shape on SageMaker, its data's path locally."""
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
    return _local_uri(name, uri)


def _cloud_uri(name: str, uri: str) -> str:
    if not uri.startswith("s3://"):
        raise ChannelNotFoundError(
            f"channel {name!r}: SageMaker training jobs read s3:// URIs, got {uri!r} "
            "(upload local data to S3 first, or use instance_type='local_process')"
        )
    return uri


def _local_uri(name: str, uri: str) -> str:
    path = local_path(uri)
    if not path.exists():
        raise ChannelNotFoundError(f"channel {name!r}: {uri!r} does not exist")
    return path.as_uri()
