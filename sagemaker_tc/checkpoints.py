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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sagemaker_tc.paths import write_atomic

logger = logging.getLogger(__name__)

PREFIX = "checkpoint-"
COMPLETE_MARKER = "sagemaker_tc_complete.json"
PLAN_FILE = "sagemaker_tc_plan.json"
PROGRESS_FILE = "sagemaker_tc_progress.json"
_NAME = re.compile(rf"^{PREFIX}(\d+)$")


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


def latest_complete(folder: str | os.PathLike | None) -> Path | None:
    """The newest (highest step) complete ``checkpoint-<step>`` folder in ``folder``; None when there
    is none (or no such folder). Incomplete ones (no marker: interrupted while being written) are
    skipped with a log line naming them."""
    if folder is None or not Path(folder).is_dir():
        return None
    found = sorted(
        ((step, path) for path in Path(folder).iterdir() if path.is_dir() and (step := step_of(path)) is not None),
        reverse=True,
    )
    for _step, path in found:
        if is_complete(path):
            return path
        logger.warning("Skipping checkpoint %s: it has no completion marker (interrupted while it was written)", path)
    return None


@contextmanager
def writing(folder: str | os.PathLike, step: int) -> Iterator[Path]:
    """Save a plain loop's checkpoint for optimizer ``step`` atomically::

        with sagemaker_tc.checkpoints.writing("/opt/ml/checkpoints", step) as target:
            torch.save(state, target / "state.pt")

    Yields an empty temporary folder next to the checkpoint; when the block ends without an error it
    gets the completion marker and is renamed to ``checkpoint-<step>`` (replacing one of that name).
    When the block raises, the temporary folder is removed and nothing else changes.

    Raises:
        ValueError: ``step`` is negative.
    """
    if step < 0:
        raise ValueError(f"step={step}: a checkpoint's optimizer step is >= 0")
    parent = Path(folder)
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
    if target.exists():
        shutil.rmtree(target)
    os.replace(partial, target)


def _save_session_plan(folder: Path) -> None:
    """The open compiler session's plan decision into ``folder`` (nothing outside a job)."""
    session_module = sys.modules.get("sagemaker_tc.compiler.session")
    session = session_module.current_session() if session_module is not None else None
    if session is not None:
        save_plan(session, folder)


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


def plan_file(session: Any) -> dict[str, Any]:
    """What a checkpoint keeps of the compile plan: the requested plan and ``auto``'s decision."""
    runtime = session.runtime
    requested = runtime.config.plan if runtime.config is not None else session.config.plan
    data: dict[str, Any] = {"requested": requested}
    if runtime.decision is not None:
        data["decision"] = runtime.decision
    return data


def save_plan(session: Any, checkpoint: Path) -> None:
    """Write :func:`plan_file` into ``checkpoint`` (before its completion marker)."""
    write_json(checkpoint / PLAN_FILE, plan_file(session))
