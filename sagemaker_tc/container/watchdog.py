"""The watchdog: no job process hangs silently, at exit or after another rank's script ended.

Each job process the launcher runs a script in (one per torchrun rank, or the only one) starts a
watcher, a small process of its own (``python -m sagemaker_tc.container.watchdog SPEC``) that the
job process tells, through a pipe, when its script ended and when another rank's script ended
(:class:`Watchdog`). The watcher then gives the job process ``hang_grace_s`` seconds
(:func:`grace_seconds`):

- after its own script ended (finished or failed), to exit;
- after another rank's script ended, to make progress: to use at least ``PROGRESS_CPU_S`` CPU
  seconds per grace period (a rank blocked in a collective or a lock uses none; one that trains,
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

The watcher side imports only the standard library.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from sagemaker_tc import contract
from sagemaker_tc.errors import LauncherError, StuckRankError

logger = logging.getLogger("sagemaker_tc.watchdog")

SAGEMAKER_GRACE_S = 600.0
"""The grace period on SageMaker (``hang_grace_s=None`` and no ``SM_TC_HANG_GRACE_S``), seconds."""
PROGRESS_CPU_S = 1.0
"""CPU seconds a job process must use per grace period, once another rank's script ended, to count as
making progress."""
DUMP_SIGNAL = signal.SIGUSR1
"""The signal that makes a job process write its threads' Python stacks (``faulthandler.register``)."""
POLL_S = 1.0
DUMP_WAIT_S = 5.0
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
        state_dir: the folder of the job process's files.
        owns_state_dir: remove ``state_dir`` when the job process has ended.
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
        state_dir = Path(given) if given else Path(tempfile.mkdtemp(prefix="sagemaker-tc-watch-"))
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
                [sys.executable, "-m", "sagemaker_tc.container.watchdog", json.dumps(asdict(spec))],
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


# -- the watcher process -----------------------------------------------------------------------------
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
    """The job process has ended: report a crash where no parent launcher will, then clean up."""
    spec = watch.spec
    if spec.reports_crash:
        (ending,) = rank_endings(Path(spec.state_dir)) or (None,)
        if ending is not None and ending.fatal is not None:
            write_failure_once(spec.failure_path, crash_reason(spec.label, ending))
    if spec.owns_state_dir:
        shutil.rmtree(spec.state_dir, ignore_errors=True)


def crash_reason(label: str, ending: RankEnding) -> str:
    """The failure text for a job process that died from a fatal signal."""
    if ending.outcome == "finished":
        return (
            f"{label}: its script finished, then the process died at exit ({ending.fatal}): training had ended and "
            f"the model and output it wrote are complete. Python stack at the crash:\n{ending.stack}"
        )
    return f"{label}: the process died ({ending.fatal}) before its script ended. Python stack:\n{ending.stack}"


def watch(spec: WatchSpec) -> int:
    """The watcher's loop (module docstring): returns when the job process has ended or was stopped."""
    state = _Watch(spec)
    buffer, eof = b"", False
    while True:
        if os.getppid() != spec.pid:  # the job process has ended (this watcher was handed to another parent)
            _after_exit(state)
            return 0
        if parent_of(spec.pid) not in (spec.parent_pid, None):
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
    """Entry of the watcher process: ``python -m sagemaker_tc.container.watchdog SPEC_JSON``."""
    args = sys.argv[1:] if argv is None else argv
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s sagemaker-tc watchdog %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the job process; the watcher follows it
    return watch(WatchSpec(**json.loads(args[0])))


if __name__ == "__main__":
    sys.exit(main())
