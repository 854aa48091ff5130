"""``fit()`` inputs: channel names and their data, checked before any job starts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from sagemaker_tc.contract import ENV_CHANNEL_PREFIX
from sagemaker_tc.errors import ChannelNotFoundError
from sagemaker_tc.sdk.local_process import local_path

# Channel names: CreateTrainingJob's ChannelName pattern [A-Za-z0-9\.\-_]+, at most 64 chars.
_CHANNEL_NAME_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
DEFAULT_CHANNEL = "training"  # SDK v2: a bare string input is the "training" channel


def check_channels(inputs: str | Path | Mapping[str, str] | None, *, cloud: bool) -> dict[str, str]:
    """Check ``fit()`` inputs.

    Args:
        inputs: channel name -> data, or a bare string/path for the ``training`` channel (as SDK v2).
        cloud: a SageMaker training job (``s3://`` URIs), else a local mode (local paths, ``file://``).

    Returns:
        Channel name -> URI (``s3://`` for cloud jobs, ``file://`` of the absolute path locally).

    Raises:
        ChannelNotFoundError: not a mapping; a name outside CreateTrainingJob's ChannelName rule
            (1-64 of letters, digits, ``.``, ``-``, ``_``) or two names that differ only in case
            (both would be ``SM_CHANNEL_<NAME>``); a value of the wrong type or scheme; a local
            path that does not exist; an empty path.
    """
    if inputs is None:
        return {}
    if isinstance(inputs, (str, Path)):
        inputs = {DEFAULT_CHANNEL: str(inputs)}
    if not isinstance(inputs, Mapping):
        raise ChannelNotFoundError(f"inputs must be a dict of channel name -> path, got {type(inputs).__name__}")
    channels: dict[str, str] = {}
    for name, uri in inputs.items():
        _check_name(name, channels)
        if not isinstance(uri, (str, Path)):
            raise ChannelNotFoundError(f"channel {name!r}: expected a path or URI, got {uri!r}")
        if not str(uri).strip():  # Path("") is the current folder: never what an empty input meant
            raise ChannelNotFoundError(
                f"channel {name!r}: the path is empty; give a local folder or file (local modes) or an s3:// URI"
            )
        channels[name] = _cloud_uri(name, str(uri)) if cloud else _local_uri(name, str(uri))
    return channels


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
