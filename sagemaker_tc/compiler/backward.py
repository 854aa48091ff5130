"""A compile plan's backward inside the fallback.

AOTAutograd compiles each graph's backward with its forward, but runs it in ``loss.backward()``,
outside the compiled call :class:`~sagemaker_tc.compiler.plan_call.GuardedCall` guards: a kernel error,
an out-of-memory error, a backward kernel's first-run autotuning or a gradient-checkpoint recompute
fails there, where no eager rerun of the same call is possible.

- **Every job** (:func:`watch_backward`): while the session is open, ``torch.Tensor.backward`` is
  wrapped. When it raises while a compiled plan runs, that plan ends for the job
  (``on_failure(plan, error)``: the runtime records it, which the compile history keeps so the next
  job's ``auto`` skips it, and steps back to the next safer plan or eager; ``policy="strict"`` raises
  :class:`~sagemaker_tc.errors.CompilerError` there) and :class:`~sagemaker_tc.errors.CompiledBackwardError`
  is raised, naming the plan and what to set. A plain loop, which calls ``backward()`` itself, gets
  that error. ``torch.autograd.backward`` and ``torch.autograd.grad`` called directly are not watched.
- **Trainer** (:func:`rerun_failed_steps`): ``Trainer.training_step`` is wrapped: on
  :class:`~sagemaker_tc.errors.CompiledBackwardError` in a one-process job the model's gradients are
  zeroed (a partial backward may have added to some) and the step runs again, once, on the plan the
  job stepped back to. With gradient accumulation the optimizer step then misses the micro-batches
  before the failure. A multi-process job does not rerun: the ranks' collectives inside the backward
  (DDP's buckets, FSDP2's reduce-scatters) may have run on some ranks only, so the error ends the job.
  If the rerun fails too, the error is the model's own and propagates.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.failures import error_summary, free_device_memory, is_out_of_memory
from sagemaker_tc.errors import CompiledBackwardError

logger = logging.getLogger("sagemaker_tc.compiler")


def watch_backward(
    active_plan: Callable[[], str], on_failure: Callable[[str, BaseException], str]
) -> Callable[[], None]:
    """Wrap ``torch.Tensor.backward`` (module docstring) until the returned undo is called.

    Args:
        active_plan: the plan running now (``"eager"``: nothing compiled, errors pass through as they are).
        on_failure: ``on_failure(plan, error)`` ends ``plan`` and returns the plan the job runs next;
            it may raise (``policy="strict"``).
    """
    import torch

    original = torch.Tensor.backward

    @functools.wraps(original)
    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        plan = active_plan()
        if plan == planner.EAGER:
            return original(self, *args, **kwargs)
        try:
            return original(self, *args, **kwargs)
        except CompiledBackwardError:
            raise
        except Exception as error:
            raise _ended(plan, error, on_failure) from error

    torch.Tensor.backward = backward

    def undo() -> None:
        if torch.Tensor.backward is backward:
            torch.Tensor.backward = original

    return undo


def _ended(plan: str, error: BaseException, on_failure: Callable[[str, BaseException], str]) -> CompiledBackwardError:
    """End ``plan`` for ``error`` raised in its compiled backward; the error to raise in its place."""
    target = on_failure(plan, error)  # drops the plan's recordings first, so their pool can be freed
    if is_out_of_memory(error):
        free_device_memory()
    advice = f"the job now runs {target!r}" + (
        f"; to start there, set TrainingCompilerConfig(plan={target!r})"
        if target != planner.EAGER
        else "; to train uncompiled, set TrainingCompilerConfig(enabled=False)"
    )
    return CompiledBackwardError(
        f"plan {plan!r} failed in its compiled backward ({error_summary(error)}). This step's gradients are "
        f"incomplete: zero them and run the step again; {advice}. The compile history records {plan!r} as "
        "failed for this workload, so the next job's plan='auto' skips it",
        plan=plan,
        stepped_back_to=target,
    )


def rerun_failed_steps(trainer_class: Any, single_process: Callable[[], bool]) -> Callable[[], None]:
    """Wrap ``trainer_class.training_step`` (module docstring) until the returned undo is called.

    Args:
        single_process: True when the job trains in one process (only then is a step rerun).
    """
    original = trainer_class.__dict__["training_step"]

    @functools.wraps(original)
    def training_step(self: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, model, *args, **kwargs)
        except CompiledBackwardError as error:
            if not single_process():
                raise
            logger.warning(
                "COMPILED BACKWARD FAILED: plan %s ended; gradients zeroed, the step runs again on %s",
                error.plan,
                error.stepped_back_to,
            )
            model.zero_grad(set_to_none=True)
        return original(self, model, *args, **kwargs)

    trainer_class.training_step = training_step

    def undo() -> None:
        if trainer_class.__dict__.get("training_step") is training_step:
            trainer_class.training_step = original

    return undo
