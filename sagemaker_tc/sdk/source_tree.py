"""Which files of ``source_dir`` are shipped with a job, and the rules for symbolic links in it.

Everything under ``source_dir`` is shipped except ``__pycache__``, ``.git``, ``.ipynb_checkpoints``
and ``*.pyc``. A symbolic link is shipped as what it points to, when that is inside ``source_dir``.
A link that resolves outside it (``passwd -> /etc/passwd``, ``aws -> ~/.aws``) would upload files the
user never meant to ship, so it is refused unless the estimator was given
``allow_symlinks_outside_source_dir=True``. A link that points nowhere, or a folder link that leads
back to a folder containing it (``up -> ..``), is refused with the link's name: packing could not
finish or would ship nothing.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from sagemaker_tc.errors import SourceLinkError

SKIPPED_NAMES = frozenset({"__pycache__", ".git", ".ipynb_checkpoints"})
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
    """True for paths never shipped: caches, git metadata and compiled Python files."""
    return any(part in SKIPPED_NAMES for part in arcname.split("/")) or arcname.endswith(SKIPPED_SUFFIXES)


def source_entries(root: Path, *, allow_outside: bool = False) -> list[SourceEntry]:
    """Every file and folder under ``root`` to ship, in a stable (sorted) order, links resolved.

    Args:
        root: ``source_dir``, resolved (absolute, no links).
        allow_outside: follow links that resolve outside ``root`` (the user opted in).

    Raises:
        SourceLinkError: a link resolves outside ``root`` (unless ``allow_outside``), points to
            nothing, is part of a link loop, or leads to a folder that contains it.
    """
    entries: list[SourceEntry] = []
    _visit(root, "", (root,), root=root, allow_outside=allow_outside, entries=entries)
    return entries


def _visit(
    folder: Path, prefix: str, ancestors: tuple[Path, ...], *, root: Path, allow_outside: bool, entries: list
) -> None:
    for child in sorted(folder.iterdir(), key=lambda path: path.name):
        arcname = f"{prefix}{child.name}"
        if skipped(arcname):
            continue
        target = _follow(child, arcname, root=root, allow_outside=allow_outside) if child.is_symlink() else child
        if not target.is_dir():
            entries.append(SourceEntry(target, arcname, is_dir=False))
            continue
        if target in ancestors:
            raise SourceLinkError(
                f"source_dir link {arcname!r} points to {os.readlink(child)!r}, a folder that contains the link: "
                "packing it would never end (a symlink loop); remove the link"
            )
        entries.append(SourceEntry(target, arcname, is_dir=True))
        _visit(target, f"{arcname}/", (*ancestors, target), root=root, allow_outside=allow_outside, entries=entries)


def _follow(link: Path, arcname: str, *, root: Path, allow_outside: bool) -> Path:
    """The resolved target of ``link``, checked against the rules in the module docstring."""
    written = os.readlink(link)
    try:
        target = link.resolve(strict=True)
    except FileNotFoundError:
        raise SourceLinkError(
            f"source_dir link {arcname!r} points to {written!r}, which does not exist (a dangling link): "
            "remove the link or fix its target"
        ) from None
    except (RuntimeError, OSError) as error:  # RuntimeError: Python < 3.13's "Symlink loop"
        if isinstance(error, OSError) and error.errno != errno.ELOOP:
            raise SourceLinkError(
                f"source_dir link {arcname!r} points to {written!r}, which cannot be read: {error}"
            ) from None
        raise SourceLinkError(
            f"source_dir link {arcname!r} points to {written!r}, which leads back to itself (a symlink loop): "
            "remove the link or fix its target"
        ) from None
    if not allow_outside and not target.is_relative_to(root):
        raise SourceLinkError(
            f"source_dir link {arcname!r} points to {str(target)!r}, outside source_dir {str(root)!r}: sagemaker-tc "
            "does not ship files from outside source_dir, which would go into the job's code (and to S3) with it; "
            "copy what the job needs into source_dir, or pass allow_symlinks_outside_source_dir=True to the "
            "estimator if you mean to ship it"
        )
    return target
