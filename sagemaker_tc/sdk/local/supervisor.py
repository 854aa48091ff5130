"""The first process of each ``local_process`` host: it gives the host a SageMaker container's lifetime.

A SageMaker training container ends when its entry process (the training toolkit) exits: every process
the job started ends with it, however it was started (a ``Popen`` child, a daemon that called
``setsid``). On this machine the host's command runs under this supervisor, which:

- becomes a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): a process the job orphans (a daemon's
  double fork) is re-parented to it, not to ``init``, so every process the job started stays below it
  and can be found (``/proc``) and reaped;
- when the host's command exits, SIGKILLs every process still below it (as the container's end
  does), says so in the job's log, and exits with the command's exit status;
- on SIGTERM (the job is being stopped: :mod:`~sagemaker_tc.sdk.local.stop` signals every process
  group of the host) waits, as the command does, for the end of the grace period: when the command
  (the toolkit) ends first, the processes it leaves (a script still saving its checkpoint) get the
  rest of the grace before SIGKILL;
- when the process that started the job (the one that called ``fit()``) dies, stops the job itself
  (SIGTERM to every process below it, the job's grace period, SIGKILL) and exits: a job never runs on
  unsupervised (``PR_SET_PDEATHSIG``, and its parent's PID checked as it waits).

It runs as ``python -I supervisor.py <parent pid> <grace seconds> -- <command...>`` and imports only
the standard library (its interpreter starts in isolated mode, so nothing of the job's environment
changes it).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# The signal the kernel sends this process when the thread that started it ends (then its parent's
# PID tells whether the whole process that called fit() is gone).
PARENT_DEATH_SIGNAL = signal.SIGUSR1
POLL_S = 0.05
# How long killed processes may take to be gone (a process in uninterruptible sleep outlives SIGKILL).
KILLED_GONE_S = 10.0
LOG_PREFIX = "sagemaker-tc supervisor: "
_PROC = Path("/proc")


def prctl(option: int, value: int) -> bool:
    """Linux ``prctl(option, value)``; False where it is not available or refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def say(text: str) -> None:
    """Write ``text`` to the job's log; nothing when no one reads it any more (the caller died)."""
    try:
        print(f"{LOG_PREFIX}{text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def descendants(root: int) -> list[int]:
    """Every living process below ``root`` (``/proc``), parents before children; empty without ``/proc``."""
    children: dict[int, list[int]] = {}
    try:
        entries = [entry for entry in _PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, pending = [], list(children.get(root, []))
    while pending:
        pid = pending.pop(0)
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def signal_all(signum: int) -> list[int]:
    """Send ``signum`` to every process below this one; returns their PIDs."""
    pids = descendants(os.getpid())
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            continue
    return pids


def reap() -> dict[int, int]:
    """Collect every ended child (the command, or an orphan re-parented here): PID -> wait status."""
    ended = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended[pid] = status


def end_the_rest(deadline: float | None = None) -> None:
    """Wait until ``deadline`` (monotonic; None: at once) for the processes below to end, then SIGKILL
    what is left, until none is left (or :data:`KILLED_GONE_S` passed: a process in uninterruptible
    sleep outlives SIGKILL, and is named in the log)."""
    while deadline is not None and descendants(os.getpid()) and time.monotonic() < deadline:
        reap()
        time.sleep(POLL_S)
    gone_by = time.monotonic() + KILLED_GONE_S
    while signal_all(signal.SIGKILL):
        reap()
        if time.monotonic() > gone_by:
            say(f"processes still there after SIGKILL (PIDs {', '.join(map(str, descendants(os.getpid())))})")
            break
        time.sleep(POLL_S)
    reap()


def exit_like(status: int) -> None:
    """Exit as the command did: its exit code, or killed by the same signal."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1)  # a signal whose default is not to end the process: the exit below
        sys.exit(128 + signum)
    sys.exit(os.waitstatus_to_exitcode(status))


def supervise(parent: int, grace_s: float, command: list[str]) -> None:
    """Run ``command`` under this process until it ends (module docstring); then exit as it did."""
    state: dict[str, Any] = {"parent_gone": False, "stop_deadline": None}

    def on_parent_death(signum: int, frame: object) -> None:
        state["parent_gone"] = os.getppid() != parent

    def on_stop(signum: int, frame: object) -> None:  # a stop: the caller keeps the grace period
        if state["stop_deadline"] is None:
            state["stop_deadline"] = time.monotonic() + grace_s

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(PARENT_DEATH_SIGNAL, on_parent_death)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL)
    child = subprocess.Popen(command)  # noqa: S603 - the host's own command, as the job asked
    while True:
        if state["parent_gone"] or os.getppid() != parent:
            say("the process that started this job is gone: stopping the job")
            signal_all(signal.SIGTERM)
            end_the_rest(time.monotonic() + grace_s)
            os._exit(128 + signal.SIGTERM)  # no flush of a log no one reads
        ended = reap()
        if child.pid in ended:
            left = descendants(os.getpid())
            if left:
                # stopping: the script may still be saving (the toolkit can end first); the grace holds
                deadline = state["stop_deadline"]
                say(
                    f"the training process ended; ending the {len(left)} process(es) it left running "
                    f"(PIDs {', '.join(map(str, left))}), as a SageMaker container's end does"
                    + (" (after the stop's grace period, or when they end)" if deadline is not None else "")
                )
                end_the_rest(deadline)
            exit_like(ended[child.pid])
        time.sleep(POLL_S)


def main(argv: list[str]) -> None:
    """``<parent pid> <grace seconds> -- <command...>``."""
    if len(argv) < 4 or argv[2] != "--":
        sys.exit(f"usage: {Path(__file__).name} <parent pid> <grace seconds> -- <command...>")
    supervise(int(argv[0]), float(argv[1]), argv[3:])


if __name__ == "__main__":
    main(sys.argv[1:])
