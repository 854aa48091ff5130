"""Hugging Face ``Trainer``: stop on SIGTERM with a checkpoint, and resume from the newest complete one.

- **Stop** (:func:`on_step_end`): once the job's :class:`~sagemaker_tc.compiler.stopping.StopSignal`
  says stop (agreed by every rank), the callback sets ``control.should_save`` and
  ``control.should_training_stop``: ``Trainer`` saves ``checkpoint-<step>`` into ``output_dir`` by its
  own code (model, optimizer, scheduler, RNG, data position in ``trainer_state.json``), and
  ``train()`` returns; the script goes on as after a finished ``train()``. Not transformers'
  ``enable_jit_checkpoint`` (transformers >= 5.x): its SIGTERM handler decides per process, so in a
  multi-rank job one rank can leave the loop while another steps on and waits in a collective until
  the kill; a script that turns it on keeps it, and ours stands aside.
- **Complete checkpoints** (:func:`on_save`): after ``Trainer`` wrote a checkpoint, global rank 0
  writes the compile plan file and then the completion marker (:mod:`sagemaker_tc.checkpoints`).
- **Progress** (:func:`on_step_end`): only with ``resume="auto"`` (a job that will resume), global rank
  0 records the finished step in ``output_dir``, at most every :data:`PROGRESS_INTERVAL_S` seconds, so a
  job resumed after a kill reports about how many steps were lost (``steps_lost``, to within that
  interval's steps). Not every step: ``output_dir`` may be the folder SageMaker syncs to S3
  (``/opt/ml/checkpoints``), which uploads each new version of the file.
- **Resume** (:func:`install_train_wrapper`): ``Trainer.train`` is wrapped while the session is open,
  to resolve ``resume_from_checkpoint`` (and ``resume="auto"``,
  :func:`sagemaker_tc.compiler.resume.checkpoint_to_resume`) and tell the session before ``train()``
  attaches the model.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagemaker_tc import checkpoints
from sagemaker_tc.compiler import resume

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 60.0
"""Seconds between two progress records of a ``Trainer`` job (the first step's is written at once)."""


def _clock() -> float:
    return time.monotonic()


@dataclass
class ProgressClock:
    """When a ``Trainer`` job last recorded its progress (monotonic seconds; None: never), one per callback."""

    recorded_at: float | None = None


def on_step_end(
    resume_mode: str | None,
    stop_agreed: Callable[[int | None], bool],
    clock: ProgressClock,
    args: Any,
    state: Any,
    control: Any,
) -> None:
    """After an optimizer step: record progress (rank 0, ``resume_mode`` (the config's ``resume``)
    ``"auto"`` only, at most every :data:`PROGRESS_INTERVAL_S` by ``clock``; module docstring) and,
    once ``stop_agreed(global_step)`` (every rank agreed the job was asked to stop), save and stop."""
    if resume_mode == "auto" and state.is_world_process_zero and args.output_dir:
        now, last = _clock(), clock.recorded_at
        if last is None or now - last >= PROGRESS_INTERVAL_S:
            checkpoints.record_progress(args.output_dir, state.global_step)
            clock.recorded_at = now
    if getattr(args, "enable_jit_checkpoint", False):
        return
    if stop_agreed(state.global_step):
        logger.warning(
            "STOPPING: the job was asked to stop; saving checkpoint-%d in %s and ending training",
            state.global_step,
            args.output_dir,
        )
        control.should_save = True
        control.should_training_stop = True


def on_save(plan_record: Callable[[], tuple[str, dict[str, Any] | None]], args: Any, state: Any) -> None:
    """After ``Trainer`` saved ``checkpoint-<global_step>``: the plan file (``plan_record()``: the
    requested plan and ``plan="auto"``'s decision), then the completion marker (rank 0)."""
    if not state.is_world_process_zero or not args.output_dir:
        return
    checkpoint = Path(args.output_dir) / f"{checkpoints.PREFIX}{state.global_step}"
    if not checkpoint.is_dir():
        return
    try:
        checkpoints.save_plan(checkpoint, *plan_record())
        checkpoints.mark_complete(checkpoint, state.global_step)
    except OSError:
        logger.exception("Could not mark %s complete (a resume will skip it)", checkpoint)


def install_train_wrapper(
    resume_mode: str | None, resume_from: Callable[[Path], Any], trainer_class: Any
) -> Callable[[], None]:
    """Wrap ``trainer_class.train`` (module docstring): the checkpoint to resume from, by
    ``resume_from_checkpoint`` and ``resume_mode`` (the config's ``resume``), goes to ``resume_from``
    (the session's) before ``train()`` runs. Returns the undo."""
    original = trainer_class.__dict__["train"]

    @functools.wraps(original)
    def train(self: Any, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any) -> Any:
        checkpoint = resume.checkpoint_to_resume(resume_from_checkpoint, self.args.output_dir, resume_mode)
        if checkpoint is not None:
            resume_from(checkpoint)
            resume_from_checkpoint = str(checkpoint)
        return original(self, resume_from_checkpoint, *args, **kwargs)

    trainer_class.train = train

    def restore() -> None:
        if trainer_class.__dict__.get("train") is train:
            trainer_class.train = original

    return restore
