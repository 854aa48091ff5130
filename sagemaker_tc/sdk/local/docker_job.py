"""Docker local mode (``instance_type="local"`` / ``"local_gpu"``) jobs behind the same handle as
``local_process`` ones (:class:`~sagemaker_tc.sdk.local.job.LocalJob`): ``fit(wait=False)``, then
``wait()``, ``stop()``, ``describe()`` and ``logs()`` with SageMaker's statuses.

sagemaker-core's local engine runs ``docker compose up --abort-on-container-exit`` and blocks until
it ends; :class:`DockerJob` runs it (in the foreground, or in ``LocalJob``'s background thread) and
beside it a watcher thread that stops the job as SageMaker stops a training container:
``docker compose stop --timeout <grace>`` sends SIGTERM to each container's main process and
SIGKILL after the grace (SageMaker's 120 s, ``SM_TC_STOP_GRACE_S``, ``stop(grace_s=...)``). The
engine then collects ``model.tar.gz`` and ``output.tar.gz`` as for a job that ended on its own.
The same route enforces ``max_run`` (``MaxRuntimeExceeded``), which the engine alone does not.

Each job gets a container root of its own (inside ``local.container_root`` of the SageMaker local
config when set), so the watcher finds the job's compose file; it is removed once the job ended.
The engine writes the job's log to ``sys.stdout``: while the job runs, what its thread writes goes to
the job's log instead (:class:`_ThreadStdout`), so a background job does not write into the notebook,
and ``logs()`` has it.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sagemaker_tc.sdk import _internals, job_status
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.local import docker as local_docker
from sagemaker_tc.sdk.local.hosts import MAX_RUNTIME_PREFIX
from sagemaker_tc.sdk.local.process import LocalJobResult
from sagemaker_tc.sdk.local.stop import REQUESTED, StopRequest, stop_grace_s
from sagemaker_tc.sdk.request import TrainingJobRequest

logger = logging.getLogger(__name__)
POLL_S = 0.5  # how often the watcher looks at the clock, the stop request and the containers
_COMPOSE_FILE = "docker-compose.yaml"
_COMPOSE_QUERY_TIMEOUT_S = 60


class _ThreadStdout:
    """``sys.stdout`` while Docker local jobs run: text written by a job's thread goes to that job's
    log; text from any other thread goes to the stream this one replaced."""

    _lock = threading.Lock()
    _installed: _ThreadStdout | None = None

    def __init__(self, original: TextIO) -> None:
        self.original = original
        self.routes: dict[int, TextIO] = {}
        self._writing = threading.local()  # a job log whose sink is this stream writes to the original

    def _target(self) -> TextIO | None:
        route = self.routes.get(threading.get_ident())
        return None if route is None or getattr(self._writing, "busy", False) else route

    def write(self, text: str) -> int:
        target = self._target()
        if target is None:
            return self.original.write(text)
        self._writing.busy = True
        try:
            return target.write(text)
        finally:
            self._writing.busy = False

    def flush(self) -> None:
        (self._target() or self.original).flush()

    def __getattr__(self, name: str):
        return getattr(self.original, name)

    @classmethod
    def route(cls, log: TextIO) -> None:
        """Send this thread's ``sys.stdout`` text to ``log`` until :meth:`unroute`."""
        with cls._lock:
            if cls._installed is None or sys.stdout is not cls._installed:
                cls._installed = _ThreadStdout(sys.stdout)
                sys.stdout = cls._installed
            cls._installed.routes[threading.get_ident()] = log

    @classmethod
    def unroute(cls) -> None:
        """Stop routing this thread's text; the last job to end puts the original stream back."""
        with cls._lock:
            installed = cls._installed
            if installed is None:
                return
            installed.routes.pop(threading.get_ident(), None)
            if not installed.routes and sys.stdout is installed:
                sys.stdout, cls._installed = installed.original, None


class _Discard:
    """A stream that keeps nothing (a job run with ``logs=False`` and no log to keep)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _compose(prefix: list[str], compose_file: Path, *arguments: str, timeout: float) -> subprocess.CompletedProcess:
    """Run ``<prefix> -f <compose_file> <arguments>``; ``prefix`` is the engine's compose command."""
    command = [*prefix, "-f", str(compose_file), *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class DockerJob:
    """A Docker local mode job ready to start, for :class:`~sagemaker_tc.sdk.local.job.LocalJob`.

    Attributes:
        request: the job (``file://`` code, channels and output path).
        job_dirs: ``{"algo-1": <output_path>/<job name>}``: the job's folder on this machine (the
            containers' ``/opt/ml`` folders are the engine's, removed when the job ends).
        grace_s: seconds between SIGTERM and SIGKILL when the job is stopped.
        container_root: where the engine makes its job folder (compose file, host folders).
    """

    request: TrainingJobRequest
    job_dirs: dict[str, Path]
    grace_s: float
    container_root: Path

    @classmethod
    def prepare(cls, request: TrainingJobRequest, job_dir: Path) -> DockerJob:
        """The job for ``request``, with a container root of its own.

        Raises:
            EstimatorArgumentError: ``SM_TC_STOP_GRACE_S`` is not a number >= 0.
        """
        grace_s = stop_grace_s({**os.environ, **request.environment})
        parent = local_docker.configured_container_root()
        root = tempfile.mkdtemp(prefix=f"sagemaker-tc-{request.training_job_name}-", dir=parent)
        # realpath: Docker Desktop shares /private/var, not its /var link (the engine's own workaround).
        return cls(request, {"algo-1": job_dir}, grace_s, Path(os.path.realpath(root)))

    def run(self, sink: TextIO | None, stop: StopRequest | None = None) -> LocalJobResult:
        """Run the job in this thread, its log (the engine's output) going to ``sink``; returns once
        it ended. A failed or stopped job is a result, not an exception."""
        stop = stop or StopRequest(self.grace_s)
        ended = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(stop, ended), name="sagemaker-tc-docker-stop", daemon=True)
        started = time.monotonic()
        model, error = None, None
        _ThreadStdout.route(sink if sink is not None else _Discard())
        watcher.start()
        try:
            model = local_docker.run_job(self.request, self.container_root)
        except RuntimeError as failure:  # the engine's "Failed to run: ... exited with code N"
            error = failure
        finally:
            ended.set()
            _ThreadStdout.unroute()
            watcher.join()
        duration = time.monotonic() - started
        artifacts = self._artifacts(model)
        self._remove_container_root(artifacts)
        if stop.signalled.is_set():
            status, secondary, reason = job_status.STOPPED, stop.secondary_status or REQUESTED, stop.reason
        elif error is not None:
            status, secondary, reason = job_status.FAILED, job_status.FAILED, str(error)
        else:
            status, secondary, reason = job_status.COMPLETED, job_status.COMPLETED, None
        logger.info("Training job %s %s in %.1f s", self.request.training_job_name, status, duration)
        return LocalJobResult(
            job_name=self.request.training_job_name,
            status=status,
            failure_reason=reason,
            exit_code=0 if status == job_status.COMPLETED else 1,
            job_dir=self.job_dirs["algo-1"],
            model_artifacts=(artifacts / "model.tar.gz").as_uri(),
            output_artifacts=(artifacts / "output.tar.gz").as_uri(),
            duration_seconds=duration,
            host_dirs=dict(self.job_dirs),
            secondary_status=secondary,
        )

    def _artifacts(self, model: str | None) -> Path:
        """The folder of ``model.tar.gz`` and ``output.tar.gz``: the engine's answer, else (it raised
        after collecting them) where it copies them for a ``file://`` output path: that folder itself."""
        if model is not None:
            return local_path(model).parent
        return local_path(self.request.output_data_config.s3_output_path)

    def _remove_container_root(self, artifacts: Path) -> None:
        """Remove the job's container root once the job ended (what the engine leaves there: the
        compose file and emptied host folders), unless the job's archives lie in it. Never raises."""
        root = self.container_root
        where = Path(os.path.realpath(artifacts))
        if where == root or root in where.parents:
            return
        shutil.rmtree(root, ignore_errors=True)

    def compose_file(self) -> Path | None:
        """The engine's compose file for this job, once written."""
        found = sorted(self.container_root.glob(f"*/{_COMPOSE_FILE}"))
        return found[0] if found else None

    def _watch(self, stop: StopRequest, ended: threading.Event) -> None:
        """Until the job ends: at ``max_run`` ask for a stop; once a stop is asked for, stop every
        running container of the job (again for one that starts later)."""
        max_run = self.request.stopping_condition.max_runtime_in_seconds
        deadline = time.monotonic() + max_run if max_run else math.inf
        prefix: list[str] = []
        while not ended.wait(POLL_S):
            if not stop.requested and time.monotonic() >= deadline:
                stop.request(
                    job_status.MAX_RUNTIME_EXCEEDED, reason=f"{MAX_RUNTIME_PREFIX}{max_run} seconds and was stopped"
                )
            if not stop.requested:
                continue
            compose_file = self.compose_file()
            if compose_file is None:
                continue
            try:
                prefix = prefix or _internals.docker_compose_command()
                running = _compose(prefix, compose_file, "ps", "-q", timeout=_COMPOSE_QUERY_TIMEOUT_S).stdout.split()
                if running and not ended.is_set():
                    stop.signalled.set()
                    grace = str(math.ceil(stop.grace_s))
                    logger.info(
                        "Stopping the job (%s): docker compose stop, SIGKILL in %s s", stop.secondary_status, grace
                    )
                    _compose(
                        prefix,
                        compose_file,
                        "stop",
                        "--timeout",
                        grace,
                        timeout=stop.grace_s + _COMPOSE_QUERY_TIMEOUT_S,
                    )
            except (OSError, subprocess.TimeoutExpired) as error:
                logger.warning("docker compose did not answer while stopping the job: %s", error)
