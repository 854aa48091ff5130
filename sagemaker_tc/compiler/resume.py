"""A job that resumes from a checkpoint: which checkpoint, what the interrupted job had done, and the
compile plan it had chosen.

- :func:`checkpoint_to_resume`: what a ``Trainer.train(resume_from_checkpoint=...)`` call resumes
  from, with ``TrainingCompilerConfig(resume="auto")`` choosing the newest complete checkpoint when
  the script passes none (:mod:`sagemaker_tc.checkpoints`).
- :func:`begin`: tell the session; the report then carries ``resumed_from`` (step, checkpoint,
  ``steps_lost``), and ``plan="auto"`` takes the interrupted job's decision
  (``plan_decision.source: "resumed"``) instead of measuring eager and trial steps again.
- :func:`sagemaker_tc.checkpoints.save_plan`: what the session saves into each checkpoint for that.

Why resuming is opt-in for a script that calls ``trainer.train()`` without
``resume_from_checkpoint``: such a script says it starts from step 0, and a folder that happens to
hold old checkpoints (a reused ``output_dir``) must not silently change what it trains.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sagemaker_tc import checkpoints

logger = logging.getLogger("sagemaker_tc.compiler")


def checkpoint_to_resume(requested: Any, folder: str | os.PathLike | None, resume: str | None) -> Path | None:
    """The checkpoint a ``Trainer.train(resume_from_checkpoint=requested)`` call resumes from.

    Args:
        requested: the script's argument: a path (kept), True (the newest complete checkpoint in
            ``folder``, else None so that transformers applies its own rule), None/False (nothing,
            unless ``resume="auto"``).
        folder: the checkpoint folder (``TrainingArguments.output_dir``).
        resume: the config's ``resume`` (``"auto"`` or None).
    """
    if isinstance(requested, (str, os.PathLike)):
        return Path(requested)
    if requested is True:
        return checkpoints.latest_complete(folder)
    if resume != "auto":
        return None
    found = checkpoints.latest_complete(folder)
    if found is None:
        logger.info("resume='auto': no complete checkpoint in %s; training starts at step 0", folder)
    return found


def begin(session: Any, checkpoint: Path) -> dict[str, Any]:
    """Record that ``session``'s job resumes from ``checkpoint`` (before the model is attached) and hand
    the saved plan decision to its runtime. Returns the report's ``resumed_from``:
    ``{"checkpoint", "step", "steps_lost"}`` (``steps_lost``: optimizer steps the interrupted job
    finished after this checkpoint, None when it recorded none)."""
    step = checkpoints.step_of(checkpoint)
    lost = checkpoints.steps_lost(checkpoint.parent, step) if step is not None else None
    resumed = {"checkpoint": str(checkpoint), "step": step, "steps_lost": lost}
    session.resumed_from = resumed
    saved = checkpoints.read_json(checkpoint / checkpoints.PLAN_FILE)
    if saved is not None and isinstance(saved.get("requested"), str):
        session.runtime.resumed_decision = saved
    logger.info(
        "RESUMING from %s (step %s%s)",
        checkpoint,
        step,
        f"; the interrupted job had run {lost} more step(s) after it, lost" if lost else "",
    )
    return resumed
