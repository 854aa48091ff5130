"""What failed in a job's compile plans, and where a failed plan steps back to.

A plan that failed (a compiled call raised while the same call ran eagerly, or it ran out of
memory) never runs again in the job; the job steps back to the next safer plan that has not failed
(:data:`STEP_BACK`), else eager. Pure (no torch): :class:`~sagemaker_tc.compiler.runtime.CompilerRuntime`
records failures here, hands :class:`FailureHandling` what ends a plan (``on_end``), and installs what
:meth:`PlanFailures.step_back` names.
"""

from __future__ import annotations

import logging
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagemaker_tc._internals import error_chain
from sagemaker_tc.errors import CompilerError, CompilerFallbackWarning

logger = logging.getLogger("sagemaker_tc.compiler")

EAGER = "eager"
STEP_BACK: dict[str, tuple[str, ...]] = {"step": ("model", "regional"), "model": ("regional",), "regional": ()}
"""The safer plans a failed plan steps back to, in order (eager after them all): each compiles less
than the one before (``step``'s update and CUDA graphs, ``model``'s whole-model graph)."""
FAILS_WITH: dict[str, tuple[str, ...]] = {"model": ("step",)}
"""Plans a failure ends too: ``step`` compiles the same whole-model graph as ``model``."""


class PlanFailures:
    """The plan failures of one job process, in order.

    Attributes:
        records: one dict per failure: ``plan``, ``kind`` (``"compiler_error"``,
            ``"out_of_memory"`` or ``"recompile_limit"``), ``reason`` (the error's first lines),
            ``at_step`` (optimizer steps finished before it), ``ends`` (the plans it ended: the plan
            and :data:`FAILS_WITH`'s), and ``stepped_back_to`` (set by the caller once it knows).
    """

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def ended(self) -> set[str]:
        """The plans that never run again in this job."""
        return {name for record in self.records for name in record["ends"]}

    def record(self, plan: str, kind: str, reason: str, step: int) -> dict[str, Any]:
        """Record that ``plan`` failed; returns the record (``stepped_back_to`` still None)."""
        record = {
            "plan": plan,
            "kind": kind,
            "reason": reason,
            "at_step": step,
            "ends": [plan, *FAILS_WITH.get(plan, ())],
            "stepped_back_to": None,
        }
        self.records.append(record)
        return record

    def step_back(self, plan: str, allowed: Callable[[str], bool]) -> str:
        """``plan`` itself when it has not failed; else the first of its :data:`STEP_BACK` plans that
        has not failed and ``allowed(name)`` accepts; else eager."""
        ended = self.ended()
        if plan not in ended:
            return plan
        return next((safer for safer in STEP_BACK.get(plan, ()) if safer not in ended and allowed(safer)), EAGER)


class FailureHandling:
    """How a failed plan ends: recorded in ``failed``, its measurements invalidated, the job stepped
    back by the runtime's ``on_end(plan, failure)`` (which sets ``failure["stepped_back_to"]``), and
    said (:func:`announce`). Handed what it reads of the runtime as callables; imports no runtime.

    Args:
        failed: the job's plan failures.
        on_end: ``(plan, failure)``: the runtime steps back from ``plan`` (called under ``lock``).
        active: the plan that runs.
        steps: optimizer steps finished so far (0 before the schedule).
        invalidate: ``(plan, reason)``: the plan's measurements are not to be trusted.
        strict: the config says ``policy="strict"``.
        running: a compiled call of a plan is under way.
        evaluation_failed: ``(plan, reason)``: evaluation runs eager under ``plan`` from now on.
        lock: held while a plan ends (the runtime's, held too while it changes plans).
    """

    def __init__(
        self,
        failed: PlanFailures,
        *,
        on_end: Callable[[str, dict[str, Any]], None],
        active: Callable[[], str],
        steps: Callable[[], int],
        invalidate: Callable[[str, str], None],
        strict: Callable[[], bool],
        running: Callable[[], bool],
        evaluation_failed: Callable[[str, str], None],
        lock: Any,
    ) -> None:
        self.failed, self.on_end, self.active, self.steps = failed, on_end, active, steps
        self.invalidate, self.strict, self.running = invalidate, strict, running
        self.evaluation_failed, self.lock = evaluation_failed, lock

    def plan_failed(self, plan: str, error: BaseException) -> None:
        """A compiled call of ``plan`` failed while the same call ran eagerly (or the step plan's
        update failed while the as-built update worked): ``plan`` never runs again in this job, and
        the job steps back. An out-of-memory error is not the compiler's failure: it ends the plan
        under either policy.

        Raises:
            CompilerError: under ``policy="strict"`` for a compiler failure, naming the plan, with
                ``error`` as the cause.
        """
        self.end(plan, *judge(plan, error, strict=self.strict()))

    def end(self, plan: str, kind: str, reason: str) -> None:
        """``plan`` never runs again in this job: record it (``kind``), invalidate its measurements,
        step back to the next safer plan (or eager: ``on_end``) and say so."""
        with self.lock:
            if plan in self.failed.ended():
                return  # another region of the same plan, in the same step: handled
            failure = self.failed.record(plan, kind, reason, self.steps())
            for name in failure["ends"]:
                self.invalidate(name, f"{failure['kind']}: {reason}" if name == plan else f"{plan} failed")
            self.on_end(plan, failure)
        announce(failure)

    def eval_failed(self, plan: str, error: BaseException) -> None:
        """A compiled evaluation call of ``plan`` (module in eval mode) failed while the same call ran
        eagerly: evaluation runs eager from now on, training keeps ``plan`` (its own calls did not
        fail). Under ``policy="strict"`` (and for an out-of-memory error) it is :meth:`plan_failed`.

        Raises:
            CompilerError: under ``policy="strict"``, as :meth:`plan_failed`.
        """
        if self.strict() or is_out_of_memory(error):
            self.plan_failed(plan, error)
            return
        self.evaluation_failed(plan, error_summary(error))

    def backward_failed(self, plan: str, error: BaseException) -> str:
        """``plan``'s compiled backward raised in ``loss.backward()`` (:mod:`.backward`): end it as
        :meth:`plan_failed` does. Returns the plan the job runs from now on.

        Raises:
            CompilerError: under ``policy="strict"``, as :meth:`plan_failed`.
        """
        self.plan_failed(plan, error)
        return self.active()

    def recompile_limit_hit(self, message: str) -> None:
        """Dynamo hit a recompile limit while the active plan ran: its trial ran partly eager, so
        invalid, and the plan ends (kind ``recompile_limit``, under either policy: this runs inside
        dynamo's frame evaluation, where raising is not the user's error): past its limit each call of
        the frame would walk every cached guard and then run uncompiled, under the plan's name. A
        limit hit by a function the script compiled itself (no plan call under way, and not one of the
        plans' ``plan_forward__*`` code objects) is not the plan's."""
        if not self.running() and "plan_forward__" not in message:
            logger.info("Recompile limit hit outside the compile plan's calls (the script's own compiled code)")
            return
        plan = self.active()
        if plan == EAGER:
            return
        self.invalidate(plan, f"recompile limit hit: {message[:200]}")
        self.end(plan, "recompile_limit", message[:200])


def judge(plan: str, error: BaseException, *, strict: bool) -> tuple[str, str]:
    """A compiled call of ``plan`` failed while the same call ran eagerly: ``(kind, reason)`` of the
    failure that ends the plan (``"out_of_memory"`` or ``"compiler_error"``, the error's summary). An
    out-of-memory error is not the compiler's failure: it ends the plan under either policy.

    Raises:
        CompilerError: ``strict`` (``policy="strict"``) for a compiler failure, naming the plan, with
            ``error`` as the cause.
    """
    out_of_memory = is_out_of_memory(error)
    reason = error_summary(error)
    if not out_of_memory and strict:
        raise CompilerError(f"plan {plan!r} failed and policy='strict' does not fall back: {reason}") from error
    return ("out_of_memory" if out_of_memory else "compiler_error"), reason


def announce(failure: dict[str, Any]) -> None:
    """Say a plan failed: the log's ``COMPILE PLAN`` line (and ``COMPILER FAILED, CONTINUING
    UNCOMPILED`` when the job steps back to eager) and a :class:`CompilerFallbackWarning`."""
    plan, reason, target = failure["plan"], failure["reason"], failure["stepped_back_to"]
    logger.error(
        "COMPILE PLAN: %s failed at step %d (%s: %s); stepping back to %s",
        plan,
        failure["at_step"],
        failure["kind"],
        reason,
        target,
    )
    if target == EAGER:
        logger.error("COMPILER FAILED, CONTINUING UNCOMPILED (policy='fallback'): %s", reason)
    warnings.warn(
        f"sagemaker-tc: plan {plan} failed ({reason}); training continues with {target}",
        CompilerFallbackWarning,
        stacklevel=4,
    )


def error_summary(error: BaseException) -> str:
    """``"TypeName: first lines of the message"`` (:func:`first_lines`). An ``AssertionError`` that
    torch's gradient checkpointing raised (:func:`checkpoint_assertion`) is named and explained; any
    other bare ``assert`` gets the file, line and statement that failed."""
    summary = f"{type(error).__name__}: {first_lines(str(error))}"
    if not isinstance(error, AssertionError):
        return summary
    explained = checkpoint_assertion(error)
    if explained is not None:
        return f"{summary} {explained}"
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ is not None else []
    if frames and not str(error).strip():
        frame = frames[-1]
        return f"{summary} at {Path(frame.filename).name}:{frame.lineno} ({(frame.line or '').strip()[:200]})"
    return summary


CHECKPOINT_ASSERTION = (
    "torch.utils.checkpoint asserted while it recomputed a checkpointed block for the backward: the "
    "recompute saved more tensors than the block's first forward did (early stop is on), so the compiled "
    "forward and its eager recompute do not match. This is a torch limit of gradient checkpointing under "
    "torch.compile, not your script's error: the plan ends and training goes on with a safer one (turn "
    "gradient checkpointing off to keep the plan)"
)
"""What an ``AssertionError`` from torch's non-reentrant checkpoint means (torch 2.8's bare
``assert not target_frame.early_stop``; later torch says ``Unexpected state: target_frame.early_stop is set``)."""


def checkpoint_assertion(error: BaseException) -> str | None:
    """:data:`CHECKPOINT_ASSERTION` with the assertion's line, when ``error`` (or an error it was
    raised from) is an ``AssertionError`` raised in ``torch/utils/checkpoint.py``; else None."""
    for cause in error_chain(error):
        if not isinstance(cause, AssertionError) or cause.__traceback__ is None:
            continue
        frame = traceback.extract_tb(cause.__traceback__)[-1]
        if Path(frame.filename).as_posix().endswith("torch/utils/checkpoint.py"):
            statement = (frame.line or "").strip()[:200]
            return f"[{statement} at torch/utils/checkpoint.py:{frame.lineno}] {CHECKPOINT_ASSERTION}"
    return None


def first_lines(text: str, limit: int = 600) -> str:
    """The first lines of an error message, without torch's "Set TORCHDYNAMO_VERBOSE=1 ..." advice."""
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("Set TORCHDYNAMO_")]
    return " ".join(lines[:3])[:limit] if lines else "(no message)"


def is_out_of_memory(error: BaseException) -> bool:
    """True when ``error``, or an error it was raised from, is an out-of-memory error:
    ``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError`` before torch 2.5), or a
    ``RuntimeError`` whose message says so (the CPU allocator's "can't allocate memory" when the host
    refuses an allocation). Imports torch."""
    import torch

    kinds = tuple(k for k in (getattr(torch, "OutOfMemoryError", None), torch.cuda.OutOfMemoryError) if k)
    for cause in error_chain(error):
        text = str(cause).lower()[:300]
        if isinstance(cause, kinds) or "out of memory" in text or "can't allocate memory" in text:
            return True
    return False


def free_device_memory() -> None:
    """Give cached device memory back after an out-of-memory error (``gc.collect()`` and
    ``torch.cuda.empty_cache()`` where CUDA is initialized; never initializes it). Imports torch."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
