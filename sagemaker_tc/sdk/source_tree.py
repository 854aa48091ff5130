"""Which files of ``source_dir`` are shipped with a job, and the rules for symbolic links in it.

Everything under ``source_dir`` is shipped except what ``ModelTrainer``'s source upload leaves out
by default (``SourceCode.ignore_patterns``: ``.env``, ``.git``, ``__pycache__``, ``.DS_Store``,
``.cache``, ``.ipynb_checkpoints``), wherever they lie, and ``*.pyc``: a ``.env`` file of secrets or
a ``.cache`` of downloads is not code. A symbolic link is shipped as what it points to, when that is
inside ``source_dir``. A link that resolves outside it (``passwd -> /etc/passwd``, ``aws -> ~/.aws``)
would upload files the user never meant to ship, so it is refused unless the estimator was given
``allow_symlinks_outside_source_dir=True`` (``sagemaker_tc.ModelTrainer`` has no such option). A
link that points nowhere, or a folder link that leads back to a folder containing it (``up -> ..``),
is refused with the link's name: packing could not finish or would ship nothing.

The folders sagemaker-tc itself writes (the local output folder, a local compile cache or checkpoint
location: this job's, and every earlier job's, which hold :data:`JOB_FOLDER_MARKER`) are never
shipped, wherever they lie: with ``source_dir="."`` and the default ``output_path`` each job would
otherwise ship every earlier job's outputs, checkpoints and compiled code.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sagemaker_tc.errors import SourceLinkError
from sagemaker_tc.paths import OWN_FOLDER_MARKER, mark_own_folder

logger = logging.getLogger(__name__)

# sagemaker.core.training.configs.SourceCode.ignore_patterns' defaults (sagemaker-train).
SKIPPED_NAMES = frozenset({".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"})
SKIPPED_SUFFIXES = (".pyc",)


@dataclass(frozen=True)
class SourceEntry:
    """One file or folder to ship.

    Attributes:
        path: where to read it (a link's resolved target).
        arcname: its path in the code folder (POSIX form, relative to ``source_dir``).
        is_dir: a folder (shipped as an entry of its own; its contents follow as entries).
    """

    path: Path
    arcname: str
    is_dir: bool


def skipped(arcname: str) -> bool:
    """True for paths never shipped: caches, git metadata, ``.env`` files, Finder's ``.DS_Store``
    and compiled Python files (:data:`SKIPPED_NAMES`, :data:`SKIPPED_SUFFIXES`)."""
    return any(part in SKIPPED_NAMES for part in arcname.split("/")) or arcname.endswith(SKIPPED_SUFFIXES)


JOB_FOLDER_MARKER = OWN_FOLDER_MARKER
"""The file in each folder sagemaker-tc writes (:data:`sagemaker_tc.paths.OWN_FOLDER_MARKER`): a local
job folder holds an earlier job (its code, hyperparameters, channel links, model and output), a local
checkpoint location or compile cache earlier jobs' files; none is ever shipped as source code, nor
are the links in it checked."""


def mark_job_folder(folder: Path) -> None:
    """Make ``folder`` (and its parents) if missing and write :data:`JOB_FOLDER_MARKER` into it.

    Raises:
        OSError: the folder or the marker cannot be written.
    """
    mark_own_folder(folder, "a sagemaker-tc local job folder")


def marked_job_folders(folder: Path) -> list[str]:
    """The names of the job folders directly in ``folder`` (those holding :data:`JOB_FOLDER_MARKER`),
    sorted; empty when ``folder`` is not a folder."""
    if not folder.is_dir():
        return []
    return sorted(child.name for child in folder.iterdir() if (child / JOB_FOLDER_MARKER).is_file())


ESTIMATOR_OPT_IN = "or pass allow_symlinks_outside_source_dir=True to the estimator if you mean to ship it"
"""How an estimator's user ships a link outside ``source_dir`` on purpose (the end of the refusal)."""


@dataclass(frozen=True)
class _Walk:
    """The rules of one listing: the root and what refusals call it, the opt-in, the names left out."""

    root: Path
    allow_outside: bool
    ignore_patterns: tuple[str, ...]
    opt_in: str | None
    name: str
    excluded: frozenset[Path] = frozenset()

    def ignored(self, name: str, arcname: str) -> bool:
        return skipped(arcname) or any(fnmatch.fnmatch(name, pattern) for pattern in self.ignore_patterns)


def source_entries(
    root: Path,
    *,
    allow_outside: bool = False,
    ignore_patterns: Sequence[str] = (),
    opt_in: str | None = ESTIMATOR_OPT_IN,
    name: str = "source_dir",
    excluded: Sequence[Path] = (),
) -> list[SourceEntry]:
    """Every file and folder under ``root`` to ship, in a stable (sorted) order, links resolved.

    The one listing of a source folder: the estimators pack it into ``sourcedir.tar.gz``, and
    ``sagemaker_tc.ModelTrainer`` checks it before sagemaker-train uploads, mounts or copies the folder.

    Args:
        root: ``source_dir``, resolved (absolute, no links).
        allow_outside: follow links that resolve outside ``root`` (the user opted in).
        ignore_patterns: names left out, as ``shutil.ignore_patterns`` matches them (each file or
            folder name against each glob pattern); what they match is neither listed nor checked.
        opt_in: how the user may ship a link outside ``root`` on purpose (ends that refusal); None
            where there is no such option.
        name: what refusals call ``root``.
        excluded: folders never listed wherever they lie (absolute; sagemaker-tc's own output,
            cache and checkpoint folders). A job folder ``local_process`` made (it holds
            :data:`JOB_FOLDER_MARKER`) is never listed either.

    Raises:
        SourceLinkError: a link resolves outside ``root`` (unless ``allow_outside``), points to
            nothing, is part of a link loop, or leads to a folder that contains it.
    """
    entries: list[SourceEntry] = []
    walk = _Walk(root, allow_outside, tuple(ignore_patterns), opt_in, name, frozenset(p.resolve() for p in excluded))
    _visit(root, "", (root,), walk=walk, entries=entries)
    return entries


def _visit(folder: Path, prefix: str, ancestors: tuple[Path, ...], *, walk: _Walk, entries: list) -> None:
    for child in sorted(folder.iterdir(), key=lambda path: path.name):
        arcname = f"{prefix}{child.name}"
        if walk.ignored(child.name, arcname):
            continue
        target = _follow(child, arcname, walk) if child.is_symlink() else child
        if target.resolve() in walk.excluded or (target / JOB_FOLDER_MARKER).is_file():
            logger.info("Not shipping %s/%s: sagemaker-tc writes there", walk.name, arcname)
            continue
        if not target.is_dir():
            entries.append(SourceEntry(target, arcname, is_dir=False))
            continue
        if target in ancestors:
            raise SourceLinkError(
                f"{walk.name} link {arcname!r} points to {os.readlink(child)!r}, a folder that contains the link: "
                "packing it would never end (a symlink loop); remove the link"
            )
        entries.append(SourceEntry(target, arcname, is_dir=True))
        _visit(target, f"{arcname}/", (*ancestors, target), walk=walk, entries=entries)


def _follow(link: Path, arcname: str, walk: _Walk) -> Path:
    """The resolved target of ``link``, checked against the rules in the module docstring."""
    written = os.readlink(link)
    try:
        target = link.resolve(strict=True)
    except FileNotFoundError:
        raise SourceLinkError(
            f"{walk.name} link {arcname!r} points to {written!r}, which does not exist (a dangling link): "
            "remove the link or fix its target"
        ) from None
    except (RuntimeError, OSError) as error:  # RuntimeError: Python < 3.13's "Symlink loop"
        if isinstance(error, OSError) and error.errno != errno.ELOOP:
            raise SourceLinkError(
                f"{walk.name} link {arcname!r} points to {written!r}, which cannot be read: {error}"
            ) from None
        raise SourceLinkError(
            f"{walk.name} link {arcname!r} points to {written!r}, which leads back to itself (a symlink loop): "
            "remove the link or fix its target"
        ) from None
    if not walk.allow_outside and not target.is_relative_to(walk.root):
        fix = f"copy what the job needs into {walk.name}{', ' + walk.opt_in if walk.opt_in else ''}"
        raise SourceLinkError(
            f"{walk.name} link {arcname!r} points to {str(target)!r}, outside {walk.name} {str(walk.root)!r}: "
            f"sagemaker-tc does not ship files from outside {walk.name}, which would go into the job's code (and to "
            f"S3) with it; {fix}"
        )
    return target


def copy_entries(entries: list[SourceEntry], target: Path) -> None:
    """Copy a listing from :func:`source_entries` into the new folder ``target`` (links as what they
    point to, as the listing resolved them).

    Raises:
        FileExistsError: ``target`` exists.
    """
    target.mkdir(parents=True)
    for entry in entries:
        if entry.is_dir:
            (target / entry.arcname).mkdir()
        else:
            shutil.copy2(entry.path, target / entry.arcname)
