"""Checkpoint sync for docker-free (``local_process``) jobs, like SageMaker's: ``checkpoint_s3_uri``
is a local folder (``file://`` URI or plain path) and ``checkpoint_local_path`` (default
``/opt/ml/checkpoints``) a folder under ``/opt/ml``, i.e. under each host's job folder.

At job start the location's files are copied into every host's checkpoint folder; while the job
runs, the files a host wrote or changed since they were copied in (or last out) are copied out every
:data:`SYNC_INTERVAL_S` seconds by a background thread; when the job ends (however it ends) they are
copied out a last time. As on SageMaker, files deleted in the job are not deleted at the location,
every host syncs with the same location, and a host uploads only its own changes: a file another
host saved is never overwritten by this host's untouched copy from the job's start.

Checkpoint folders never overlap the job's other folders: ``checkpoint_local_path`` may not be,
hold or lie inside ``/opt/ml/input`` (the channels), ``/opt/ml/code``, ``/opt/ml/model`` or
``/opt/ml/output`` (the sync would copy checkpoints into the user's data and the data out), and a
local checkpoint location may not be, or hold, the output folder or ``source_dir``.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

from sagemaker_tc.errors import CheckpointSyncError
from sagemaker_tc.paths import OWN_FOLDER_MARKER, mark_own_folder, space_note
from sagemaker_tc.sdk.job_paths import host_folder
from sagemaker_tc.sdk.request import TrainingJobRequest

logger = logging.getLogger(__name__)

# Seconds between copies out while the job runs (SageMaker uploads continuously; a file written
# between two copies reaches the location at the next one, or at the end).
SYNC_INTERVAL_S = 10.0

_MARKER = Path(OWN_FOLDER_MARKER)  # at the location's top: a local job's code never ships the location

# A file's size in bytes and modification time in nanoseconds, as the sync compares them.
FileState = tuple[int, int]


def copy_new(source: Path, target: Path, synced: dict[Path, FileState] | None = None) -> None:
    """Copy every file under ``source`` that ``target`` lacks or holds at another size or time.

    With ``synced`` (a file's path relative to ``source`` -> its size and modification time in
    nanoseconds when it was last synced, see :func:`file_states`), a file whose size and time still
    match its entry is left alone, however ``target``'s copy differs: only what changed under
    ``source`` since is copied, and each copied file's entry is updated.

    Each file is written under a temporary name and renamed when whole, and never through a
    symbolic link in ``target`` (a file whose folder there is a link, ``sub -> /elsewhere``, is not
    copied, with a warning: the copy would land outside the folder).

    Raises:
        CheckpointSyncError: a file could not be written (a full disk, a file size limit); no
            partial file is left.
    """
    if not source.is_dir():
        return
    for path in sorted(source.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        relative = path.relative_to(source)
        if relative == _MARKER:
            continue  # the location's own marker: not a checkpoint file
        state = _state(path)
        if state is None or (synced is not None and synced.get(relative) == state):
            continue  # removed meanwhile, or unchanged here since it was last synced
        link = _link_on_the_way(target, relative)
        if link is not None:
            logger.warning(
                "checkpoint sync: not copying %s into %s: %s there is a symbolic link, and the copy would be "
                "written where it points; remove the link",
                relative,
                target,
                link,
            )
            continue
        try:
            _copy_one(path, target / relative)
        except FileNotFoundError:  # removed by the job while being copied: the next pass decides
            continue
        except OSError as error:
            needed = space_note(target, _size(path))
            raise CheckpointSyncError(
                f"checkpoint sync: could not copy {str(relative)!r} into the folder {str(target)!r}: "
                f"{error.strerror or error}; {needed}. No partial file was left; make room there (or give "
                "the checkpoints a folder with room) and run the job again"
            ) from error
        if synced is not None:
            synced[relative] = state  # the state read before the copy: a write during it is copied next time


def file_states(folder: Path) -> dict[Path, FileState]:
    """Every regular file under ``folder`` (links left out): its path relative to ``folder`` -> its
    size in bytes and modification time in nanoseconds. Empty when ``folder`` is missing."""
    if not folder.is_dir():
        return {}
    states = {}
    for path in folder.rglob("*"):
        state = None if path.is_symlink() or not path.is_file() else _state(path)
        if state is not None:
            states[path.relative_to(folder)] = state
    return states


def _state(path: Path) -> FileState | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _link_on_the_way(target: Path, relative: Path) -> Path | None:
    """The first symbolic link among the folders between ``target`` and ``target / relative``."""
    folder = target
    for part in relative.parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            return folder
    return None


def _copy_one(path: Path, destination: Path) -> None:
    """Copy ``path`` to ``destination`` unless it holds the same size and time already, through a
    partial file renamed when whole (removed when the copy fails)."""
    if destination.is_file() and not destination.is_symlink() and _state(destination) == _state(path):
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(f".{destination.name}.sagemaker-tc-partial")
    partial.unlink(missing_ok=True)  # a link of that name is removed, never written through
    try:
        shutil.copy2(path, partial)
        os.replace(partial, destination)  # a reader never sees half a file
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


class CheckpointSync:
    """The job's checkpoint sync between ``location`` and each host's checkpoint folder.

    Use as a context manager around the job: entering copies in and starts the copy-out thread;
    leaving stops it and copies out a last time. A copy out that fails while the job runs is logged
    and tried again at the next one; the last one's failure is kept in :attr:`failure` (leaving does
    not raise it, so the job's archives are written first).

    Attributes:
        failure: the last copy out's error, or None.
    """

    def __init__(self, location: Path, folders: list[Path], interval_s: float | None = None) -> None:
        self.location, self.folders = location, folders
        self.failure: CheckpointSyncError | None = None
        self.interval_s = SYNC_INTERVAL_S if interval_s is None else interval_s
        self._synced: dict[Path, dict[Path, FileState]] = {}  # per host folder, see copy_new
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sagemaker-tc-checkpoint-sync", daemon=True)

    def copy_out(self) -> None:
        """Copy to the location the checkpoint files each host wrote or changed since they were
        copied in or last out (another host's newer save is never overwritten by a stale copy)."""
        for folder in self.folders:
            copy_new(folder, self.location, self._synced.setdefault(folder, {}))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.copy_out()
            except CheckpointSyncError as error:
                logger.warning("%s (tried again at the next copy and when the job ends)", error)

    def __enter__(self) -> CheckpointSync:
        mark_own_folder(self.location, "a local checkpoint location")  # never shipped as a later job's code
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
            copy_new(self.location, folder)
            self._synced[folder] = file_states(folder)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self.copy_out()
        except CheckpointSyncError as error:
            self.failure = error


def checkpoint_sync(request: TrainingJobRequest, job_dirs: dict[str, Path], location: Path) -> CheckpointSync:
    """The sync for ``request``'s checkpoint config over its hosts' job folders.

    Raises:
        EstimatorArgumentError: the config's local path is not under ``/opt/ml``.
    """
    local_path = request.checkpoint_config.local_path if request.checkpoint_config else None
    local_path = local_path if isinstance(local_path, str) else None  # sagemaker-core's Unassigned: the default
    return CheckpointSync(location, [host_folder(local_path, job_dir) for job_dir in job_dirs.values()])
