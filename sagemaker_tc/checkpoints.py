"""Checkpoints a job can resume from: complete ones only, the newest first.

A checkpoint is a folder ``checkpoint-<step>`` (Hugging Face ``Trainer``'s name, ``PREFIX_CHECKPOINT_DIR``)
under a checkpoint folder (``TrainingArguments.output_dir``; on SageMaker, point it at
``/opt/ml/checkpoints``, the folder ``checkpoint_s3_uri`` syncs). It is *complete* once it holds
:data:`COMPLETE_MARKER`, written last (to a temporary name, then renamed): a job stopped or killed
while it wrote the checkpoint leaves a folder without the marker, and :func:`latest_complete` skips it.

- ``Trainer`` jobs: the launcher's ``Trainer`` callback writes the marker at ``on_save`` (after
  ``Trainer`` has written model, optimizer, scheduler, RNG and ``trainer_state.json``), together with
  :data:`PLAN_FILE` (the compile plan decision, so a resumed ``plan="auto"`` job skips the search).
- Plain loops: :func:`writing` gives a temporary folder to save into, and renames it to
  ``checkpoint-<step>`` with the marker when the block ends without an error.

:data:`PROGRESS_FILE` (``{"step": N}``, rewritten as the job steps) lets a resumed job report how many
optimizer steps the interrupted one finished after its last complete checkpoint (``steps_lost``).

Imports neither torch nor transformers (the SDK and the launcher read checkpoints too).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sagemaker_tc.errors import CheckpointArgumentError
from sagemaker_tc.paths import unwritable_reason, write_atomic

logger = logging.getLogger(__name__)

PREFIX = "checkpoint-"
COMPLETE_MARKER = "sagemaker_tc_complete.json"
PLAN_FILE = "sagemaker_tc_plan.json"
PROGRESS_FILE = "sagemaker_tc_progress.json"
_NAME = re.compile(rf"^{PREFIX}([0-9]+)\Z")  # \Z: "checkpoint-5\n" is not a checkpoint


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` through a temporary name and a rename, so a reader never sees half a file."""
    write_atomic(path, json.dumps(data, sort_keys=True))


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing or not a JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def step_of(checkpoint: Path) -> int | None:
    """The optimizer step in a ``checkpoint-<step>`` folder's name, else None."""
    match = _NAME.match(checkpoint.name)
    return int(match.group(1)) if match else None


def mark_complete(checkpoint: Path, step: int) -> None:
    """Write ``checkpoint``'s completion marker (last, once everything else in it is written)."""
    write_json(checkpoint / COMPLETE_MARKER, {"step": int(step)})


def is_complete(checkpoint: Path) -> bool:
    """True when ``checkpoint`` holds its completion marker."""
    return (checkpoint / COMPLETE_MARKER).is_file()


def checked_folder(folder: Any, function: str) -> Path:
    """``folder`` as a path, checked as :func:`writing` and :func:`latest_complete` take it.

    Raises:
        CheckpointArgumentError: None, a non-path type, an empty or blank string, or a file.
    """
    accepted = "a checkpoint folder is a path (str or os.PathLike), such as '/opt/ml/checkpoints'"
    if not isinstance(folder, (str, os.PathLike)) or isinstance(folder, bytes):
        raise CheckpointArgumentError(f"{function}(folder=...) got {type(folder).__name__}: {accepted}")
    path = os.fspath(folder)
    if not isinstance(path, str) or not path.strip():
        raise CheckpointArgumentError(f"{function}(folder={path!r}): {accepted}")
    if os.path.isfile(path):
        raise CheckpointArgumentError(f"{function}(folder={path!r}) is a file: {accepted}, a folder")
    return Path(path)


def latest_complete(folder: str | os.PathLike, accept: Callable[[Path], str | None] | None = None) -> Path | None:
    """The newest (highest step) complete ``checkpoint-<step>`` folder in ``folder``; None when there
    is none (or no such folder yet). Incomplete ones (no marker: interrupted while being written) are
    skipped with a log line naming them; links are never followed (a checkpoint lies in its folder).

    ``accept``: returns why a complete checkpoint cannot be resumed from (skipped with a warning,
    the next older one is tried), or None when it can.

    Raises:
        CheckpointArgumentError: ``folder`` is None, not a path (an int), empty, or a file.
    """
    folder = checked_folder(folder, "latest_complete")
    if not folder.is_dir():
        return None
    found = sorted(
        (
            (step, path)
            for path in Path(folder).iterdir()
            if not path.is_symlink() and path.is_dir() and (step := step_of(path)) is not None
        ),
        reverse=True,
    )
    for _step, path in found:
        if is_complete(path):
            problem = accept(path) if accept is not None else None
            if problem is None:
                return path
            logger.warning("Skipping checkpoint %s: %s; trying the one before it", path, problem)
            continue
        logger.warning("Skipping checkpoint %s: it has no completion marker (interrupted while it was written)", path)
    return None


@contextmanager
def writing(folder: str | os.PathLike, step: int) -> Iterator[Path]:
    """Save a plain loop's checkpoint for optimizer ``step`` atomically::

        with sagemaker_tc.checkpoints.writing("/opt/ml/checkpoints", step) as target:
            torch.save(state, target / "state.pt")

    Yields an empty temporary folder next to the checkpoint; when the block ends without an error it
    gets the completion marker and is renamed to ``checkpoint-<step>`` (replacing one of that name,
    which is set aside first and removed only after the rename; a file or link of that name is
    replaced, never followed).
    When the block raises, the temporary folder is removed and nothing else changes.

    Raises:
        CheckpointArgumentError: ``step`` is not an int >= 0 (a float, a bool, a string: a checkpoint
            named after it would never be found by :func:`latest_complete`); ``folder`` is None, not
            a path, empty, a file, or a folder that cannot be made (``/proc/x``, a file on its path).
    """
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointArgumentError(
            f"step={step!r}: a checkpoint's optimizer step is an int >= 0 (it names the folder checkpoint-<step>)"
        )
    parent = checked_folder(folder, "writing")
    reason = unwritable_reason(parent)
    if reason is not None:
        raise CheckpointArgumentError(
            f"writing(folder={str(parent)!r}) cannot hold checkpoints: {reason}; give a folder you can write to "
            "(it is created if missing)"
        )
    parent.mkdir(parents=True, exist_ok=True)
    target = parent / f"{PREFIX}{step}"
    partial = parent / f".{target.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _save_session_plan(partial)
    mark_complete(partial, step)
    _put_in_place(partial, target)


def _put_in_place(partial: Path, target: Path) -> None:
    """Rename the finished ``partial`` folder to ``target``. What ``target`` held (an older checkpoint
    of that step; a file or a link, never followed) is first renamed aside and removed only once the
    new checkpoint has its name, so it is never deleted while the new one is still hidden."""
    replaced = target.with_name(f".{target.name}.replaced")
    _remove(replaced)  # left by a job killed between the two renames below
    if target.exists() or target.is_symlink():
        os.replace(target, replaced)
    os.replace(partial, target)
    _remove(replaced)


def _remove(path: Path) -> None:
    """Remove ``path``: a link or a file is unlinked (a link's target is left alone), a folder removed whole."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _save_session_plan(folder: Path) -> None:
    """The open compiler session's plan decision into ``folder`` (nothing outside a job)."""
    session_module = sys.modules.get("sagemaker_tc.compiler.session")
    session = session_module.current_session() if session_module is not None else None
    if session is not None:
        save_plan(folder, *session.plan_record())


def record_progress(folder: str | os.PathLike, step: int) -> None:
    """Record that the job finished optimizer ``step`` (see :func:`steps_lost`); never raises."""
    try:
        write_json(Path(folder) / PROGRESS_FILE, {"step": int(step)})
    except OSError as error:
        logger.debug("Could not record progress in %s: %s", folder, error)


def steps_lost(folder: str | os.PathLike, checkpoint_step: int) -> int | None:
    """Optimizer steps an interrupted job finished after its checkpoint at ``checkpoint_step``, as
    its last :func:`record_progress` says (None when it recorded none)."""
    progress = read_json(Path(folder) / PROGRESS_FILE)
    if progress is None or not isinstance(progress.get("step"), int):
        return None
    return max(0, progress["step"] - checkpoint_step)


def plan_file(requested: str, decision: dict[str, Any] | None) -> dict[str, Any]:
    """What a checkpoint keeps of the compile plan: the requested plan and ``auto``'s decision (left
    out when None)."""
    data: dict[str, Any] = {"requested": requested}
    if decision is not None:
        data["decision"] = decision
    return data


def save_plan(checkpoint: Path, requested: str, decision: dict[str, Any] | None) -> None:
    """Write :func:`plan_file` into ``checkpoint`` (before its completion marker)."""
    write_json(checkpoint / PLAN_FILE, plan_file(requested, decision))
