"""The watcher process beside a job process (``python -m sagemaker_tc.container.watcher SPEC_JSON``).

:class:`~sagemaker_tc.container.watchdog.Watchdog` starts it and tells it, through its stdin, when the
job process's script ended and when another rank's script ended. From then on it gives the job
process ``hang_grace_s`` seconds: to exit, or, after another rank ended, to use at least
:data:`PROGRESS_CPU_S` CPU seconds (a rank blocked in a collective or a lock uses none). A job process
that does neither is stuck: the watcher has it dump its threads' stacks (``faulthandler``, on
:data:`~sagemaker_tc.container.watchdog.DUMP_SIGNAL`), writes the failure naming the host and rank
with that stack, and stops it (SIGKILL). It also stops a job process whose parent (torchrun's agent,
the toolkit) is gone (unless the job is stopping: a SIGTERM reached the watcher too), and, once the
job process has ended, reports a crash where no parent launcher will
(:func:`~sagemaker_tc.container.watchdog.rank_endings`).

Imports only the standard library and sagemaker-tc's torch-free modules.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path

from sagemaker_tc import scratch
from sagemaker_tc.container.watchdog import (
    DUMP_SIGNAL,
    WatchSpec,
    crash_reason,
    main_thread_first,
    rank_endings,
    write_failure_once,
)
from sagemaker_tc.errors import StuckRankError

logger = logging.getLogger("sagemaker_tc.watchdog")

PROGRESS_CPU_S = 1.0
"""CPU seconds a job process must use per grace period, once another rank's script ended, to count as
making progress."""
POLL_S = 1.0
DUMP_WAIT_S = 5.0


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) ``pid`` has used, seconds; None where ``/proc`` cannot tell."""
    fields = _proc_stat(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parent_of(pid: int) -> int | None:
    """``pid``'s parent process id; None where ``/proc`` cannot tell."""
    fields = _proc_stat(pid)
    return int(fields[1]) if fields is not None else None


def _proc_stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (state, ppid, ...)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


_STOPPING = threading.Event()  # set by SIGTERM (main)


class _Watch:
    """The watcher's state: which phase the job process is in and when its deadline passes."""

    def __init__(self, spec: WatchSpec) -> None:
        self.spec = spec
        self.phase = "running"  # -> "peer" (another rank ended) or "exit" (its own script ended)
        self.deadline: float | None = None
        self.reason = ""
        self.cpu_mark = 0.0

    def on_event(self, event: dict, now: float) -> None:
        grace = self.spec.grace_s
        if event.get("event") == "ended":
            self.phase = "exit"
            self.deadline = now + grace
            self.reason = f"its script {event.get('outcome', 'ended')} and the process did not exit within {grace:g} s"
        elif event.get("event") == "peer" and self.phase == "running":
            self.phase = "peer"
            self.deadline = now + grace
            self.cpu_mark = cpu_seconds(self.spec.pid) or 0.0
            self.reason = (
                f"it made no progress (less than {PROGRESS_CPU_S:g} CPU second) for {grace:g} s after "
                f"{event.get('who', 'another rank')}"
            )

    def check_progress(self, now: float) -> None:
        if self.phase != "peer":
            return
        used = cpu_seconds(self.spec.pid)
        if used is not None and used - self.cpu_mark >= PROGRESS_CPU_S:
            self.cpu_mark = used
            self.deadline = now + self.spec.grace_s


def _stop_stuck(watch: _Watch) -> None:
    """Dump the stuck process's stacks, write the failure, stop it."""
    spec = watch.spec
    stack_path = Path(spec.stack_path)
    before = stack_path.stat().st_size if stack_path.exists() else 0
    try:
        os.kill(spec.pid, DUMP_SIGNAL)
    except ProcessLookupError:
        return
    text = _wait_for_dump(stack_path, before)
    stack = main_thread_first(text, spec.main_thread) or "(no stack: the process did not answer the dump signal)"
    error = StuckRankError(f"{watch.reason}; sagemaker-tc's watchdog stopped it (hang_grace_s={spec.grace_s:g})")
    message = f"{spec.label}: {type(error).__name__}: {error}. Its Python stack (main thread first):\n{stack}"
    write_failure_once(spec.failure_path, message)
    logger.error("%s", message)
    try:
        os.kill(spec.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_for_dump(stack_path: Path, before: int) -> str:
    """What the job process appended to its stack file, once it stopped growing (at most DUMP_WAIT_S)."""
    deadline = time.monotonic() + DUMP_WAIT_S
    size, steady_since = before, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        current = stack_path.stat().st_size if stack_path.exists() else 0
        if current != size:
            size, steady_since = current, time.monotonic()
        elif size > before and time.monotonic() - steady_since >= 0.3:
            break
    with open(stack_path, encoding="utf-8", errors="replace") as handle:
        handle.seek(before)
        return handle.read()


def _after_exit(watch: _Watch) -> None:
    """The job process has ended: report a crash where no parent launcher will."""
    spec = watch.spec
    if spec.reports_crash:
        (ending,) = rank_endings(Path(spec.state_dir)) or (None,)
        if ending is not None and ending.fatal is not None:
            write_failure_once(spec.failure_path, crash_reason(spec.label, ending))


def watch(spec: WatchSpec) -> int:
    """The watcher's loop (module docstring): returns when the job process has ended or was stopped.
    Whichever way it ended (finished, failed, stuck and stopped, orphaned), the state folder the
    watcher owns (the job process's stack file) is removed on the way out."""
    try:
        return _watch(spec)
    finally:
        if spec.owns_state_dir:
            scratch.remove_temp_dir(spec.state_dir)


def _watch(spec: WatchSpec) -> int:
    state = _Watch(spec)
    buffer, eof = b"", False
    while True:
        if os.getppid() != spec.pid:  # the job process has ended (this watcher was handed to another parent)
            _after_exit(state)
            return 0
        if parent_of(spec.pid) not in (spec.parent_pid, None) and not _STOPPING.is_set():
            logger.error("%s: its parent process (torchrun's agent or the toolkit) is gone; stopping it", spec.label)
            os.kill(spec.pid, signal.SIGKILL)
            return 1
        if eof:
            time.sleep(POLL_S)
        elif select.select([0], [], [], POLL_S)[0]:
            chunk = os.read(0, 4096)
            eof = not chunk
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                state.on_event(json.loads(line), time.monotonic())
        now = time.monotonic()
        state.check_progress(now)
        if state.deadline is not None and now >= state.deadline:
            _stop_stuck(state)
            return 1


def main(argv: list[str] | None = None) -> int:
    """Entry of the watcher process: ``python -m sagemaker_tc.container.watcher SPEC_JSON``."""
    args = sys.argv[1:] if argv is None else argv
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s sagemaker-tc watchdog %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    # Ctrl-C or a SIGTERM stops the job process; the watcher follows it within POLL_S, removing its state folder.
    # A SIGTERM is a stop request (the job's SIGTERM route: every process of the host gets one): the job
    # process saves a checkpoint while its parent (the toolkit, torchrun's agent) may already be gone, so a
    # gone parent no longer stops it; the stop's own SIGKILL after its grace bounds what is left.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: _STOPPING.set())
    return watch(WatchSpec(**json.loads(args[0])))


if __name__ == "__main__":
    sys.exit(main())
