"""Source packaging: the user's ``entry_point``/``source_dir`` plus the injected launcher, as
``sourcedir.tar.gz`` (the archive the toolkit unpacks into ``/opt/ml/code``)."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sagemaker_tc
from sagemaker_tc.contract import LAUNCHER_PROGRAM
from sagemaker_tc.errors import EstimatorArgumentError, SourceNotFoundError

LAUNCHER_SOURCE = '''"""Injected by sagemaker-tc: configures the training compiler, then runs your entry point."""

from sagemaker_tc.container.launcher import main

if __name__ == "__main__":
    main()
'''

RUNTIME_PACKAGE = "sagemaker_tc"
_SKIPPED_NAMES = {"__pycache__", ".git", ".ipynb_checkpoints"}


@dataclass(frozen=True)
class SourceSpec:
    """Where the user's code is, checked.

    Attributes:
        entry_point: the script's path relative to ``root`` (POSIX form).
        root: the folder whose contents become the code directory; None when only the entry point
            file is shipped (no ``source_dir``).
        entry_file: the script's absolute path.
    """

    entry_point: str
    root: Path | None
    entry_file: Path


def resolve_source(entry_point: str, source_dir: str | None) -> SourceSpec:
    """Check ``entry_point`` and ``source_dir`` as SageMaker SDK v2 did, before any job starts.

    With ``source_dir``, ``entry_point`` is relative to it; without, it is a path to a file that is
    shipped alone.

    Raises:
        EstimatorArgumentError: ``entry_point`` is missing or empty, or names the launcher file.
        SourceNotFoundError: ``source_dir`` is not a folder, or the entry point file does not exist.
    """
    if not isinstance(entry_point, str) or not entry_point.strip():
        raise EstimatorArgumentError("entry_point is required: the path of your training script, e.g. 'train.py'")
    if source_dir is not None:
        root = Path(source_dir).expanduser().resolve()
        if not root.is_dir():
            raise SourceNotFoundError(f"source_dir {source_dir!r} is not a folder")
        # Normalized, not resolved: an entry point that is a symlink inside source_dir is inside it.
        entry_file = Path(os.path.normpath(root / entry_point))
        if not entry_file.is_relative_to(root):
            raise SourceNotFoundError(f"entry_point {entry_point!r} must be inside source_dir {str(root)!r}")
        if not entry_file.is_file():
            raise SourceNotFoundError(f"entry_point {entry_point!r} was not found in source_dir {str(root)!r}")
        relative = entry_file.relative_to(root).as_posix()
    else:
        root = None
        entry_file = Path(entry_point).expanduser().resolve()
        if not entry_file.is_file():
            raise SourceNotFoundError(f"entry_point {entry_point!r} does not exist (no source_dir was given)")
        relative = entry_file.name
    if relative == LAUNCHER_PROGRAM:
        raise EstimatorArgumentError(
            f"entry_point may not be named {LAUNCHER_PROGRAM!r}: sagemaker-tc injects that file"
        )
    return SourceSpec(entry_point=relative, root=root, entry_file=entry_file)


def _skip(tarinfo: tarfile.TarInfo) -> tarfile.TarInfo | None:
    parts = Path(tarinfo.name).parts
    if any(part in _SKIPPED_NAMES for part in parts) or tarinfo.name.endswith(".pyc"):
        return None
    return tarinfo


def _runtime_filter(tarinfo: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """The container side of the package only: the SDK (``sagemaker_tc/sdk``) stays out."""
    if Path(tarinfo.name).parts[:2] == (RUNTIME_PACKAGE, "sdk"):
        return None
    return _skip(tarinfo)


def build_source_archive(spec: SourceSpec, destination: Path, *, inject_launcher: bool) -> Path:
    """Write ``sourcedir.tar.gz`` for ``spec`` into the folder ``destination``.

    Args:
        spec: from :func:`resolve_source`.
        destination: folder to write into (created if missing).
        inject_launcher: add ``sagemaker_tc_launcher.py`` and the container side of the
            ``sagemaker_tc`` package (everything but ``sagemaker_tc/sdk``) at the archive's top level,
            so a stock script-mode image runs the launcher with no pip install.

    Returns:
        The archive's path.

    Raises:
        EstimatorArgumentError: ``source_dir`` already holds a file named like the launcher or a
            ``sagemaker_tc`` folder.
    """
    destination.mkdir(parents=True, exist_ok=True)
    archive = destination / "sourcedir.tar.gz"
    # dereference=True: symlinks are packed as the files they point to (as SageMaker SDK v2 does).
    # gzip mtime 0: the same files give the same bytes, so a content hash names the archive.
    with (
        open(archive, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", dereference=True) as tar,
    ):
        if spec.root is not None:
            for injected in (LAUNCHER_PROGRAM, RUNTIME_PACKAGE):
                if inject_launcher and (spec.root / injected).exists():
                    raise EstimatorArgumentError(
                        f"source_dir already contains {injected!r}; sagemaker-tc injects one of that name, "
                        "remove or rename yours"
                    )
            for child in sorted(spec.root.iterdir()):
                tar.add(child, arcname=child.name, filter=_skip)
        else:
            tar.add(spec.entry_file, arcname=spec.entry_point)
        if inject_launcher:
            data = LAUNCHER_SOURCE.encode()
            info = tarfile.TarInfo(LAUNCHER_PROGRAM)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
            package_dir = Path(sagemaker_tc.__file__).resolve().parent
            tar.add(package_dir, arcname=RUNTIME_PACKAGE, filter=_runtime_filter)
    return archive


@contextmanager
def staged_archive(spec: SourceSpec, *, inject_launcher: bool) -> Iterator[Path]:
    """``sourcedir.tar.gz`` for ``spec`` in a temporary folder, removed when the block ends.

    Raises:
        EstimatorArgumentError: see :func:`build_source_archive`.
    """
    with tempfile.TemporaryDirectory(prefix="sagemaker-tc-source-") as staging:
        yield build_source_archive(spec, Path(staging), inject_launcher=inject_launcher)


def archive_digest(archive: Path) -> str:
    """SHA-256 of the archive's bytes (hex): the same source gives the same digest."""
    return hashlib.sha256(archive.read_bytes()).hexdigest()
