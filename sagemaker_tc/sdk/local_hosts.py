"""The hosts of a docker-free (``local_process``) job: start each one's process, stream its log,
wait for all of them, and stop the rest when one fails or the job runs past its ``max_run``.

:func:`sagemaker_tc.sdk.local_process.run_job` lays out the job folders and calls :func:`run_hosts`;
how a host starts (the toolkit for the estimators, the compiler driver for SDK v3's ModelTrainer)
is a :class:`HostCommand`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sagemaker_tc import contract

# After one host fails, the others get this long to fail on their own (a peer's collective errors
# out when its partner dies) before they are stopped.
FAILED_HOST_GRACE_SECONDS = 15
STOPPED_PREFIX = "Stopped: another host of the job failed: "


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


def _stream(pipe: TextIO, sink: TextIO | None, prefix: str) -> None:
    """Copy the job's output to ``sink`` line by line (drained, not shown, when ``sink`` is None)."""
    for line in pipe:
        if sink is not None:
            sink.write(prefix + line)
            sink.flush()


def _stop(process: subprocess.Popen, job_dir: Path) -> None:
    """SIGKILL the job's whole process group (the toolkit and the user's script under it), then remove
    the temporary folders its processes could not (``output/sagemaker-tc-tmp``: :mod:`sagemaker_tc.scratch`)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    shutil.rmtree(job_dir / "output" / contract.SCRATCH_DIRNAME, ignore_errors=True)


def _start_host(command: HostCommand, environment: dict[str, str]) -> subprocess.Popen:
    """Start one host in its own process group, output piped for streaming."""
    return subprocess.Popen(
        command.argv,
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
) -> dict[str, int]:
    """Start every host, stream its log to ``sink``, and wait for all of them; returns each exit code."""
    processes: dict[str, subprocess.Popen] = {}
    streamers = []
    try:
        for host, command in commands.items():
            processes[host] = _start_host(command, environment)
            streamer = threading.Thread(target=_stream, args=(processes[host].stdout, sink, f"{host} | "), daemon=True)
            streamer.start()
            streamers.append(streamer)
        exit_codes = _wait_for_hosts(processes, job_dirs, max_run=max_run)
    except BaseException:  # e.g. Ctrl-C in the notebook: stop every host, then let the interrupt through
        for host, process in processes.items():
            _stop(process, job_dirs[host])
        raise
    for streamer in streamers:
        streamer.join()
    return exit_codes


def _wait_for_hosts(
    processes: dict[str, subprocess.Popen], job_dirs: dict[str, Path], *, max_run: int
) -> dict[str, int]:
    """Wait for every host; stop the rest when one fails or the job runs past ``max_run`` seconds."""
    deadline = time.monotonic() + max_run
    exit_codes: dict[str, int] = {}
    stop_others_at: float | None = None
    failed_host: str | None = None
    while len(exit_codes) < len(processes):
        for host, process in processes.items():
            if host in exit_codes:
                continue
            code = process.poll()
            if code is None:
                continue
            exit_codes[host] = code
            if code != 0 and failed_host is None:
                failed_host = host
                stop_others_at = time.monotonic() + FAILED_HOST_GRACE_SECONDS
        now = time.monotonic()
        if now > deadline:
            for host, process in processes.items():
                if host not in exit_codes:
                    _stop(process, job_dirs[host])
                    exit_codes[host] = process.returncode
                    _write_failure_once(
                        job_dirs[host], f"MaxRuntimeExceeded: the job ran longer than {max_run} seconds and was stopped"
                    )
        elif stop_others_at is not None and now > stop_others_at:
            for host, process in processes.items():
                if host not in exit_codes:
                    _stop(process, job_dirs[host])
                    exit_codes[host] = process.returncode
                    _write_failure_once(job_dirs[host], f"{STOPPED_PREFIX}{failed_host} failed")
        time.sleep(0.2)
    return exit_codes


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
