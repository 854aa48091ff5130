"""A job that resumes from a checkpoint: which checkpoint, what the interrupted job had done, and the
compile plan it had chosen.

- :func:`checkpoint_to_resume`: what a ``Trainer.train(resume_from_checkpoint=...)`` call resumes
  from, with ``TrainingCompilerConfig(resume="auto")`` choosing the newest complete checkpoint when
  the script passes none (:mod:`sagemaker_tc.checkpoints`).
- :func:`begin`: what the session keeps (:meth:`~sagemaker_tc.compiler.session.CompilerSession.resume_from`);
  the report then carries ``resumed_from`` (step, checkpoint,
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
from sagemaker_tc.compiler.planner import COMPILED_PLANS, EAGER

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
    if resume != "auto" and requested is not True:
        return None
    usable = isinstance(folder, (str, os.PathLike)) and str(folder).strip() and Path(folder).is_dir()
    found = checkpoints.latest_complete(folder, accept=trainer_state_problem) if usable else None
    if requested is True:
        return found
    if found is None:
        logger.info("resume='auto': no complete checkpoint in %s; training starts at step 0", folder)
    return found


TRAINER_STATE = "trainer_state.json"  # transformers' TRAINER_STATE_NAME


def trainer_state_problem(checkpoint: Path) -> str | None:
    """Why ``Trainer`` could not resume from ``checkpoint``: its ``trainer_state.json`` is there but
    not a JSON object (a corrupt file would stop ``train()`` with a bare ``JSONDecodeError``); None
    when it is readable or absent."""
    path = checkpoint / TRAINER_STATE
    if path.exists() and checkpoints.read_json(path) is None:
        return f"its {TRAINER_STATE} is not a JSON object"
    return None


def begin(checkpoint: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A job resumes from ``checkpoint``: log it, and read what the session keeps
    (:meth:`~sagemaker_tc.compiler.session.CompilerSession.resume_from`).

    Returns:
        ``(resumed_from, saved plan)``: the report's ``resumed_from``, ``{"checkpoint", "step",
        "steps_lost"}`` (``steps_lost``: optimizer steps the interrupted job finished after this
        checkpoint, None when it recorded none); and :func:`saved_plan` of the checkpoint (None when
        it has none the job can take).
    """
    step = checkpoints.step_of(checkpoint)
    lost = checkpoints.steps_lost(checkpoint.parent, step) if step is not None else None
    resumed = {"checkpoint": str(checkpoint), "step": step, "steps_lost": lost}
    saved = saved_plan(checkpoint)
    logger.info(
        "RESUMING from %s (step %s%s)",
        checkpoint,
        step,
        f"; the interrupted job had run {lost} more step(s) after it, lost" if lost else "",
    )
    return resumed, saved


REQUESTED_PLANS = ("auto", *COMPILED_PLANS)  # TrainingCompilerConfig.plan's values
# What :meth:`sagemaker_tc.compiler.schedule.PlanSchedule` records of a decision (nothing else is taken).
DECISION_FIELDS = (
    "chosen",
    "job_steps",
    "job_steps_source",
    "decided_at_step",
    "remaining_steps",
    "projections",
    "source",
    "reason",
)


def saved_plan(checkpoint: Path) -> dict[str, Any] | None:
    """The plan file of ``checkpoint`` (:func:`sagemaker_tc.checkpoints.plan_file`) when it is one a
    job wrote: a file of the checkpoint's own (not a link), a JSON object whose ``requested`` is a
    plan of :class:`~sagemaker_tc.config.TrainingCompilerConfig` and whose decision, if any, chose
    one of the plans or eager. Only those fields are kept.

    Returns:
        ``{"requested": str, "decision": dict}`` (``decision`` when saved); None when the checkpoint
        has no plan file, or (logged as a warning: the job then chooses its plan as a new job does)
        when the file is not such a plan file.
    """
    path = checkpoint / checkpoints.PLAN_FILE
    if not path.exists() and not path.is_symlink():
        return None
    problem, saved = _plan_problem(path)
    if problem is not None:
        logger.warning(
            "Ignoring the plan file %s of the checkpoint: %s; this job chooses its compile plan as a new job does",
            path,
            problem,
        )
        return None
    return saved


def _plan_problem(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """``(why the plan file at path is not taken, the fields taken)``: one of the two is None."""
    if path.is_symlink() or not path.is_file():
        return "it is a link or not a file (a plan file is a file of the checkpoint's own)", None
    saved = checkpoints.read_json(path)
    if saved is None:
        return "it is not a JSON object", None
    requested, decision = saved.get("requested"), saved.get("decision")
    if requested not in REQUESTED_PLANS:
        return f"it names no known plan (requested={str(requested)[:40]!r}; known: {', '.join(REQUESTED_PLANS)})", None
    if decision is None:
        return None, {"requested": requested}
    if not isinstance(decision, dict) or decision.get("chosen") not in (*COMPILED_PLANS, EAGER):
        return f"its decision names no known plan (known: {', '.join((*COMPILED_PLANS, EAGER))})", None
    return None, {"requested": requested, "decision": {k: v for k, v in decision.items() if k in DECISION_FIELDS}}
