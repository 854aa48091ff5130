"""SIGTERM as a request to stop at the next optimizer step boundary, agreed by every rank.

SageMaker stops a job (``StopTrainingJob``, ``max_run``, a spot reclaim) by sending SIGTERM, waiting
120 seconds, then killing what is left (the ``StoppingCondition`` API reference); ``local_process``
does the same (:mod:`sagemaker_tc.sdk.local.stop`). Python's default for SIGTERM ends the process at
once, so a script would lose everything since its last checkpoint. A job's launcher installs
:class:`StopSignal` instead: SIGTERM only sets a flag, and the training loop stops at its next step
boundary (the ``Trainer`` callback saves a checkpoint first; a plain loop asks
:func:`sagemaker_tc.stop_requested`).

Ranks must stop at the same step: a rank that leaves the loop while another runs one more step
would leave that rank waiting in a collective until the kill. So :meth:`StopSignal.agreed` is itself
a collective in a multi-process job: an all-reduce (max) of each rank's flag over the default gloo
process group, on the host's CPU; every rank must call it at the same point of every step. Only
gloo jobs (CPU) do this: it has not run on a GPU, so a multi-process job on another backend (NCCL)
keeps SIGTERM's usual effect (:func:`stops_at_step_boundaries`) and runs no per-step collective.

Under torchrun, torchrun's agent also gets the SIGTERM and kills its workers 30 seconds later
(``torch.distributed.elastic``'s ``close(timeout=30)``): a step and a checkpoint save must fit in that.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from sagemaker_tc.compiler.ranks import process_group_size

logger = logging.getLogger("sagemaker_tc.compiler")


class StopSignal:
    """The job's stop request: set by SIGTERM (or :meth:`request`), read at step boundaries.

    Attributes:
        requested: this process was asked to stop.
        stop_step: the step boundary at which :meth:`agreed` first said stop (None before).
    """

    def __init__(self) -> None:
        self.requested = False
        self.stop_step: int | None = None
        self._agreed = False
        self._previous: Any = None
        self._installed = False

    def install(self) -> Callable[[], None]:
        """Handle SIGTERM in this process (main thread only; elsewhere nothing is installed).
        Returns the undo, which puts the previous handler back."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._installed = True

        def restore() -> None:
            if self._installed and signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

        return restore

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        if not stops_at_step_boundaries():
            logger.warning(
                "SIGTERM: a multi-process job on %s has no stop checkpoint (not yet run on a GPU): the signal "
                "is handled as without sagemaker-tc",
                _backend(),
            )
            signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if not self.requested:
            logger.warning(
                "STOP REQUESTED (SIGTERM): training stops at the next optimizer step boundary, after a checkpoint"
            )
        self.request()
        previous = self._previous
        if callable(previous) and previous not in (signal.default_int_handler,):
            previous(signum, frame)  # a handler the script installed before us still runs

    def request(self) -> None:
        """Ask this process to stop at the next step boundary (what SIGTERM does)."""
        self.requested = True

    def agreed(self, step: int) -> bool:
        """True when any rank was asked to stop (once True, stays True). A collective in a
        multi-process job (module docstring): call it on every rank at the same point of each step.

        Args:
            step: the optimizer step just finished (recorded as :attr:`stop_step`).
        """
        if self._agreed:
            return True
        stop = self.requested
        if process_group_size() > 1:
            stop = stops_at_step_boundaries() and _any_rank(stop)
        if stop:
            self._agreed, self.stop_step = True, step
        return stop


def stops_at_step_boundaries() -> bool:
    """True where a SIGTERM stops training at a step boundary: one process, or ranks on gloo (CPU
    jobs, where the agreement is measured). Multi-process jobs on another backend (NCCL: multi-GPU)
    keep SIGTERM's usual effect: the agreement has not run on a GPU, so it is not on there."""
    return process_group_size() == 1 or _backend() == "gloo"


def _backend() -> str:
    import torch.distributed as dist

    return str(dist.get_backend())


def _any_rank(flag: bool) -> bool:
    """Whether any rank's ``flag`` is set: an all-reduce (max) of one integer over the gloo default group."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value[0])
