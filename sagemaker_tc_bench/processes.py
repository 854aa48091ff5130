"""Running one bench or tune worker in its own process: its environment, a time limit that ends the
whole process group, and what is kept when it fails (:func:`run_worker_process`).

Imports no torch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from sagemaker_tc import contract

if TYPE_CHECKING:
    from sagemaker_tc_bench.options import BenchOptions

logger = logging.getLogger(__name__)


def variant_env(options: BenchOptions, cache_dir: Path) -> dict[str, str]:
    """The environment of a worker process: this one's, with ``TORCHINDUCTOR_CACHE_DIR`` set to
    ``cache_dir``, ``OMP_NUM_THREADS`` to ``options.cpu_threads`` and this checkout's package first on
    ``PYTHONPATH``."""
    env = dict(os.environ)
    env[contract.ENV_INDUCTOR_CACHE_DIR] = str(cache_dir)
    # Triton's cache then lives under the Inductor cache dir (torch/_inductor/runtime/cache_dir_utils.py),
    # so "cold" and "warm" cover it too.
    if env.pop("TRITON_CACHE_DIR", None) is not None:
        logger.info("TRITON_CACHE_DIR is ignored by the bench: Triton's cache follows TORCHINDUCTOR_CACHE_DIR")
    env[contract.ENV_OMP_NUM_THREADS] = str(options.cpu_threads)
    # The bench's own package must import in the child even when run from a source checkout.
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


class _StopGuard:
    """What :func:`_sigterm_raises` hands out: :meth:`deferred` holds a SIGTERM back while a child
    process is being started, so the stop is raised only once the child can be killed."""

    def __init__(self) -> None:
        self.deferring = False
        self.pending: int | None = None

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Inside, a SIGTERM is noted, not raised; on the way out a noted one raises ``SystemExit``."""
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False
        if self.pending is not None:
            raise SystemExit(128 + self.pending)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[_StopGuard]:
    """While inside, SIGTERM raises ``SystemExit`` (so ``finally`` blocks run) instead of ending this
    process at once, except inside the guard's :meth:`_StopGuard.deferred`; the previous handler is
    put back on the way out. A no-op off the main thread, where Python cannot set signal handlers."""
    guard = _StopGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return

    def stop(signum: int, frame: object) -> None:
        if guard.deferring:
            guard.pending = signum
            return
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_worker_process(
    module: str, spec: dict, stem: Path, env: dict[str, str], timeout_s: float
) -> tuple[dict, float]:
    """Run ``python -m MODULE STEM.spec.json STEM.result.json`` (output to ``STEM.log``) in its own
    process group for at most ``timeout_s`` seconds (then the whole group is killed, Inductor's
    compile workers too). When this process is stopped meanwhile (SIGTERM, as ``timeout`` sends, or
    Ctrl-C), the group is killed first, so no variant goes on holding the device after its bench.

    Returns:
        (the result file's dict, or ``{"status": "failed", "error": ...}`` when the process timed
        out or wrote none; wall seconds). A result that is not ``ok`` also gets ``log_tail``: the
        last lines of the process's output (where a timed-out variant was when it was killed).
    """
    spec_path, result_path, log_path = (
        stem.with_name(f"{stem.name}.{ext}") for ext in ("spec.json", "result.json", "log")
    )
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    command = [sys.executable, "-m", module, str(spec_path), str(result_path)]
    started = time.perf_counter()
    returncode: int | None = None
    process: subprocess.Popen | None = None
    with open(log_path, "w", encoding="utf-8") as log, _sigterm_raises() as guard:
        try:
            with guard.deferred():  # a stop while the child starts is raised once it can be killed
                process = subprocess.Popen(
                    command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if process is not None and process.poll() is None:  # timed out, or this process is being stopped
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    wall_s = time.perf_counter() - started
    if result_path.exists():
        result = json.loads(result_path.read_text(encoding="utf-8"))
    elif returncode is None:
        result = {"status": "failed", "error": f"timed out after {timeout_s:.0f} s"}
    else:
        result = {"status": "failed", "error": f"exited {returncode} without a result"}
    if result.get("status") != "ok":
        result["log_tail"] = _tail(log_path)
    return result, wall_s


def run_cell(module: str, spec: object, stem: Path, options: BenchOptions, cache_dir: Path, timeout_s: float) -> dict:
    """One bench variant or tune cell: run ``python -m MODULE`` on the dataclass ``spec`` with its
    Inductor cache in ``cache_dir`` (created) for at most ``timeout_s`` seconds
    (:func:`run_worker_process`), and return its result dict without the spec, with
    ``process_wall_s`` (seconds). A failure is logged with the cell's name (``stem``: ``MODEL--VARIANT``),
    never raised."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    result, wall_s = run_worker_process(module, asdict(spec), stem, variant_env(options, cache_dir), timeout_s)
    result.pop("spec", None)
    result["process_wall_s"] = wall_s
    if result.get("status") != "ok":
        logger.warning("%s failed: %s", stem.name.replace("--", " / "), result.get("error"))
    return result


def budget_timeout(timeout_s: float, deadline: float | None) -> float:
    """Seconds the next process may run: its own limit ``timeout_s``, cut to what is left before
    ``deadline`` (``time.perf_counter()`` seconds; None: no time budget). Zero or less: the budget is
    spent, and the caller records the cell as skipped instead of running it."""
    return timeout_s if deadline is None else min(timeout_s, deadline - time.perf_counter())
