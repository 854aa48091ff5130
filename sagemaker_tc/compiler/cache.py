"""Compile cache reused across jobs: Inductor's cache folder, saved at job end, restored at job start.

What is kept: what the compiler wrote in ``TORCHINDUCTOR_CACHE_DIR`` (FX graph cache, AOTAutograd
cache, and the compiled kernels: C++ shared objects on CPU, Triton kernels on GPU), by kind: the
folders torch names (:data:`COMPILER_FOLDERS`) and its two-character code folders; nothing else a
user's own ``TORCHINDUCTOR_CACHE_DIR`` holds (``.aws/credentials``, notes, data), no hidden file and
no link, and nothing that folder held before the job (:data:`FOREIGN_INDEX`: a user's ``go/`` or
``cache/`` is not the compiler's). A local cache location's files are read and written only inside
it: an entry folder that is a link is never written through. torch's portable "mega-cache"
(``torch.compiler.save_cache_artifacts()``) leaves the CPU kernels' C++ builds out, so a warm start
on CPU from it alone still compiles most of the way; the folder carries both. A restored folder
works at a new path (the figures: benchmarks/README.md).

Layout at the cache location (a local folder or ``s3://bucket/prefix``), one entry per environment::

    <location>/<key>/meta.json                   # environment, archive name, sha256, bytes, files
    <location>/<key>/inductor-<sha16>.tar.gz     # the folder's files

``key`` hashes torch, triton and Python versions, machine and device (:func:`environment`), so a
cache from another torch, triton or device is never loaded (it is reported as stale). ``meta.json``
is written last and names its archive by content hash, so a reader sees an old entry or a new one,
never half of one. ``meta.json`` names its archive only as ``inductor-<16 hex>.tar.gz`` in its own
folder: any other name (``../../victim.txt``) makes the entry corrupt, and is never read or deleted.
Loading checks the archive's sha256; a missing, stale or corrupt cache is ignored
with a warning (the job compiles cold), never an error. A restore is all or nothing: the archive
must hold only regular files of the compiler's kinds (no link, no path leaving the folder), as many
as ``meta.json``'s ``files`` says, and at most :func:`restore_limit` bytes (100 times the archive,
plus 1 MiB, at most 32 GiB); it is extracted into a staging folder beside the Inductor folder and
moved in when whole, and a move that fails puts everything back as it was. The archive is written
to, and fetched into, an unnamed temporary file beside the Inductor folder and streamed through the
store (:mod:`sagemaker_tc.compiler.cache_store`: on S3 boto3's managed, multipart transfer): it is
never held whole in memory.

The launcher loads the cache once per host before any rank starts, and global rank 0 saves it when
its script has ended (:mod:`sagemaker_tc.compiler.job_cache`), so ranks never write it concurrently.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from sagemaker_tc.compiler import history
from sagemaker_tc.compiler.cache_store import CacheStore
from sagemaker_tc.errors import CacheLocationError
from sagemaker_tc.paths import write_atomic

logger = logging.getLogger(__name__)

META_NAME = "meta.json"
SCHEMA = 1
# The folders torch writes under TORCHINDUCTOR_CACHE_DIR (torch/_inductor/codecache.py, cpp_builder.py,
# _functorch/_aot_autograd/autograd_cache.py, _dynamo/package.py, runtime/cache_dir_utils.py), besides
# the code folders named by two characters of a hash (codecache.get_path: ``basename[1:3]``).
COMPILER_FOLDERS = frozenset(
    {"fxgraph", "aotautograd", "triton", "dynamo", "gcc", "cache", "precompiled_headers", "aoti_eager", "torch_cutlass"}
)
_CODE_FOLDER_RE = re.compile(r"^[a-z0-9_]{2}$")
_ARCHIVE_NAME_RE = re.compile(r"^inductor-[0-9a-f]{16}\.tar\.gz$")
# What plan="auto" measured (sagemaker_tc.compiler.history), written at the folder's top by the session
# before the save: carried in the entry with the compiler's files.
_HISTORY = Path(history.FILENAME)


@dataclass
class CacheOutcome:
    """What a load or save did, for the report's ``cache`` entry.

    Attributes:
        state: ``"warm"`` (files restored), ``"cold"`` (nothing usable: see ``reason``) or ``"disabled"``.
        uri: the cache location.
        key: the environment key.
        files: files restored or saved.
        bytes: archive size, bytes.
        seconds: time the load or save took, seconds.
        reason: why the cache was cold, or why a save was skipped.
        saved_bytes: bytes written at job end (None: not saved).
    """

    state: str
    uri: str | None = None
    key: str | None = None
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    reason: str | None = None
    saved_bytes: int | None = None
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _devices() -> str:
    """GPU names from ``nvidia-smi`` (e.g. ``"NVIDIA H200 x1"``), else ``"cpu"``."""
    if shutil.which("nvidia-smi") is None:
        return "cpu"
    try:
        names = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "cpu"
    names = [name.strip() for name in names if name.strip()]
    return f"{names[0]} x{len(names)}" if names else "cpu"


def environment() -> dict[str, Any]:
    """What a compiled artifact depends on: torch, triton and Python versions, machine, devices."""
    return {
        "torch": _version("torch"),
        "triton": _version("triton"),
        "python": ".".join(map(str, sys.version_info[:2])),
        "machine": platform.machine(),
        "devices": _devices(),
    }


def environment_key(env: dict[str, Any]) -> str:
    """16 hex digits of the sha256 of ``env`` (sorted JSON)."""
    return hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:16]


def compiler_wrote(relative: Path) -> bool:
    """True for a path (relative to ``TORCHINDUCTOR_CACHE_DIR``) of a kind the compiler writes: under
    one of :data:`COMPILER_FOLDERS` or a two-character code folder, no part hidden, not a lock file;
    or the plan history at the folder's top (:data:`sagemaker_tc.compiler.history.FILENAME`)."""
    if relative == _HISTORY:
        return True
    parts = relative.parts
    if len(parts) < 2 or any(part.startswith(".") for part in parts) or relative.name.endswith(".lock"):
        return False
    return parts[0] in COMPILER_FOLDERS or bool(_CODE_FOLDER_RE.match(parts[0]))


def _files(folder: Path) -> set[str]:
    """Relative paths of the compiler's files in the cache folder (:func:`compiler_wrote`); links and
    whatever else the folder holds are left out."""
    if not folder.is_dir():
        return set()
    found = set()
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if path.is_file() and not path.is_symlink() and compiler_wrote(relative):
            found.add(str(relative))
    return found


FOREIGN_INDEX = ".sagemaker-tc-foreign.json"
"""In ``TORCHINDUCTOR_CACHE_DIR``: the files it held before the first compile cache of a job came to
it (a user's own folder set as ``TORCHINDUCTOR_CACHE_DIR``), written once. They are never saved to
the cache, whatever their folder's name (``go/``, ``cache/``): the cache keeps what the jobs wrote."""


def _foreign_files(folder: Path, *, record: bool) -> set[str]:
    """The files :data:`FOREIGN_INDEX` lists; without one, with ``record`` (the launcher's cache on a
    user's own folder, before any rank compiles) the compiler-kind files there now, written to the
    index for the ranks, else none."""
    index = folder / FOREIGN_INDEX
    if index.is_file() and not index.is_symlink():
        try:
            listed = json.loads(index.read_text(encoding="utf-8"))
            return {name for name in listed if isinstance(name, str)} if isinstance(listed, list) else set()
        except (OSError, ValueError):
            return set(_files(folder))  # unreadable: everything there now is taken as the user's
    if not record:
        return set()
    found = _files(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)  # a later process of the job finds the index
    except OSError as error:
        logger.debug("Could not create %s: %s", folder, error)
    _write_foreign(folder, found)
    return found


def _write_foreign(folder: Path, names: set[str]) -> None:
    try:
        write_atomic(folder / FOREIGN_INDEX, json.dumps(sorted(names)).encode())
    except OSError as error:
        logger.debug("Could not write %s in %s: %s", FOREIGN_INDEX, folder, error)


def archive_name(meta: dict[str, Any]) -> str | None:
    """The archive ``meta.json`` names, when it is a name this module writes (``inductor-<16 hex>.tar.gz``,
    in the entry's own folder); None for anything else (a path such as ``../../victim.txt``)."""
    name = meta.get("archive") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and _ARCHIVE_NAME_RE.match(name) else None


def _archive(folder: Path, names: set[str], into: BinaryIO) -> None:
    """Write the gzipped tar of ``folder``'s files ``names`` (relative paths) into ``into``."""
    with tarfile.open(fileobj=into, mode="w:gz") as tar:
        for name in sorted(names):
            tar.add(folder / name, arcname=name, recursive=False)


def _digest(file: BinaryIO) -> tuple[str, int]:
    """The sha256 (hex) and size (bytes) of ``file``'s whole content, read in 1 MiB chunks; leaves
    ``file`` at its start."""
    file.seek(0)
    digest, size = hashlib.sha256(), 0
    while chunk := file.read(1 << 20):
        digest.update(chunk)
        size += len(chunk)
    file.seek(0)
    return digest.hexdigest(), size


RESTORE_RATIO = 100
"""A restore writes at most ``RESTORE_RATIO`` times the archive's size plus :data:`RESTORE_SLACK`
bytes, and never more than :data:`RESTORE_CAP` (compiled kernels, graphs and C++ builds compress
3 to 10 times; an entry past the limit is corrupt or hostile and loads cold, restoring nothing)."""
RESTORE_SLACK = 1 << 20
RESTORE_CAP = 32 << 30


def restore_limit(archive_bytes: int) -> int:
    """Most bytes a restore of an archive of ``archive_bytes`` may write (:data:`RESTORE_RATIO`)."""
    return min(RESTORE_CAP, RESTORE_RATIO * archive_bytes + RESTORE_SLACK)


def _checked_members(archive: BinaryIO, size: int, meta: dict[str, Any]) -> tuple[list[tarfile.TarInfo], str | None]:
    """The archive's files to restore, and None; or ``([], problem)`` when it is not all the
    compiler's regular files (a link, a device, a path leaving the folder, a hidden or foreign
    name), holds another number of files than ``meta.json``'s ``files``, or is larger than
    :func:`restore_limit` of its ``size`` (bytes). Reads ``archive`` from its start; folders in the
    archive are left out (the files' folders are made)."""
    count = meta.get("files")
    if type(count) is not int or count < 0:
        return [], f"is named by a meta.json whose files is {str(count)[:40]!r}, not a count of files"
    files: list[tarfile.TarInfo] = []
    total, limit = 0, restore_limit(size)
    archive.seek(0)
    with tarfile.open(fileobj=archive, mode="r:gz") as tar:
        for member in tar:  # stops at the first problem: a bomb is never read to its end
            if member.isdir():
                continue
            relative = Path(member.name)
            if not member.isfile() or relative.is_absolute() or ".." in relative.parts:
                return [], f"holds {member.name[:80]!r}, not a regular file in the folder (links are never restored)"
            if not compiler_wrote(relative):
                return [], f"holds {member.name[:80]!r}, not a file the compiler writes"
            files.append(member)
            total += member.size
            if total > limit:
                return [], f"would restore {total} bytes or more, over the limit of {limit} for {size} bytes"
            if len(files) > count:
                break
    names = {member.name for member in files}
    if len(names) != len(files) or len(files) != count:
        return [], f"holds {len(names)} distinct files or more; meta.json says {count}"
    return files, None


def _inside(folder: Path, relative: str) -> Path:
    """``folder / relative`` when no part of it below ``folder`` is a link; else CacheLocationError."""
    path = folder
    for part in Path(relative).parts:
        path = path / part
        if path.is_symlink():
            raise CacheLocationError(f"{path} in the Inductor folder is a link: the cache is not restored through it")
    return path


def _move_in(staging: Path, folder: Path, names: list[str]) -> None:
    """Move the files extracted under ``staging/new`` into ``folder``, all or none: a file already
    there is set aside under ``staging/old`` and put back, and every file and folder made is
    removed again, when any move fails."""
    moved: list[tuple[Path, Path | None]] = []
    made: list[Path] = []
    try:
        for name in sorted(names):
            target = _inside(folder, name)
            for parent in reversed(target.relative_to(folder).parents[:-1]):
                if not (folder / parent).is_dir():
                    (folder / parent).mkdir()
                    made.append(folder / parent)
            kept = None
            if target.exists():
                kept = staging / "old" / name
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(target, kept)
            moved.append((target, kept))
            shutil.move(staging / "new" / name, target)
    except BaseException:
        for target, kept in reversed(moved):
            target.unlink(missing_ok=True)
            if kept is not None:
                shutil.move(kept, target)
        for path in reversed(made):
            shutil.rmtree(path, ignore_errors=True)
        raise


def _previous_archive(meta_bytes: bytes) -> str | None:
    """The archive an earlier ``meta.json`` names, when it is one of ours (else None: nothing is deleted)."""
    try:
        return archive_name(json.loads(meta_bytes))
    except ValueError:
        return None


class CompileCache:
    """The compile cache at ``uri`` for the Inductor folder ``inductor_dir``.

    Args:
        uri: a local folder or ``s3://bucket/prefix`` (validated by ``TrainingCompilerConfig.cache``).
        inductor_dir: the process tree's ``TORCHINDUCTOR_CACHE_DIR``.
        users_folder: ``inductor_dir`` is a folder the user chose (not one this job made): what it
            holds now is the user's and is never saved (:data:`FOREIGN_INDEX`).
    """

    def __init__(self, uri: str, inductor_dir: Path, *, users_folder: bool = False) -> None:
        self.uri = uri
        self.inductor_dir = inductor_dir
        self.env = environment()
        self.key = environment_key(self.env)
        self._loaded_files: set[str] = set()
        self._loaded_plans: set[tuple[str, str]] = set()  # the plan history's pairs when loaded
        self._foreign = _foreign_files(inductor_dir, record=users_folder)

    def load(self) -> CacheOutcome:
        """Restore the entry for this environment into ``inductor_dir``. Never raises: a missing,
        stale or corrupt entry (or an unreachable location) gives ``state="cold"`` with the reason,
        logged as a warning."""
        started = time.perf_counter()
        outcome = CacheOutcome(state="cold", uri=self.uri, key=self.key, environment=self.env)
        try:
            store = CacheStore(self.uri)
            meta_bytes = store.read(f"{self.key}/{META_NAME}")
            if meta_bytes is None:
                others = [k for k in store.keys(META_NAME) if k != self.key]
                outcome.reason = (
                    f"stale: the cache holds entries only for other environments ({self._describe(store, others)})"
                    if others
                    else "empty: no entry yet (this job fills it)"
                )
            else:
                self._restore(store, json.loads(meta_bytes), outcome)
        except Exception as error:  # never fail a job over its cache
            outcome.state, outcome.files, outcome.bytes = "cold", 0, 0
            outcome.reason = f"unreadable: {type(error).__name__}: {error}"
        outcome.seconds = time.perf_counter() - started
        self.mark_loaded()
        if outcome.state == "warm":
            logger.info(
                "Compile cache warm: %d files (%d bytes) from %s in %.2f s",
                outcome.files,
                outcome.bytes,
                self.uri,
                outcome.seconds,
            )
        elif outcome.reason and outcome.reason.startswith("empty"):
            logger.info("Compile cache cold: %s (%s)", outcome.reason, self.uri)
        else:
            logger.warning("Compile cache ignored, compiling cold: %s (%s)", outcome.reason, self.uri)
        return outcome

    def mark_loaded(self) -> None:
        """Count the folder's files now as loaded (a torchrun rank whose parent launcher loaded the
        cache into the shared folder), and the plan history's measurements as known, so :meth:`save`
        stores an entry only when something new was compiled or measured."""
        self._loaded_files = _files(self.inductor_dir)
        self._loaded_plans = history.plans_held(self.inductor_dir)

    def _restore(self, store: CacheStore, meta: dict[str, Any], outcome: CacheOutcome) -> None:
        """Restore the archive ``meta`` names, all or nothing (the module docstring's checks), or set
        ``outcome.reason`` and restore nothing. The archive is streamed into an unnamed temporary
        file beside the Inductor folder, never held in memory."""
        name = archive_name(meta)
        if name is None:
            outcome.reason = "corrupt: meta.json names no archive of the form inductor-<16 hex>.tar.gz in its folder"
            return
        self.inductor_dir.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=self.inductor_dir.parent) as archive:
            if not store.download(f"{self.key}/{name}", archive):
                outcome.reason = f"corrupt: {name} named by meta.json is missing"
                return
            digest, size = _digest(archive)
            if digest != meta.get("sha256"):
                outcome.reason = f"corrupt: {name} does not match its sha256 in meta.json"
                return
            members, problem = _checked_members(archive, size, meta)
            if problem is not None:
                outcome.reason = f"corrupt: {name} {problem}"
                return
            self._extract(archive, members)
        outcome.state, outcome.files, outcome.bytes = "warm", meta["files"], size
        restored = {str(path.relative_to(self.inductor_dir)) for path in self.inductor_dir.rglob("*")}
        if self._foreign & restored:  # the cache's own files now, whatever lay at their paths before
            self._foreign -= restored
            _write_foreign(self.inductor_dir, self._foreign)

    def _extract(self, archive: BinaryIO, members: list[tarfile.TarInfo]) -> None:
        """Extract the checked ``members`` of ``archive`` into a staging folder beside the Inductor
        folder and move them in, all or none (:func:`_move_in`)."""
        self.inductor_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="restore-", dir=self.inductor_dir.parent))
        try:
            archive.seek(0)
            with tarfile.open(fileobj=archive, mode="r:gz") as tar:
                tar.extractall(staging / "new", members=members, filter="data")
            _move_in(staging, self.inductor_dir, [member.name for member in members if member.isfile()])
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _describe(self, store: CacheStore, keys: list[str]) -> str:
        parts = []
        for key in keys[:3]:
            try:
                env = json.loads(store.read(f"{key}/{META_NAME}") or b"{}").get("environment", {})
            except ValueError:
                env = {}
            parts.append(f"torch {env.get('torch')}, triton {env.get('triton')}, {env.get('devices')}")
        env = self.env
        return "; ".join(parts) + f"; this job: torch {env['torch']}, triton {env['triton']}, {env['devices']}"

    def save(self) -> CacheOutcome:
        """Store ``inductor_dir`` as this environment's entry when the job compiled anything new, or
        its plan history holds a plan (or workload) measured that the loaded one did not (a plan
        measured again is not saved for that alone). Never raises (a failed save is logged as a
        warning)."""
        started = time.perf_counter()
        outcome = CacheOutcome(state="saved", uri=self.uri, key=self.key, environment=self.env)
        names = _files(self.inductor_dir) - self._foreign
        measured = history.plans_held(self.inductor_dir) - self._loaded_plans
        if not names or (names <= self._loaded_files and not measured):
            outcome.state = "unchanged"
            outcome.reason = "nothing new was compiled or measured; the entry is kept as it was"
            logger.info("Compile cache not saved: %s", outcome.reason)
            return outcome
        try:
            store = CacheStore(self.uri)
            with tempfile.TemporaryFile(dir=self.inductor_dir.parent) as archive:  # streamed, not in memory
                _archive(self.inductor_dir, names, archive)
                digest, size = _digest(archive)
                name = f"inductor-{digest[:16]}.tar.gz"
                old = store.read(f"{self.key}/{META_NAME}")
                store.upload(f"{self.key}/{name}", archive)
            meta = {
                "schema": SCHEMA,
                "archive": name,
                "sha256": digest,
                "bytes": size,
                "files": len(names),
                "environment": self.env,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            store.write(f"{self.key}/{META_NAME}", json.dumps(meta, indent=2).encode())
            if old is not None:
                previous = _previous_archive(old)
                if previous and previous != name:
                    store.delete(f"{self.key}/{previous}")
            outcome.files, outcome.bytes, outcome.saved_bytes = len(names), size, size
            logger.info("Compile cache saved: %d files, %d bytes to %s", len(names), size, self.uri)
        except Exception as error:
            outcome.state, outcome.reason = "failed", f"{type(error).__name__}: {error}"
            logger.warning("Compile cache not saved: %s (%s)", outcome.reason, self.uri)
        outcome.seconds = time.perf_counter() - started
        return outcome
