"""The hosts of a docker-free (``local_process``) job: start each one's process, stream its log,
wait for all of them, stop the rest when one fails, and stop them all when asked or when the job
runs past its ``max_run`` (SIGTERM, a grace period, SIGKILL: :mod:`~sagemaker_tc.sdk.local.stop`).

:func:`sagemaker_tc.sdk.local.process.run_job` lays out the job folders and calls :func:`run_hosts`;
how a host starts (the toolkit for the estimators, the compiler driver for SDK v3's ModelTrainer)
is a :class:`HostCommand`.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sagemaker_tc import contract
from sagemaker_tc.sdk.job_status import MAX_RUNTIME_EXCEEDED
from sagemaker_tc.sdk.local import supervisor
from sagemaker_tc.sdk.local.stop import StopRequest, kill, live_groups, terminate

logger = logging.getLogger(__name__)

# After one host fails, the others get this long to fail on their own (a peer's collective errors
# out when its partner dies) before they are stopped.
FAILED_HOST_GRACE_SECONDS = 15
STOPPED_PREFIX = "Stopped: another host of the job failed: "
# The FailureReason of a job stopped at its max_run starts with this, then "<max_run> seconds and was stopped".
MAX_RUNTIME_PREFIX = f"{MAX_RUNTIME_EXCEEDED}: the job ran longer than "
POLL_S = 0.2  # how often the hosts are checked, seconds
# How long a killed job's processes may take to be gone (a process in uninterruptible sleep outlives SIGKILL).
KILLED_GONE_S = 10.0


@dataclass(frozen=True)
class HostCommand:
    """How one host of a ``local_process`` job starts.

    Attributes:
        argv: the command.
        cwd: its working folder.
        environment: variables added to the job's environment for this host.
    """

    argv: list[str]
    cwd: Path
    environment: dict[str, str]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for torchrun's rendezvous)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LastException:
    """The last Python exception a host's log showed: the first unindented line after a
    ``Traceback (most recent call last):`` header (the script's own, when the toolkit ran it directly
    and its failure file says only ``ErrorMessage ""``)."""

    def __init__(self) -> None:
        self.line: str | None = None
        self._in_traceback = False

    def feed(self, line: str) -> None:
        """Read one line of the host's log."""
        if line.startswith("Traceback (most recent call last):"):
            self._in_traceback = True
        elif self._in_traceback and line.strip() and not line[0].isspace():
            self.line, self._in_traceback = line.strip(), False


def _stream(pipe: TextIO, sink: TextIO | None, prefix: str, last: LastException | None = None) -> None:
    """Copy the job's output to ``sink`` line by line (drained, not shown, when ``sink`` is None),
    noting its last exception in ``last``; closes the pipe at its end (no ResourceWarning)."""
    with pipe:
        for line in pipe:
            if last is not None:
                last.feed(line)
            if sink is not None:
                sink.write(prefix + line)
                sink.flush()


def _stop(process: subprocess.Popen, job_dir: Path) -> None:
    """SIGKILL the host's whole process group (the toolkit and the user's script under it) and the
    groups under it (torchrun's ranks), then remove the temporary folders its processes could not
    (``output/sagemaker-tc-tmp``: :mod:`sagemaker_tc.scratch`)."""
    kill((), [process.pid])
    process.wait()
    _remove_scratch({"": job_dir})


def _remove_scratch(job_dirs: dict[str, Path]) -> None:
    """Remove the temporary folders a stopped job's processes could not (``output/sagemaker-tc-tmp``)."""
    for job_dir in job_dirs.values():
        shutil.rmtree(job_dir / "output" / contract.SCRATCH_DIRNAME, ignore_errors=True)


def supervised(argv: list[str], grace_s: float) -> list[str]:
    """``argv`` run under the host's supervisor (:mod:`~sagemaker_tc.sdk.local.supervisor`): every
    process it starts ends when it exits, and the job is stopped if this process dies."""
    return [sys.executable, "-I", supervisor.__file__, str(os.getpid()), repr(grace_s), "--", *argv]


def _start_host(command: HostCommand, environment: dict[str, str], grace_s: float) -> subprocess.Popen:
    """Start one host, under its supervisor, in its own process group, output piped for streaming."""
    return subprocess.Popen(
        supervised(command.argv, grace_s),
        cwd=command.cwd,
        env={**environment, **command.environment},
        start_new_session=True,  # its own process group: stopping the host stops its scripts too
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        errors="replace",
    )


def run_hosts(
    commands: dict[str, HostCommand],
    job_dirs: dict[str, Path],
    environment: dict[str, str],
    sink: TextIO | None,
    *,
    max_run: int,
    stop: StopRequest | None = None,
    exceptions: dict[str, LastException] | None = None,
) -> dict[str, int]:
    """Start every host, stream its log to ``sink``, and wait for all of them; returns each exit code.
    ``exceptions`` (when given) gets each host's :class:`LastException`.

    ``stop`` (a :class:`~sagemaker_tc.sdk.local.stop.StopRequest`, set from another thread) stops
    the job as SageMaker does: SIGTERM to every process of every host, ``stop.grace_s`` for them to
    end, then SIGKILL. The job runs past ``max_run`` seconds: the same stop, as ``MaxRuntimeExceeded``.
    """
    stop = stop or StopRequest()
    processes: dict[str, subprocess.Popen] = {}
    streamers = []
    try:
        for host, command in commands.items():
            processes[host] = _start_host(command, environment, stop.grace_s)
            last = LastException()
            if exceptions is not None:
                exceptions[host] = last
            streamer = threading.Thread(
                target=_stream, args=(processes[host].stdout, sink, f"{host} | ", last), daemon=True
            )
            streamer.start()
            streamers.append(streamer)
        exit_codes = _wait_for_hosts(processes, job_dirs, max_run=max_run, stop=stop)
    except BaseException:  # e.g. Ctrl-C in the notebook: stop every host, then let the interrupt through
        for host, process in processes.items():
            _stop(process, job_dirs[host])
        raise
    _join_streamers(streamers)
    return exit_codes


def _join_streamers(streamers: list[threading.Thread]) -> None:
    """Wait for the rest of the hosts' log. Every process of a host has ended with its supervisor, so
    its pipe is closed; one still held open (a process that left the host's tree) is not waited for."""
    gone_by = time.monotonic() + KILLED_GONE_S
    for streamer in streamers:
        streamer.join(max(0.0, gone_by - time.monotonic()))
        if streamer.is_alive():
            logger.warning(
                "A process outside the job's hosts still holds the job's log open; the job ends without waiting for it"
            )


def _wait_for_hosts(
    processes: dict[str, subprocess.Popen], job_dirs: dict[str, Path], *, max_run: int, stop: StopRequest
) -> dict[str, int]:
    """Wait for every host; stop the rest when one fails, and all of them on ``stop`` or past ``max_run``."""
    deadline = time.monotonic() + max_run
    exit_codes: dict[str, int] = {}
    stop_others_at: float | None = None
    failed_host: str | None = None
    stopping: _Stopping | None = None
    while True:
        for host, process in processes.items():
            code = None if host in exit_codes else process.poll()
            if code is None:
                continue
            exit_codes[host] = code
            if code != 0 and failed_host is None and stopping is None:
                failed_host = host
                stop_others_at = time.monotonic() + FAILED_HOST_GRACE_SECONDS
        now = time.monotonic()
        if now > deadline and len(exit_codes) < len(processes):
            stop.request(MAX_RUNTIME_EXCEEDED, reason=f"{MAX_RUNTIME_PREFIX}{max_run} seconds and was stopped")
        if stopping is None and stop.requested and len(exit_codes) < len(processes):
            stopping = _Stopping([process.pid for host, process in processes.items() if host not in exit_codes], stop)
        if stopping is not None:
            if stopping.finished(processes, job_dirs, exit_codes):
                return exit_codes
        elif len(exit_codes) == len(processes):
            _remove_scratch(job_dirs)  # every process ended: what a killed leftover could not remove
            return exit_codes
        elif stop_others_at is not None and now > stop_others_at:
            for host, process in processes.items():
                if host not in exit_codes:
                    _stop(process, job_dirs[host])
                    exit_codes[host] = process.returncode
                    _write_failure_once(job_dirs[host], f"{STOPPED_PREFIX}{failed_host} failed")
        time.sleep(POLL_S)


class _Stopping:
    """A stop under way: every host's processes got SIGTERM; SIGKILL once the grace is over."""

    def __init__(self, leaders: list[int], stop: StopRequest) -> None:
        """Send SIGTERM to the hosts still running, led by ``leaders`` (their process group IDs)."""
        self.leaders = leaders
        self.groups = terminate(leaders)
        stop.signalled.set()
        self.kill_at = time.monotonic() + stop.grace_s
        logger.info("Stopping the job (%s): SIGTERM sent, SIGKILL in %.0f s", stop.secondary_status, stop.grace_s)

    def finished(
        self, processes: dict[str, subprocess.Popen], job_dirs: dict[str, Path], exit_codes: dict[str, int]
    ) -> bool:
        """True once every process of the job has ended (killed past the grace), exit codes recorded."""
        if len(exit_codes) == len(processes) and not live_groups(self.groups):
            _remove_scratch(job_dirs)
            return True
        if time.monotonic() < self.kill_at:
            return False
        logger.info("Grace period over: killing what is left of the job")
        kill(self.groups, self.leaders)
        for host, process in processes.items():
            _stop(process, job_dirs[host])
            exit_codes.setdefault(host, process.returncode)
        gone_by = time.monotonic() + KILLED_GONE_S
        while live_groups(self.groups) and time.monotonic() < gone_by:
            time.sleep(POLL_S)
        left = live_groups(self.groups)
        if left:
            logger.warning("Processes of the stopped job still run after SIGKILL (process groups %s)", sorted(left))
        return True


def first_failure(failed: list[str], job_dirs: dict[str, Path], reasons: dict[str, str | None]) -> str:
    """The host whose failure came first: its ``output/failure`` was written earliest. A rank that
    raises writes it at once, while its peers fail later with "connection closed by peer"; hosts the
    engine stopped only echo another host's failure."""

    def written_at(host: str) -> float:
        failure = job_dirs[host] / "output" / "failure"
        return failure.stat().st_mtime_ns if failure.exists() else float("inf")

    own = [host for host in failed if not (reasons[host] or "").startswith(STOPPED_PREFIX)]
    return min(own or failed, key=written_at)


def _write_failure_once(job_dir: Path, text: str) -> None:
    """Write ``output/failure`` unless the host wrote its own."""
    failure = job_dir / "output" / "failure"
    if not failure.exists():
        failure.write_text(text, encoding="utf-8")
