"""The watchdog: no job process hangs silently, at exit or after another rank's script ended.

Each job process the launcher runs a script in (one per torchrun rank, or the only one) starts a
watcher, a small process of its own (:mod:`sagemaker_tc.container.watcher`) that the
job process tells, through a pipe, when its script ended and when another rank's script ended
(:class:`Watchdog`). The watcher then gives the job process ``hang_grace_s`` seconds
(:func:`grace_seconds`):

- after its own script ended (finished or failed), to exit;
- after another rank's script ended, to make progress: to use at least one CPU second per grace
  period (a rank blocked in a collective or a lock uses none; one that trains,
  evaluates or saves does).

A job process that does neither is stuck. The watcher has it dump every thread's Python stack
(``faulthandler``, registered for ``DUMP_SIGNAL`` at start: it works while a thread holds the GIL
forever), writes ``$SM_OUTPUT_DIR/failure`` naming the host and rank with that stack (the main
thread first), and stops the process (SIGKILL); the job fails with that reason. The watcher lives
outside the job process because the hangs it catches are the ones no thread of the job process can
act in. It also stops a job process whose parent (torchrun's agent, the toolkit) is gone.

``faulthandler`` also writes the stack of a job process that dies from a fatal signal (SIGSEGV,
SIGABRT, ...) into the same file, so a crash is reported with its stack (:func:`rank_endings`):
torchrun's parent launcher reads that for its ranks; elsewhere the watcher writes it.

This module is the job process's side, and how job processes ended (read by torchrun's parent
launcher and by the watcher). It imports no torch.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from sagemaker_tc import contract, scratch
from sagemaker_tc.errors import LauncherError

logger = logging.getLogger("sagemaker_tc.watchdog")

SAGEMAKER_GRACE_S = 600.0
"""The grace period on SageMaker (``hang_grace_s=None`` and no ``SM_TC_HANG_GRACE_S``), seconds."""
DUMP_SIGNAL = signal.SIGUSR1
"""The signal that makes a job process write its threads' Python stacks (``faulthandler.register``)."""
FATAL_MARK = "Fatal Python error"


def grace_seconds(config_value: float | None, environ: Mapping[str, str]) -> float:
    """The job's grace period, seconds: the config's ``hang_grace_s``, else ``$SM_TC_HANG_GRACE_S``
    (``local_process`` sets it), else :data:`SAGEMAKER_GRACE_S`.

    Raises:
        LauncherError: ``SM_TC_HANG_GRACE_S`` is not a positive number of seconds.
    """
    if config_value is not None:
        return float(config_value)
    raw = environ.get(contract.ENV_HANG_GRACE)
    if not raw:
        return SAGEMAKER_GRACE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise LauncherError(
            f"{contract.ENV_HANG_GRACE}={raw!r} is not a grace period: give a positive number of seconds, or "
            "set TrainingCompilerConfig(hang_grace_s=...)"
        )
    return value


def process_slug(environ: Mapping[str, str]) -> str:
    """File-name stem of this job process's files: ``rank-<RANK>`` under torchrun, else ``process``."""
    rank = environ.get(contract.ENV_RANK)
    return f"rank-{rank}" if rank is not None else "process"


@dataclass(frozen=True)
class WatchSpec:
    """What a watcher watches (passed to it as JSON on its command line).

    Attributes:
        pid: the job process.
        parent_pid: the job process's parent (torchrun's agent, or the toolkit).
        label: how failures name the job process (``"algo-2 rank 1"``, ``"algo-1"``).
        grace_s: the grace period, seconds.
        stack_path: where the job process's ``faulthandler`` writes.
        failure_path: ``$SM_OUTPUT_DIR/failure`` (None outside a job: nothing is written).
        state_dir: the folder of the job process's files (in the job's folders: :mod:`sagemaker_tc.scratch`).
        owns_state_dir: remove ``state_dir`` when the watcher ends, however the job process ended.
        reports_crash: write a crash of the job process into the failure file (False under
            sagemaker-tc's torchrun, whose parent launcher reports its ranks).
        main_thread: the job process's main thread id (its stack is shown first).
    """

    pid: int
    parent_pid: int
    label: str
    grace_s: float
    stack_path: str
    failure_path: str | None
    state_dir: str
    owns_state_dir: bool
    reports_crash: bool
    main_thread: int


class Watchdog:
    """The job process's side: starts the watcher and tells it what happened (module docstring)."""

    def __init__(self, process: subprocess.Popen, pipe: int, spec: WatchSpec, stack_file: IO[str]) -> None:
        self.process = process
        self.spec = spec
        self._pipe = pipe
        self._stack_file = stack_file  # kept open: faulthandler writes to its descriptor
        self._lock = threading.Lock()

    @classmethod
    def start(cls, *, label: str, grace_s: float, environ: Mapping[str, str]) -> Watchdog:
        """Register the stack dumps in this process and start its watcher.

        Raises:
            OSError: the state folder, the stack file, the pipe or the watcher process cannot be made.
        """
        given = environ.get(contract.ENV_RANK_STATE_DIR)
        state_dir = Path(given) if given else scratch.make_temp_dir("sagemaker-tc-watch-", environ)
        stack_path = state_dir / f"{process_slug(environ)}.stack"
        stack_file = open(stack_path, "w", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        faulthandler.enable(file=stack_file, all_threads=True)
        faulthandler.register(DUMP_SIGNAL, file=stack_file, all_threads=True, chain=False)
        output_dir = environ.get(contract.ENV_OUTPUT_DIR)
        spec = WatchSpec(
            pid=os.getpid(),
            parent_pid=os.getppid(),
            label=label,
            grace_s=grace_s,
            stack_path=str(stack_path),
            failure_path=str(Path(output_dir) / "failure") if output_dir else None,
            state_dir=str(state_dir),
            owns_state_dir=not given,
            reports_crash=not given,
            main_thread=threading.main_thread().ident or 0,
        )
        read_end, write_end = os.pipe()
        package_root = str(Path(__file__).resolve().parents[2])  # the watcher imports this very package
        paths = (package_root, os.environ.get("PYTHONPATH"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in paths if path)}
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "sagemaker_tc.container.watcher", json.dumps(asdict(spec))],
                stdin=read_end,
                env=env,
            )
        finally:
            os.close(read_end)
        return cls(process, write_end, spec, stack_file)

    def _send(self, event: dict) -> None:
        with self._lock:
            try:
                os.write(self._pipe, (json.dumps(event) + "\n").encode())
            except OSError:  # the watcher is gone: nothing to tell
                logger.warning("The watchdog process is gone; a hang of this process would not be caught")

    def peer_ended(self, who: str) -> None:
        """Another rank's script ended (``who`` says which, and how): progress is watched from now on."""
        self._send({"event": "peer", "who": who})

    def script_ended(self, outcome: str) -> None:
        """This process's script ended (``outcome``: ``finished`` or ``failed``): the exit deadline
        starts (the launcher's own teardown, the report and the cache save, counts in it)."""
        # The script may have taken the signal for itself; the dump is needed from here on.
        faulthandler.register(DUMP_SIGNAL, file=self._stack_file, all_threads=True, chain=False)
        self._send({"event": "ended", "outcome": outcome})

    def record_outcome(self, outcome: str) -> None:
        """Record, for torchrun's parent launcher, that the script ended with ``outcome`` and the launcher's
        teardown is done: whatever happens to the process from here on happens at exit."""
        state = {"label": self.spec.label, "outcome": outcome, "pid": self.spec.pid}
        state_path = Path(self.spec.state_dir) / f"{Path(self.spec.stack_path).stem}.json"
        try:
            state_path.write_text(json.dumps(state), encoding="utf-8")
        except OSError:
            logger.warning("Could not record how this process's script ended in %s", state_path)


# -- how ranks ended (torchrun's parent launcher and the watcher) ---------------------------------------
@dataclass(frozen=True)
class RankEnding:
    """What a job process left in its state folder.

    Attributes:
        slug: its file stem (``rank-1``).
        label: how it is named (``"algo-2 rank 1"``), or the slug when it never recorded an ending.
        outcome: ``finished`` or ``failed`` (its script ended), or None (it never got there).
        fatal: the first line of a fatal-signal report (``"Fatal Python error: Aborted"``), or None.
        stack: that report's thread stacks, the main thread first (empty without one).
    """

    slug: str
    label: str
    outcome: str | None
    fatal: str | None
    stack: str


def rank_endings(state_dir: Path) -> list[RankEnding]:
    """Every job process's ending recorded in ``state_dir`` (its state file, its fatal-signal report)."""
    endings = []
    for stack_path in sorted(state_dir.glob("*.stack")):
        state_path = stack_path.with_suffix(".json")
        try:
            state = json.loads(state_path.read_text(encoding="utf-8")) if state_path.exists() else {}
        except (OSError, ValueError):
            state = {}
        text = _read(stack_path)
        fatal = next((line.strip() for line in text.splitlines() if line.startswith(FATAL_MARK)), None)
        endings.append(
            RankEnding(
                slug=stack_path.stem,
                label=state.get("label") or stack_path.stem.replace("-", " "),
                outcome=state.get("outcome"),
                fatal=fatal,
                stack=main_thread_first(text, None) if fatal else "",
            )
        )
    return endings


def main_thread_first(text: str, main_thread: int | None) -> str:
    """``faulthandler``'s report with the main thread's block first (the one named ``main_thread``, else
    the last block, which is where faulthandler lists the oldest thread) and the extension-module list
    dropped."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(FATAL_MARK) or line.startswith("Extension modules:"):
            continue
        if re.match(r"(Current thread|Thread) 0x[0-9a-f]+", line):
            blocks.append([line])
        elif blocks and line.strip():
            blocks[-1].append(line)
    if not blocks:
        return text.strip()
    wanted = f"0x{main_thread:016x}" if main_thread else None
    index = next((i for i, block in enumerate(blocks) if wanted and wanted in block[0]), len(blocks) - 1)
    ordered = [blocks[index], *blocks[:index], *blocks[index + 1 :]]
    return "\n".join("\n".join(block) for block in ordered)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def write_failure_once(path: str | None, text: str) -> bool:
    """Write the failure file unless it exists (the first failure is the job's reason); True if written."""
    if not path or os.path.exists(path):
        return False
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")
    return True


def crash_reason(label: str, ending: RankEnding) -> str:
    """The failure text for a job process that died from a fatal signal."""
    if ending.outcome == "finished":
        return (
            f"{label}: its script finished, then the process died at exit ({ending.fatal}): training had ended and "
            f"the model and output it wrote are complete. Python stack at the crash:\n{ending.stack}"
        )
    return f"{label}: the process died ({ending.fatal}) before its script ended. Python stack:\n{ending.stack}"
