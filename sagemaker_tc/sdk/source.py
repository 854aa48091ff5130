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
from sagemaker_tc.contract import DRIVER_PROGRAM, LAUNCHER_PROGRAM
from sagemaker_tc.errors import EstimatorArgumentError, SourceNotFoundError
from sagemaker_tc.sdk.source_tree import SKIPPED_NAMES, SourceEntry, copy_entries, skipped, source_entries

LAUNCHER_SOURCE = '''"""Injected by sagemaker-tc: configures the training compiler, then runs your entry point."""

from sagemaker_tc.container.launcher import main

if __name__ == "__main__":
    main()
'''

# The driver SDK v3's ModelTrainer runs (sagemaker_tc.ModelTrainer ships it with the package's container side).
DRIVER_SOURCE = '''"""Installed by sagemaker-tc's ModelTrainer: runs your entry script under the training compiler."""

from sagemaker_tc.container.modeltrainer import main

if __name__ == "__main__":
    main()
'''

RUNTIME_PACKAGE = "sagemaker_tc"
# What of the package a job never runs: the SDK that submits it, and the ``sagemaker-tc`` command (the
# launcher and the driver import sagemaker_tc.container directly). The bench is another package.
NOT_IN_JOB = ("sdk", "cli.py")


@dataclass(frozen=True)
class SourceSpec:
    """Where the user's code is, checked.

    Attributes:
        entry_point: the script's path relative to ``root`` (POSIX form).
        root: the folder whose contents become the code directory; None when only the entry point
            file is shipped (no ``source_dir``).
        entry_file: the script's absolute path.
        allow_outside_links: ship what links in ``root`` point to even outside it (the user opted in
            with ``allow_symlinks_outside_source_dir=True``).
        excluded: folders never shipped, wherever they lie (the job's local output folder, a local
            compile cache or checkpoint location).
    """

    entry_point: str
    root: Path | None
    entry_file: Path
    allow_outside_links: bool = False
    excluded: tuple[Path, ...] = ()


def _path_argument(name: str, value: object) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise EstimatorArgumentError(f"{name} must be a path (str or os.PathLike), got {type(value).__name__}")
    return os.fspath(value)


def check_user_home(argument: str, value: str) -> None:
    """A local path that starts with ``~`` or ``~user`` names a home folder this machine knows.

    Raises:
        EstimatorArgumentError: ``~user`` for a user unknown here (``~nouser/x``): the path would be
            taken as a folder named ``~nouser`` in the working folder, or fail while the job is set up.
    """
    head = value.split("/", 1)[0]
    if head.startswith("~") and os.path.expanduser(head) == head:
        raise EstimatorArgumentError(
            f"{argument}={value!r}: {head!r} names no user's home folder on this machine; give the folder's full "
            "path, or start it with '~/' for your own home folder"
        )


def _refuse_folder(entry_point: str, entry_file: Path) -> None:
    if entry_file.is_dir():
        raise SourceNotFoundError(
            f"entry_point {entry_point!r} is a folder, not a script: give the training script's file, e.g. "
            "'train.py', and the folder as source_dir"
        )


def resolve_source(
    entry_point: str, source_dir: str | os.PathLike | None, *, allow_outside_links: bool = False
) -> SourceSpec:
    """Check ``entry_point`` and ``source_dir`` as SageMaker SDK v2 did, before any job starts.

    With ``source_dir``, ``entry_point`` is relative to it; without, it is a path to a file that is
    shipped alone. Every file under ``source_dir`` is listed once here, so a symbolic link that the
    rules of :mod:`sagemaker_tc.sdk.source_tree` refuse fails now, not at ``fit()``.

    Raises:
        EstimatorArgumentError: ``entry_point`` is missing, empty or not a path string, or names
            the launcher file; ``source_dir`` is not a path.
        SourceNotFoundError: ``source_dir`` is not a folder; the entry point is a folder, does not
            exist, or lies where nothing is shipped from (``.cache/train.py``).
        SourceLinkError: a link in ``source_dir`` resolves outside it (without ``allow_outside_links``),
            dangles, or loops.
    """
    if entry_point is not None and not isinstance(entry_point, (str, os.PathLike)):
        raise EstimatorArgumentError(
            f"entry_point must be the path of your training script as a string, e.g. 'train.py', got "
            f"{type(entry_point).__name__} {entry_point!r}"
        )
    entry_point = os.fspath(entry_point) if entry_point is not None else None
    if not entry_point or not entry_point.strip():
        raise EstimatorArgumentError("entry_point is required: the path of your training script, e.g. 'train.py'")
    if source_dir is not None:
        source_dir = _path_argument("source_dir", source_dir)
        check_user_home("source_dir", source_dir)
        root = Path(source_dir).expanduser().resolve()
        if source_dir.startswith("s3://"):  # SDK v2 took a sourcedir.tar.gz in S3
            raise SourceNotFoundError(
                f"source_dir {source_dir!r} is an S3 URI: sagemaker-tc packs source_dir itself (it adds the "
                "compiler's launcher), so it takes a local folder; download and unpack the archive "
                "(aws s3 cp <uri> .; mkdir code; tar -xzf sourcedir.tar.gz -C code), then pass source_dir='code'"
            )
        if not root.is_dir():
            raise SourceNotFoundError(f"source_dir {source_dir!r} is not a folder")
        # Normalized, not resolved: an entry point that is a symlink inside source_dir is inside it.
        entry_file = Path(os.path.normpath(root / entry_point))
        if not entry_file.is_relative_to(root):
            raise SourceNotFoundError(f"entry_point {entry_point!r} must be inside source_dir {str(root)!r}")
        _refuse_folder(entry_point, entry_file)
        if not entry_file.is_file():
            raise SourceNotFoundError(f"entry_point {entry_point!r} was not found in source_dir {str(root)!r}")
        relative = entry_file.relative_to(root).as_posix()
        if skipped(relative):
            raise SourceNotFoundError(
                f"entry_point {entry_point!r} lies where source_dir is never shipped from "
                f"({', '.join(sorted(SKIPPED_NAMES))}, *.pyc): move the script out of there"
            )
    else:
        root = None
        entry_file = Path(entry_point).expanduser().resolve()
        _refuse_folder(entry_point, entry_file)
        if not entry_file.is_file():
            raise SourceNotFoundError(f"entry_point {entry_point!r} does not exist (no source_dir was given)")
        relative = entry_file.name
    if relative == LAUNCHER_PROGRAM:
        raise EstimatorArgumentError(
            f"entry_point may not be named {LAUNCHER_PROGRAM!r}: sagemaker-tc injects that file"
        )
    spec = SourceSpec(entry_point=relative, root=root, entry_file=entry_file, allow_outside_links=allow_outside_links)
    if root is not None:
        source_entries(root, allow_outside=allow_outside_links)  # refuse bad links now
    return spec


def _is_runtime_file(arcname: str) -> bool:
    """True for the container side of the package: the SDK (``sagemaker_tc/sdk``), the command
    (``sagemaker_tc/cli.py``) and caches stay out (:data:`NOT_IN_JOB`)."""
    parts = Path(arcname).parts
    return not (len(parts) > 1 and parts[0] == RUNTIME_PACKAGE and parts[1] in NOT_IN_JOB) and not skipped(arcname)


def runtime_entries(package_dir: Path | None = None) -> list[SourceEntry]:
    """The container side of the ``sagemaker_tc`` package (everything but :data:`NOT_IN_JOB` and
    caches), named relative to the package: what the launcher and the driver ship, listed by the same
    rules as ``source_dir`` (:mod:`sagemaker_tc.sdk.source_tree`).

    Args:
        package_dir: the package folder; default the installed ``sagemaker_tc``.

    Raises:
        SourceLinkError: a link in the package leads outside it, dangles or loops.
    """
    package_dir = (package_dir or Path(sagemaker_tc.__file__).parent).resolve()
    listed = source_entries(package_dir, opt_in=None, name=f"the {RUNTIME_PACKAGE} package")
    return [entry for entry in listed if _is_runtime_file(f"{RUNTIME_PACKAGE}/{entry.arcname}")]


def write_driver_folder(destination: Path, *, package_dir: Path | None = None) -> Path:
    """Write the folder SDK v3's ModelTrainer ships as its distributed driver: ``sagemaker_tc_driver.py``
    and the container side of ``sagemaker_tc`` (:func:`runtime_entries`), so a stock image runs the
    driver with no pip install.

    Args:
        destination: a folder that does not exist yet.
        package_dir: the package folder to copy; default the installed ``sagemaker_tc``.

    Returns:
        ``destination``.

    Raises:
        SourceLinkError: see :func:`runtime_entries` (checked before anything is written).
    """
    copy_entries(runtime_entries(package_dir), destination / RUNTIME_PACKAGE)
    (destination / DRIVER_PROGRAM).write_text(DRIVER_SOURCE, encoding="utf-8")
    return destination


def _user_entries(spec: SourceSpec, *, inject_launcher: bool) -> list[tuple[Path, str]]:
    """``(path to read, name in the archive)`` for the user's code, checked."""
    if spec.root is None:
        return [(spec.entry_file, spec.entry_point)]
    for injected in (LAUNCHER_PROGRAM, RUNTIME_PACKAGE):
        if inject_launcher and (spec.root / injected).exists():
            raise EstimatorArgumentError(
                f"source_dir already contains {injected!r}; sagemaker-tc injects one of that name, "
                "remove or rename yours"
            )
    listed = source_entries(spec.root, allow_outside=spec.allow_outside_links, excluded=spec.excluded)
    return [(entry.path, entry.arcname) for entry in listed]


def build_source_archive(spec: SourceSpec, destination: Path, *, inject_launcher: bool) -> Path:
    """Write ``sourcedir.tar.gz`` for ``spec`` into the folder ``destination``.

    Args:
        spec: from :func:`resolve_source`.
        destination: folder to write into (created if missing).
        inject_launcher: add ``sagemaker_tc_launcher.py`` and the container side of the
            ``sagemaker_tc`` package (:func:`runtime_entries`) at the archive's top level,
            so a stock script-mode image runs the launcher with no pip install.

    Returns:
        The archive's path.

    Raises:
        EstimatorArgumentError: ``source_dir`` already holds a file named like the launcher or a
            ``sagemaker_tc`` folder.
        SourceLinkError: a link in ``source_dir`` breaks the rules of :mod:`sagemaker_tc.sdk.source_tree`
            (checked again here: the folder may have changed since the estimator was built).
    """
    user_files = _user_entries(spec, inject_launcher=inject_launcher)  # every check before any byte is written
    package_files = runtime_entries() if inject_launcher else []
    destination.mkdir(parents=True, exist_ok=True)
    archive = destination / "sourcedir.tar.gz"
    # Links in source_dir are packed as what they point to (source_entries resolved and checked them).
    # gzip mtime 0: the same files give the same bytes, so a content hash names the archive.
    with (
        open(archive, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", dereference=True) as tar,
    ):
        for path, arcname in user_files:
            tar.add(path, arcname=arcname, recursive=False)
        if inject_launcher:
            data = LAUNCHER_SOURCE.encode()
            info = tarfile.TarInfo(LAUNCHER_PROGRAM)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
            tar.add(Path(sagemaker_tc.__file__).resolve().parent, arcname=RUNTIME_PACKAGE, recursive=False)
            for entry in package_files:
                tar.add(entry.path, arcname=f"{RUNTIME_PACKAGE}/{entry.arcname}", recursive=False)
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
