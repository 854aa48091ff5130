"""Rules about a local job's paths, shared by the checks that run before a job (the estimators'
and ``ModelTrainer``'s arguments) and by the ``local_process`` engine that runs it
(:mod:`sagemaker_tc.sdk.local`): a local path or ``file://`` URI as an absolute path, how two folders
lie to each other, a checkpoint location ``local_process`` syncs, and the container folder a job's
checkpoints live in (apart from its channels, code, model and output folders).

Used with :mod:`sagemaker_tc.paths` (checks of folders a command will write); imports no engine.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.paths import unwritable_reason

# Where a local job's artifacts go when output_path is left out (relative to the working folder).
DEFAULT_OUTPUT_PATH = "sagemaker-tc-output"

DEFAULT_LOCAL_PATH = "/opt/ml/checkpoints"
OPT_ML = PurePosixPath("/opt/ml")
# The job's folders a checkpoint folder may not be, hold or lie inside.
JOB_FOLDERS = tuple(OPT_ML / name for name in ("input", "code", "model", "output"))


def local_path(uri: str) -> Path:
    """A ``file://`` URI or a plain path, as an absolute path.

    Raises:
        EstimatorArgumentError: any other URI scheme (``s3://`` needs the cloud path).
    """
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.netloc + parsed.path)).resolve()
    if parsed.scheme in ("", None) or len(parsed.scheme) == 1:  # plain path (or a Windows drive letter)
        return Path(uri).expanduser().resolve()
    raise EstimatorArgumentError(
        f"{uri!r}: local modes ('local_process', 'local', 'local_gpu') read local paths or file:// URIs only"
    )


def host_folder(local_path: str | None, job_dir: Path) -> Path:
    """Where a host's ``checkpoint_local_path`` lies on this machine: the same path under its job folder.

    Raises:
        EstimatorArgumentError: ``local_path`` is not a folder under ``/opt/ml``.
    """
    path = PurePosixPath(local_path or DEFAULT_LOCAL_PATH)
    if not path.is_absolute() or OPT_ML not in path.parents or ".." in path.parts:
        raise EstimatorArgumentError(
            f"checkpoint_local_path={local_path!r}: local_process maps only folders under /opt/ml (the job's "
            "own folder), e.g. '/opt/ml/checkpoints'"
        )
    return job_dir.joinpath(*path.relative_to(OPT_ML).parts)


def check_container_folder(local_path: str) -> None:
    """``checkpoint_local_path`` (a container path) apart from the job's channels, code, model and
    output folders.

    Raises:
        EstimatorArgumentError: it is, holds or lies inside one of :data:`JOB_FOLDERS`.
    """
    path = PurePosixPath(os.path.normpath(local_path))
    for folder in JOB_FOLDERS:
        if path == folder or folder in path.parents or path in folder.parents:
            raise EstimatorArgumentError(
                f"checkpoint_local_path={local_path!r} overlaps the job's {folder} folder: the checkpoint sync would "
                "copy checkpoints into it and its files out; use a folder of its own such as '/opt/ml/checkpoints'"
            )


def relation(folder: Path, other: Path) -> str | None:
    """How ``folder`` lies to ``other`` (absolute paths): ``"is"``, ``"holds"``, ``"lies inside"``,
    or None when they are apart."""
    if folder == other:
        return "is"
    if folder in other.parents:
        return "holds"
    if other in folder.parents:
        return "lies inside"
    return None


def check_local_uri(argument: str, value: str) -> None:
    """A local path or ``file://`` URI as given: no leading or trailing whitespace (kept as part of
    the name, a folder no one meant), no host in a ``file://`` URI (``file://x/y`` is host ``x``).

    Raises:
        EstimatorArgumentError: either of those.
    """
    if value != value.strip():
        raise EstimatorArgumentError(
            f"{argument}={value!r} starts or ends with whitespace; give the folder's path as it is"
        )
    parsed = urlparse(value)
    if parsed.scheme == "file" and parsed.netloc not in ("", "localhost"):
        raise EstimatorArgumentError(
            f"{argument}={value!r} names the host {parsed.netloc!r}: a file:// URI takes an absolute path "
            f"(file:///abs/folder), or give a plain path such as {parsed.netloc + parsed.path!r}"
        )


def check_location(uri: str, *, output_folder: Path | None, source_root: Path | None) -> None:
    """A checkpoint location ``local_process`` syncs (a path or ``file://`` URI): a folder that can be
    made, apart from the output folder and ``source_dir``.

    Raises:
        EstimatorArgumentError: surrounding whitespace or a ``file://`` URI naming a host
            (:func:`check_local_uri`); a file on its path or
            a place nothing can be created (``/proc/ck``); the output folder or ``source_dir``, or a
            folder holding either.
    """
    check_local_uri("checkpoint_s3_uri", uri)
    parsed = urlparse(uri)
    folder = Path(os.path.abspath(os.path.expanduser(parsed.path if parsed.scheme == "file" else uri)))
    reason = unwritable_reason(folder)
    if reason is not None:
        raise EstimatorArgumentError(
            f"checkpoint_s3_uri={uri!r} cannot be a checkpoint folder: {reason}; give a folder you can write to "
            "(it is created if missing)"
        )
    for name, other in (("the output folder", output_folder), ("source_dir", source_root)):
        if other is not None and relation(folder, other) in ("is", "holds"):
            raise EstimatorArgumentError(
                f"checkpoint_s3_uri={uri!r} is or holds {name} {str(other)!r}: the checkpoint sync would copy "
                "those files into every job's checkpoint folder; give a folder of its own"
            )


def check_local_checkpoints(
    checkpoint_s3_uri: str,
    checkpoint_local_path: str | None,
    *,
    output_folder: Path | None = None,
    source_root: Path | None = None,
) -> None:
    """``local_process``'s checkpoint arguments, at construction: a local location (a ``file://`` URI
    or a path: synced, see :func:`check_location`) or a well-formed ``s3://`` URI (accepted, not
    synced locally; the estimator logs it as applying on SageMaker only, so the same notebook runs
    locally first), and an ``/opt/ml`` folder apart from the job's others.

    Raises:
        EstimatorArgumentError: another scheme (``ftp://``, ``gs://``), a malformed ``s3://`` URI, a
            synced location :func:`check_location` refuses, or a folder outside ``/opt/ml`` or
            overlapping the job's channels, code, model or output folder.
    """
    from sagemaker_tc.uris import s3_uri_problem

    if checkpoint_local_path is not None:
        check_container_folder(checkpoint_local_path)
    if not is_synced_locally(checkpoint_s3_uri):
        problem = s3_uri_problem(checkpoint_s3_uri)
        if problem is not None:
            raise EstimatorArgumentError(
                f"checkpoint_s3_uri={checkpoint_s3_uri!r}: local_process takes a local folder, a file:// URI or an "
                f"s3:// URI (SageMaker only); {problem}"
            )
        return
    check_location(checkpoint_s3_uri, output_folder=output_folder, source_root=source_root)
    host_folder(checkpoint_local_path, Path("/"))


def is_synced_locally(checkpoint_s3_uri: str | None) -> bool:
    """True for a checkpoint location ``local_process`` syncs: a ``file://`` URI or a path (not
    ``s3://`` or another remote scheme)."""
    if checkpoint_s3_uri is None:
        return False
    return "://" not in checkpoint_s3_uri or checkpoint_s3_uri.startswith("file://")
