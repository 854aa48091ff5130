"""Warnings that point at the user's own line, however deep in sagemaker-tc they are raised.

Python shows a ``DeprecationWarning`` by default only when it is attributed to ``__main__``, and a
warning's location is what a user reads first; a fixed ``stacklevel`` breaks whenever a check moves
one call deeper. :func:`warn_user` counts the frames instead.
"""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import pydantic

# Frames in these folders are ours (or pydantic's, which calls the config's validators).
_SKIPPED = (str(Path(__file__).resolve().parent), str(Path(pydantic.__file__).resolve().parent))


def _outside_skipped(filename: str) -> bool:
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, RuntimeError):
        return True
    return not any(resolved == folder or resolved.startswith(folder + "/") for folder in _SKIPPED)


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the first caller outside sagemaker_tc and
    pydantic (the user's ``HuggingFace(...)`` or ``TrainingCompilerConfig(...)`` line)."""
    frame = inspect.currentframe()
    level = 1
    while frame is not None and not _outside_skipped(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    del frame
    warnings.warn(message, category, stacklevel=level)
