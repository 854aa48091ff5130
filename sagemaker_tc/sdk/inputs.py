"""``fit()`` channel objects with SDK v2's signatures: :class:`TrainingInput` and :class:`FileSystemInput`.

Both are sagemaker-core's ``sagemaker.core.inputs`` classes (SDK v2's signatures and ``config``
dicts); sagemaker-tc's names are thin subclasses that check their arguments first and take an int
``shuffle_config`` seed as well as SDK v2's ``ShuffleConfig``. Any object with such a ``config``
(SDK v2's or sagemaker-core's own classes included) is accepted by ``fit()``, and each becomes a
sagemaker-core ``Channel`` shape, checked against the API's limits, before any upload.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from sagemaker.core import inputs as core_inputs
from sagemaker.core.helper.pipeline_variable import PipelineVariable
from sagemaker.core.shapes import Channel
from sagemaker.core.utils.utils import transform

from sagemaker_tc.errors import ChannelNotFoundError
from sagemaker_tc.sdk.api_limits import limit_problem

# SDK v2 sends a model_uri as this channel's ContentType (sagemaker.job._Job._format_model_uri_input).
MODEL_CONTENT_TYPE = "application/x-sagemaker-model"
# Channel fields checked against the API model: (path in the config, API shape name).
_CHECKED_FIELDS = (
    (("DataSource", "S3DataSource", "S3DataType"), "S3DataType"),
    (("DataSource", "S3DataSource", "S3DataDistributionType"), "S3DataDistribution"),
    (("DataSource", "FileSystemDataSource", "FileSystemId"), "FileSystemId"),
    (("DataSource", "FileSystemDataSource", "FileSystemType"), "FileSystemType"),
    (("DataSource", "FileSystemDataSource", "FileSystemAccessMode"), "FileSystemAccessMode"),
    (("DataSource", "FileSystemDataSource", "DirectoryPath"), "DirectoryPath"),
    (("CompressionType",), "CompressionType"),
    (("ContentType",), "ContentType"),
    (("RecordWrapperType",), "RecordWrapper"),
    (("InputMode",), "TrainingInputMode"),
)
_HETEROGENEOUS = "heterogeneous clusters are not supported"


class TrainingInput(core_inputs.TrainingInput):
    """An S3 channel for ``fit()``: sagemaker-core's ``TrainingInput`` (SDK v2's signature).

    Takes the same arguments as ``sagemaker.core.inputs.TrainingInput`` (``s3_data``: an ``s3://``
    URI, locally a folder, file or ``file://`` URI; ``distribution``, ``compression``,
    ``content_type``, ``record_wrapping``, ``s3_data_type``, ``input_mode``, ``attribute_names``,
    ``target_attribute_name``, ``shuffle_config``, ...), and builds the same ``config``.

    Differences: ``shuffle_config`` may also be an int seed; ``s3_data`` that is not a pipeline
    variable is turned into a string (a ``pathlib.Path`` works).

    Raises:
        ChannelNotFoundError: ``instance_groups`` given (heterogeneous clusters), ``attribute_names``
            not a list of strings, or a ``shuffle_config`` seed that is not an int.
    """

    def __init__(self, s3_data: Any, *args: Any, **kwargs: Any) -> None:
        arguments = _bind(core_inputs.TrainingInput, s3_data, *args, **kwargs)
        if arguments.get("instance_groups") is not None:
            raise ChannelNotFoundError(f"TrainingInput(instance_groups=...): {_HETEROGENEOUS}")
        check_attribute_names("TrainingInput(attribute_names=...)", arguments.get("attribute_names"))
        shuffle = arguments.get("shuffle_config")
        if shuffle is not None:
            seed = getattr(shuffle, "seed", shuffle)
            check_seed("TrainingInput(shuffle_config=...)", seed)
            arguments["shuffle_config"] = core_inputs.ShuffleConfig(seed)
        # A pipeline variable (a ParameterString, a processing step's output) stays one: the pipeline
        # definition refers to it (SDK v2's TrainingInput took them).
        if not isinstance(s3_data, PipelineVariable):
            arguments["s3_data"] = str(s3_data)
        super().__init__(**arguments)


class FileSystemInput(core_inputs.FileSystemInput):
    """An Amazon EFS or FSx for Lustre channel for ``fit()``: sagemaker-core's ``FileSystemInput``.

    Args: as ``sagemaker.core.inputs.FileSystemInput``: ``file_system_id`` (``fs-...``),
    ``file_system_type`` (``EFS`` or ``FSxLustre``), ``directory_path`` (FSx paths start with the
    mount name), ``file_system_access_mode`` (``ro``, the default, or ``rw``), ``content_type``.

    Raises:
        ChannelNotFoundError: a ``file_system_type`` or ``file_system_access_mode`` sagemaker-core
            refuses (it raises a plain ``ValueError``); the message is sagemaker-core's.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().__init__(*args, **kwargs)
        except ValueError as error:
            raise ChannelNotFoundError(f"FileSystemInput: {error}") from error


def _bind(cls: type, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``cls.__init__``'s arguments by name (a TypeError for ones it does not take, as a call gives)."""
    bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    return {name: value for name, value in list(bound.arguments.items())[1:]}


def check_attribute_names(label: str, names: Any) -> None:
    """``names`` is None or a list/tuple of strings (or pipeline variables), within CreateTrainingJob's
    limits (at most 16 names of 1 to 256 characters).

    Raises:
        ChannelNotFoundError: a bare string, or another type, or a limit broken, named with ``label``.
    """
    if names is None or isinstance(names, PipelineVariable):
        return
    if not (isinstance(names, (list, tuple)) and all(isinstance(a, (str, PipelineVariable)) for a in names)):
        raise ChannelNotFoundError(
            f"{label} is a list of strings, got {type(names).__name__}; write attribute_names=['label'] for one "
            "attribute"
        )
    for shape, value in [("AttributeNames", list(names)), *(("AttributeName", a) for a in names if isinstance(a, str))]:
        problem = limit_problem(shape, value)
        if problem is not None:
            raise ChannelNotFoundError(f"{label} is not accepted: {problem}")


def check_seed(label: str, seed: Any) -> None:
    """``seed`` is a 64-bit int (not a bool) or a pipeline variable.

    Raises:
        ChannelNotFoundError: anything else, or an int beyond 64 bits, named with ``label``.
    """
    if isinstance(seed, PipelineVariable):
        return
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ChannelNotFoundError(
            f"{label} takes an int seed or an object with an int .seed (SDK v2's ShuffleConfig), got "
            f"{type(seed).__name__}"
        )
    if not -(2**63) <= seed < 2**63:
        raise ChannelNotFoundError(f"{label}: {seed} is not accepted: CreateTrainingJob takes a 64-bit seed")


def is_channel_object(value: Any) -> bool:
    """True for a TrainingInput/FileSystemInput (ours, SDK v2's, or any object with such a ``config``)."""
    config = getattr(value, "config", None)
    return isinstance(config, Mapping) and isinstance(config.get("DataSource"), Mapping)


def s3_uri_of(value: Any) -> str | None:
    """The ``S3Uri`` of a TrainingInput-like object, or None (a file-system channel)."""
    return value.config["DataSource"].get("S3DataSource", {}).get("S3Uri")


def channel_shape(name: str, value: Any) -> Channel:
    """The sagemaker-core ``Channel`` for channel ``name``: a TrainingInput/FileSystemInput-like
    object's ``config``, or a plain ``s3://`` URI (S3Prefix, FullyReplicated, as SDK v2 sends it).

    Raises:
        ChannelNotFoundError: a field CreateTrainingJob would refuse (an unknown distribution, a
            malformed file-system id, ...), named with its limit.
    """
    if is_channel_object(value):
        config = dict(value.config)
    else:
        config = TrainingInput(value if isinstance(value, PipelineVariable) else str(value)).config
    check_channel_fields(name, config)
    return Channel(**transform({**config, "ChannelName": name}, "Channel"))


def check_channel_fields(name: str, config: Mapping[str, Any]) -> None:
    """The fields of a TrainingInput/FileSystemInput-like ``config`` that CreateTrainingJob checks
    (its data source, distribution, compression, content type, input mode, ...), checked the same
    way for a local job, whose channel data is a local path.

    Raises:
        ChannelNotFoundError: a field CreateTrainingJob would refuse, named with the channel and its limit.
    """
    check_data_source(name, config["DataSource"])
    check_s3_extras(name, config)
    for path, shape_name in _CHECKED_FIELDS:
        field = _dig(config, path)
        problem = None if field is None or isinstance(field, PipelineVariable) else limit_problem(shape_name, field)
        if problem is not None:
            raise ChannelNotFoundError(f"channel {name!r}: {'.'.join(path)}={field!r} is not accepted: {problem}")


def check_s3_extras(name: str, config: Mapping[str, Any]) -> None:
    """The S3 channel fields sagemaker-tc refuses or whose types the API model does not check early:
    ``InstanceGroupNames`` (heterogeneous clusters), ``AttributeNames``, ``ShuffleConfig.Seed``.

    Raises:
        ChannelNotFoundError: one of them given or of the wrong type, named with the channel.
    """
    source = _dig(config, ("DataSource", "S3DataSource")) or {}
    if source.get("InstanceGroupNames") is not None:
        raise ChannelNotFoundError(f"channel {name!r}: InstanceGroupNames is given: {_HETEROGENEOUS}")
    check_attribute_names(f"channel {name!r}: AttributeNames", source.get("AttributeNames"))
    seed = _dig(config, ("ShuffleConfig", "Seed"))
    if "ShuffleConfig" in config:
        check_seed(f"channel {name!r}: ShuffleConfig.Seed", seed)


_SOURCE_FIELDS = {
    "S3DataSource": ("S3Uri", "S3DataType"),
    "FileSystemDataSource": ("FileSystemId", "FileSystemType", "DirectoryPath", "FileSystemAccessMode"),
}


def check_data_source(name: str, source: Mapping[str, Any]) -> None:
    """``DataSource`` holds exactly one of ``S3DataSource`` or ``FileSystemDataSource``, each with the
    fields CreateTrainingJob requires (checked before any upload).

    Raises:
        ChannelNotFoundError: none or both, another key, or a required field missing or not a string.
    """
    kinds = [key for key in source if key in _SOURCE_FIELDS]
    if len(kinds) != 1 or len(source) != 1:
        raise ChannelNotFoundError(
            f"channel {name!r}: config['DataSource'] holds {sorted(map(str, source)) or 'nothing'}; it takes exactly "
            "one of 'S3DataSource' (use TrainingInput) or 'FileSystemDataSource' (use FileSystemInput)"
        )
    fields = source[kinds[0]]
    for field in _SOURCE_FIELDS[kinds[0]]:
        if isinstance(fields, Mapping) and isinstance(fields.get(field), PipelineVariable):
            continue  # resolved by the pipeline when it runs
        if not isinstance(fields, Mapping) or not isinstance(fields.get(field), str) or not fields[field]:
            raise ChannelNotFoundError(
                f"channel {name!r}: config['DataSource']['{kinds[0]}'] needs {field!r} (a non-empty string); "
                f"it takes {', '.join(_SOURCE_FIELDS[kinds[0]])}"
            )


def _dig(config: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(config, Mapping) or key not in config:
            return None
        config = config[key]
    return config
