"""Rules about where a job reads and writes, the same for both front ends: the estimators
(:class:`~sagemaker_tc.sdk.spec.EstimatorSpec`, and ``fit()``'s channels) and ``ModelTrainer``
(:mod:`sagemaker_tc.sdk.v3.checks`, which reads its ``CheckpointConfig`` and ``SourceCode`` into these
values): a local compile cache apart from the job's other folders, the checkpoint location and
container folder, and the folders sagemaker-tc writes that are never packed into the code.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk.instances import InstanceKind
from sagemaker_tc.sdk.job_paths import (
    DEFAULT_OUTPUT_PATH,
    check_container_folder,
    check_local_checkpoints,
    is_synced_locally,
    local_path,
    relation,
)
from sagemaker_tc.sdk.value_checks import check_s3_uri
from sagemaker_tc.uris import looks_like_s3

_CACHE_APART = (
    "give the cache a folder of its own: not the output folder or source_dir nor a folder holding either, and "
    "apart from the checkpoint location (a folder inside source_dir or inside the output folder is fine: "
    "sagemaker-tc never packs or syncs it)"
)


def check_cache_apart_from_channels(cache: str | None, channels: Mapping[str, Any]) -> None:
    """A local ``compiler_config.cache`` (``local_process``) apart from the folders of the job's
    channels: it is not, does not hold and does not lie inside one (its archives and ``meta.json``
    would be written into the user's data). Checked at ``fit()``, before any job folder is made.

    Args:
        cache: the config's cache (None or an ``s3://`` URI: nothing to check).
        channels: channel name -> its local path or ``file://`` URI (other values are skipped).

    Raises:
        EstimatorArgumentError: the cache overlaps a channel's folder, naming both.
    """
    if cache is None or looks_like_s3(cache):
        return
    folder = local_path(cache).resolve()
    for name, uri in channels.items():
        if not isinstance(uri, str) or looks_like_s3(uri):
            continue
        data = local_path(uri).resolve()
        how = relation(folder, data)
        if how is not None:
            raise EstimatorArgumentError(
                f"compiler_config.cache={cache!r} {how} the {name!r} channel's folder {str(data)!r}: the cache would "
                "write its archives into your data; give the cache a folder of its own such as './compile-cache'"
            )


def check_cache_apart(cache: str | None, *, output_path: Any, checkpoint_uri: Any, source_root: Path | None) -> None:
    """A local ``compiler_config.cache`` (``local_process``) apart from the job's other folders: it
    is not, and does not hold, the output folder or ``source_dir`` (the cache's archives would be
    written among the jobs' folders or the code); it is not, does not hold and does not lie inside a
    local checkpoint location (the checkpoint sync would copy the cache into every job's checkpoint
    folder, or checkpoints into the cache). Inside ``source_dir`` or the output folder is fine.

    Args:
        cache: the config's cache (None or an ``s3://`` URI: nothing to check).
        output_path: the local folder the job's folder is made in (``output_path``,
            ``local_container_root``); None when unknown.
        checkpoint_uri: the checkpoint location (checked only when synced locally).
        source_root: the local ``source_dir`` (absolute), or None.

    Raises:
        EstimatorArgumentError: the folders overlap as above, naming both and what is accepted.
    """
    if cache is None or looks_like_s3(cache):
        return
    folder = local_path(cache)
    synced = isinstance(checkpoint_uri, str) and is_synced_locally(checkpoint_uri)
    checkpoint = local_path(checkpoint_uri) if synced else None
    others = (
        ("the output folder", local_path(output_path) if isinstance(output_path, str) else None, ("is", "holds")),
        ("the checkpoint location", checkpoint, ("is", "holds", "lies inside")),
        ("source_dir", source_root.resolve() if source_root is not None else None, ("is", "holds")),
    )
    for name, other, refused in others:
        how = relation(folder, other) if other is not None else None
        if how in refused:
            raise EstimatorArgumentError(
                f"compiler_config.cache={cache!r} {how} {name} {str(other)!r}: its compile archives would mix "
                f"with that folder's files; {_CACHE_APART}"
            )


def check_checkpoints(
    checkpoint_s3_uri: Any,
    checkpoint_local_path: Any,
    *,
    cloud: bool,
    kind: InstanceKind | None = None,
    output_path: str | None = None,
    source_root: Path | None = None,
) -> None:
    """SageMaker's checkpoint sync: an ``s3://`` URI, and optionally the container folder synced with it
    (``local_process``: a local folder, see :mod:`~sagemaker_tc.sdk.job_paths`). The container
    folder never overlaps the job's channels, code, model or output folder; the URI is never
    ``output_path`` (or ``source_dir`` for a local one).

    Raises:
        EstimatorArgumentError: a non-``s3://`` URI, a local path without a URI, overlapping folders
            (see above). (Local modes accept a local path without URI: the same notebook runs locally first.)
    """
    if kind is InstanceKind.LOCAL_PROCESS and checkpoint_s3_uri is not None:
        output_folder = local_path(output_path) if output_path is not None else None
        check_local_checkpoints(
            checkpoint_s3_uri, checkpoint_local_path, output_folder=output_folder, source_root=source_root
        )
        return
    if checkpoint_local_path is not None:
        check_container_folder(checkpoint_local_path)
    if checkpoint_s3_uri is not None and output_path is not None and _same_s3(checkpoint_s3_uri, output_path):
        raise EstimatorArgumentError(
            f"checkpoint_s3_uri={checkpoint_s3_uri!r} is output_path: the job's artifacts and its checkpoints "
            "would mix; give a prefix of its own such as output_path + '/checkpoints'"
        )
    if checkpoint_s3_uri is not None and not str(checkpoint_s3_uri).startswith("s3://"):
        raise EstimatorArgumentError(f"checkpoint_s3_uri must be an s3:// URI, got {checkpoint_s3_uri!r}")
    if checkpoint_s3_uri is not None:
        check_s3_uri("checkpoint_s3_uri", checkpoint_s3_uri)
    if checkpoint_local_path is not None and checkpoint_s3_uri is None:
        raise EstimatorArgumentError("checkpoint_local_path needs checkpoint_s3_uri (the S3 side of the sync)")


def _same_s3(first: str, second: str) -> bool:
    return str(first).rstrip("/") == str(second).rstrip("/")


def own_folders(
    output_path: str | None, cache: str | None, checkpoint_s3_uri: str | None, *, cloud: bool
) -> tuple[Path, ...]:
    """The local folders sagemaker-tc writes for a job, never packed into its code wherever they lie:
    the default output folder (earlier local jobs' outputs), the local ``output_path``, a local
    ``compiler_config.cache`` and a local checkpoint location (absolute paths)."""
    folders = [local_path(DEFAULT_OUTPUT_PATH)]
    if not cloud and output_path is not None:
        folders.append(local_path(output_path))
    if cache is not None and not looks_like_s3(cache):
        folders.append(local_path(cache))
    if checkpoint_s3_uri is not None and is_synced_locally(checkpoint_s3_uri):
        folders.append(local_path(checkpoint_s3_uri))
    return tuple(dict.fromkeys(folders))
