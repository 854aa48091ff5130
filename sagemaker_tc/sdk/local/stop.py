"""Stopping a docker-free (``local_process``) job the way SageMaker stops one: SIGTERM to every process
of every host, a grace period, then SIGKILL for what is left.

SageMaker takes this one route for ``StopTrainingJob`` and for ``StoppingCondition.MaxRuntimeInSeconds``
(the ``StoppingCondition`` API reference: "SageMaker sends the algorithm the SIGTERM signal, which
delays job termination for 120 seconds"). A :class:`StopRequest` carries the request from the job's
handle (:meth:`~sagemaker_tc.sdk.local.job.LocalJob.stop`) or from the ``max_run`` clock to the thread
that watches the hosts (:mod:`~sagemaker_tc.sdk.local.hosts`).

Which processes: each host is started in its own process group (the toolkit, the user's script,
torchrun's agent), but torchrun starts each rank in a session of its own
(``torch.distributed.elastic``'s ``SubprocessHandler``, ``start_new_session=True``), so the groups of
every process under a host are signalled too, found through ``/proc`` where there is one.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from sagemaker_tc import contract
from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk.job_status import STOPPED

# SageMaker's grace between SIGTERM and the kill, seconds.
STOP_GRACE_S = 120.0
# The SecondaryStatus of a Stopped job that was asked to stop (one stopped at its max_run: MaxRuntimeExceeded).
REQUESTED = STOPPED
_PROC = Path("/proc")


def stop_grace_s(environment: Mapping[str, str]) -> float:
    """The grace between SIGTERM and SIGKILL for a job: ``SM_TC_STOP_GRACE_S`` in its environment
    (the estimator's ``environment=`` over this process's), else SageMaker's 120 seconds.

    Raises:
        EstimatorArgumentError: the variable is not a number of seconds >= 0.
    """
    text = environment.get(contract.ENV_STOP_GRACE)
    if text is None:
        return STOP_GRACE_S
    try:
        grace_s = float(text)
    except ValueError:
        grace_s = -1.0
    if not math.isfinite(grace_s) or grace_s < 0:
        raise EstimatorArgumentError(
            f"{contract.ENV_STOP_GRACE}={text!r} is not a grace period: give a number of seconds >= 0 "
            f"(SageMaker's is {STOP_GRACE_S:.0f})"
        )
    return grace_s


def check_grace(grace_s: object) -> float:
    """``stop(grace_s=...)``: a number of seconds >= 0 (int or float, finite; not a bool or a string).

    Raises:
        EstimatorArgumentError: anything else.
    """
    if isinstance(grace_s, (int, float)) and not isinstance(grace_s, bool):
        if math.isfinite(grace_s) and grace_s >= 0:
            return float(grace_s)
    raise EstimatorArgumentError(
        f"stop(grace_s={grace_s!r}) is not a grace period: give a number of seconds >= 0 between SIGTERM and "
        f"SIGKILL, or leave it out for SM_TC_STOP_GRACE_S or SageMaker's {STOP_GRACE_S:.0f}"
    )


class StopRequest:
    """A request to stop a job, set once from any thread; the first request wins.

    Attributes:
        secondary_status: ``"Stopped"`` (asked for) or ``"MaxRuntimeExceeded"``; None until requested.
        reason: the job's FailureReason for a stop it did not ask for (``max_run``), else None.
        grace_s: seconds between SIGTERM and SIGKILL.
        signalled: set by the hosts' watcher once it has sent SIGTERM (a job that ended on its own
            before that is not a stopped job).
    """

    def __init__(self, grace_s: float = STOP_GRACE_S) -> None:
        self.grace_s = grace_s
        self.secondary_status: str | None = None
        self.reason: str | None = None
        self.signalled = threading.Event()
        self._requested = threading.Event()
        self._lock = threading.Lock()

    def request(
        self, secondary_status: str = REQUESTED, *, reason: str | None = None, grace_s: float | None = None
    ) -> bool:
        """Ask for the stop; returns False when a stop was already requested (that one stands)."""
        with self._lock:
            if self._requested.is_set():
                return False
            self.secondary_status, self.reason = secondary_status, reason
            if grace_s is not None:
                self.grace_s = grace_s
            self._requested.set()
            return True

    @property
    def requested(self) -> bool:
        """True once a stop was requested."""
        return self._requested.is_set()


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, pgrp, ... (None when gone)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _all_processes() -> dict[int, tuple[str, int, int]]:
    """Every process here as pid -> (state, ppid, pgrp); empty where there is no ``/proc``."""
    table = {}
    if not _PROC.is_dir():
        return table
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                table[int(entry.name)] = (fields[0], int(fields[1]), int(fields[2]))
    return table


def process_groups(leaders: Iterable[int]) -> set[int]:
    """The process groups to signal for hosts whose processes are ``leaders`` (each the leader of its
    host's group): those groups, and the group of every process under them (torchrun's ranks)."""
    groups = set(leaders)
    table = _all_processes()
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    pending = list(groups)
    seen: set[int] = set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        if pid in table:
            groups.add(table[pid][2])
        pending.extend(children.get(pid, []))
    return groups


def signal_groups(groups: Iterable[int], signum: int) -> None:
    """Send ``signum`` to each process group (one already gone is skipped)."""
    for group in groups:
        try:
            os.killpg(group, signum)
        except (ProcessLookupError, PermissionError):
            continue


def live_groups(groups: Iterable[int]) -> set[int]:
    """The groups that still hold a process that is not a zombie (``/proc``), or that still answer
    signal 0 where there is no ``/proc``."""
    groups = set(groups)
    if _PROC.is_dir():
        return {pgrp for state, _, pgrp in _all_processes().values() if pgrp in groups and state != "Z"}
    alive = set()
    for group in groups:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            continue
        alive.add(group)
    return alive


def terminate(leaders: Iterable[int]) -> set[int]:
    """SIGTERM every process of the hosts led by ``leaders``; returns the groups signalled."""
    groups = process_groups(leaders)
    signal_groups(groups, signal.SIGTERM)
    return groups


def kill(groups: Iterable[int], leaders: Iterable[int]) -> None:
    """SIGKILL ``groups`` and every group now under ``leaders`` (a rank started since the SIGTERM)."""
    signal_groups(set(groups) | process_groups(leaders), signal.SIGKILL)
