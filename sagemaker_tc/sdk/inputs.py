"""``fit()`` channel objects with SDK v2's signatures: :class:`TrainingInput` and :class:`FileSystemInput`.

SDK v2 users write ``from sagemaker.inputs import TrainingInput``, which needs SDK v2 itself;
sagemaker-tc runs on sagemaker-core, so it exports its own two classes with the same arguments.
Like SDK v2's, each keeps the channel as CreateTrainingJob's ``Channel`` fields in ``config``; any
object with such a ``config`` (SDK v2's own classes included) is accepted by ``fit()``, and each
becomes a sagemaker-core ``Channel`` shape, checked against the API's limits, before any upload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


class TrainingInput:
    """An S3 channel for ``fit()``, as SDK v2's ``sagemaker.inputs.TrainingInput``.

    Args:
        s3_data: ``s3://`` URI of the data (locally: a folder, file or ``file://`` URI).
        distribution: ``FullyReplicated`` (default) or ``ShardedByS3Key``.
        compression: ``Gzip`` or None.
        content_type: the data's MIME type.
        record_wrapping: ``RecordIO`` or None.
        s3_data_type: ``S3Prefix`` (default), ``ManifestFile`` or ``AugmentedManifestFile``.
        instance_groups: not supported (heterogeneous clusters); must be None.
        input_mode: ``File``, ``FastFile`` or ``Pipe`` for this channel (default: the estimator's).
        attribute_names: for ``AugmentedManifestFile``.
        target_attribute_name: kept for SDK v2 compatibility (not a training-job field).
        shuffle_config: an object with ``seed`` (SDK v2's ``ShuffleConfig``), or an int seed.
    """

    def __init__(
        self,
        s3_data: str,
        distribution: str | None = None,
        compression: str | None = None,
        content_type: str | None = None,
        record_wrapping: str | None = None,
        s3_data_type: str = "S3Prefix",
        instance_groups: Any = None,
        input_mode: str | None = None,
        attribute_names: list[str] | None = None,
        target_attribute_name: str | None = None,
        shuffle_config: Any = None,
    ) -> None:
        if instance_groups is not None:
            raise ChannelNotFoundError("TrainingInput(instance_groups=...): heterogeneous clusters are not supported")
        # A pipeline variable (a ParameterString, a processing step's output) stays one: the pipeline
        # definition refers to it (SDK v2's TrainingInput took them).
        uri = s3_data if isinstance(s3_data, PipelineVariable) else str(s3_data)
        source = {"S3DataType": s3_data_type, "S3Uri": uri}
        source["S3DataDistributionType"] = distribution or "FullyReplicated"
        if isinstance(attribute_names, str) or (
            attribute_names is not None
            and (not isinstance(attribute_names, (list, tuple)) or not all(isinstance(a, str) for a in attribute_names))
        ):
            raise ChannelNotFoundError(
                f"TrainingInput(attribute_names=...) is a list of strings, got {type(attribute_names).__name__}; "
                "write attribute_names=['label'] for one attribute"
            )
        if attribute_names:
            source["AttributeNames"] = list(attribute_names)
        self.config: dict[str, Any] = {"DataSource": {"S3DataSource": source}}
        optional = {
            "CompressionType": compression,
            "ContentType": content_type,
            "RecordWrapperType": record_wrapping,
            "InputMode": input_mode,
        }
        self.config.update({key: value for key, value in optional.items() if value is not None})
        if shuffle_config is not None:
            seed = getattr(shuffle_config, "seed", shuffle_config)
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise ChannelNotFoundError(
                    f"TrainingInput(shuffle_config=...) takes an int seed or an object with an int .seed "
                    f"(SDK v2's ShuffleConfig), got {type(seed).__name__}"
                )
            self.config["ShuffleConfig"] = {"Seed": seed}
        self.target_attribute_name = target_attribute_name


class FileSystemInput:
    """An Amazon EFS or FSx for Lustre channel for ``fit()``, as SDK v2's ``sagemaker.inputs.FileSystemInput``.

    Args:
        file_system_id: ``fs-...``.
        file_system_type: ``EFS`` or ``FSxLustre``.
        directory_path: the folder on the file system (FSx paths start with the mount name).
        file_system_access_mode: ``ro`` (default) or ``rw``.
        content_type: the data's MIME type.
    """

    def __init__(
        self,
        file_system_id: str,
        file_system_type: str,
        directory_path: str,
        file_system_access_mode: str = "ro",
        content_type: str | None = None,
    ) -> None:
        source = {
            "FileSystemId": file_system_id,
            "FileSystemType": file_system_type,
            "DirectoryPath": directory_path,
            "FileSystemAccessMode": file_system_access_mode,
        }
        self.config: dict[str, Any] = {"DataSource": {"FileSystemDataSource": source}}
        if content_type is not None:
            self.config["ContentType"] = content_type


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
    check_data_source(name, config["DataSource"])
    for path, shape_name in _CHECKED_FIELDS:
        field = _dig(config, path)
        problem = None if field is None or isinstance(field, PipelineVariable) else limit_problem(shape_name, field)
        if problem is not None:
            raise ChannelNotFoundError(f"channel {name!r}: {'.'.join(path)}={field!r} is not accepted: {problem}")
    return Channel(**transform({**config, "ChannelName": name}, "Channel"))


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
