"""Local files and folders: checks of folders a command or a job will write to, run before any work
starts, the one atomic file write (:func:`write_atomic`), and the marker of the folders sagemaker-tc
writes (:func:`mark_own_folder`).

Used by the estimators and ``ModelTrainer`` (a local ``output_path``) and by ``sagemaker-tc bench
--out``: a folder that cannot be written should fail with its reason before a job or a benchmark
runs, not as a ``FileNotFoundError`` deep inside it. Imports only the standard library.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

OWN_FOLDER_MARKER = ".sagemaker-tc-job"
"""The file sagemaker-tc writes into each local folder it fills: a local job folder (``local_process``
or Docker local mode, from either front end), a local checkpoint location, a local compile cache. A
folder holding it is never shipped as a job's source code, nor are the links in it checked
(:mod:`sagemaker_tc.sdk.source_tree`); the checkpoint sync never copies it into a job."""


def mark_own_folder(folder: Path, what: str) -> None:
    """Make ``folder`` (and its parents) if missing and write :data:`OWN_FOLDER_MARKER` into it,
    saying ``what`` the folder is (kept when the marker is there already).

    Raises:
        OSError: the folder or the marker cannot be written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / OWN_FOLDER_MARKER
    if not marker.is_file():
        marker.write_text(f"{what}, written by sagemaker-tc: never shipped as a job's source code\n")


def unwritable_reason(folder: str | os.PathLike) -> str | None:
    """Why files cannot be written under ``folder`` (None: they can).

    The folder need not exist: its nearest existing parent must be a folder in which a folder can
    be made (probed by making and removing an empty one, so nothing is left behind).
    """
    path = Path(os.path.abspath(os.path.expanduser(os.fspath(folder))))
    existing = next(candidate for candidate in (path, *path.parents) if candidate.exists())
    if not existing.is_dir():
        return f"{str(existing)!r} is a file"
    try:
        probe = tempfile.mkdtemp(prefix=".sagemaker-tc-probe-", dir=existing)
    except OSError as error:
        return f"nothing can be created in {str(existing)!r} ({error.strerror or error})"
    os.rmdir(probe)
    return None


def write_atomic(path: str | os.PathLike, data: bytes | str | BinaryIO) -> None:
    """Write ``data`` (text as UTF-8; a binary file is copied from its position to its end, in
    chunks) at ``path`` through a temporary file in the same folder and ``os.replace``, so a reader
    sees the old file or the whole new one, never half of it. Makes the folder. Raises ``OSError``
    as the write does (the temporary file is removed)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".tmp-", delete=False) as handle:
        try:
            if isinstance(payload, bytes):
                handle.write(payload)
            else:
                shutil.copyfileobj(payload, handle, 1 << 20)
        except BaseException:
            handle.close()
            os.unlink(handle.name)
            raise
    os.replace(handle.name, target)


def tree_bytes(folder: str | os.PathLike) -> int:
    """The size of every file under ``folder`` (links not followed), bytes; 0 when it is missing."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def space_note(folder: str | os.PathLike, needed: int) -> str:
    """``"it needs N bytes and M are free there"`` for a write into ``folder`` (its nearest existing
    parent is measured; the free space is left out where it cannot be read)."""
    place = Path(folder)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        free = f"{shutil.disk_usage(place).free} are free there"
    except OSError:
        free = "the free space there could not be read"
    return f"it needs up to {needed} bytes and {free}"
