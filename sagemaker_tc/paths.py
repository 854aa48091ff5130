"""Checks of local folders a command or a job will write to, run before any work starts.

Used by the estimators and ``ModelTrainer`` (a local ``output_path``) and by ``sagemaker-tc bench
--out``: a folder that cannot be written should fail with its reason before a job or a benchmark
runs, not as a ``FileNotFoundError`` deep inside it. Imports only the standard library.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
