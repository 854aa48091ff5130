"""The handle of a local training job (``local_process``, and Docker local mode's ``local`` /
``local_gpu``): ``estimator.latest_training_job``.

It has the methods of the SageMaker job's handle (:class:`~sagemaker_tc.sdk.cloud.CloudJob`), with
the same meaning: ``wait(logs=...)``, ``stop()``, ``describe()`` (DescribeTrainingJob's field names
and statuses) and ``logs()``. ``fit(wait=False)`` runs the job in a background thread, through the
same code as ``fit()`` in the foreground (:meth:`~sagemaker_tc.sdk.local.process.PreparedJob.run`, or
for Docker local mode :meth:`~sagemaker_tc.sdk.local.docker_job.DockerJob.run`).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk import job_status
from sagemaker_tc.sdk.local.process import LocalJobResult, PreparedJob
from sagemaker_tc.sdk.local.stop import REQUESTED, StopRequest, check_grace

if TYPE_CHECKING:
    from sagemaker_tc.sdk.local.docker_job import DockerJob

logger = logging.getLogger(__name__)


class JobLog:
    """The job's log as the hosts write it (whole lines, ``algo-N | `` first): kept for ``logs()``,
    followed by ``wait(logs=True)``, and copied at once to ``sink`` when there is one."""

    def __init__(self, sink: TextIO | None = None) -> None:
        self.sink = sink
        self._chunks: list[str] = []
        self._closed = False
        self._changed = threading.Condition()

    def write(self, text: str) -> int:
        """Add ``text`` (called by the hosts' log threads)."""
        with self._changed:
            self._chunks.append(text)
            self._changed.notify_all()
        if self.sink is not None:
            self.sink.write(text)
        return len(text)

    def flush(self) -> None:
        """Flush the sink (the text itself is kept as written)."""
        if self.sink is not None:
            self.sink.flush()

    def close(self) -> None:
        """No more text will come (the job ended)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def text(self) -> str:
        """The log so far."""
        with self._changed:
            return "".join(self._chunks)

    def follow(self) -> Iterator[str]:
        """Every chunk from the start, as it comes, until the job's log is closed."""
        index = 0
        while True:
            with self._changed:
                self._changed.wait_for(lambda seen=index: seen < len(self._chunks) or self._closed)
                chunks, closed = self._chunks[index:], self._closed
            index += len(chunks)
            yield from chunks
            if closed and not chunks:
                return


class LocalJob:
    """A local training job, running or ended.

    Attributes:
        job_name: the job's name.
        job_dir: ``algo-1``'s ``/opt/ml``-style folder (Docker local mode: ``<output_path>/<job name>``;
            the containers' ``/opt/ml`` folders are the engine's).
        host_dirs: each host's ``/opt/ml``-style folder (Docker local mode: ``{"algo-1": job_dir}``).
    """

    def __init__(self, prepared: PreparedJob | DockerJob, *, cleanup: Callable[[], None] | None = None) -> None:
        """A job ready to start; ``cleanup`` is called when it ends (e.g. removes the staged source archive)."""
        self._prepared = prepared
        self.job_name = prepared.request.training_job_name
        self.host_dirs = dict(prepared.job_dirs)
        self.job_dir: Path = next(iter(self.host_dirs.values()))
        self._stop = StopRequest(prepared.grace_s)
        self._log = JobLog()
        self._cleanup = cleanup
        self._result: LocalJobResult | None = None
        self._error: BaseException | None = None
        self._started = datetime.now(timezone.utc)
        self._ended: datetime | None = None
        self._thread: threading.Thread | None = None

    def run(self, sink: TextIO | None) -> LocalJob:
        """Run the job in this thread, copying its log to ``sink`` as it comes; returns when it ended.

        Raises:
            BaseException: an interrupt (Ctrl-C: the hosts are killed first). An error of the engine
                (an archive that could not be written, ...) ends the job ``Failed`` and is raised by
                :meth:`wait`, as a failed or stopped job is, so the caller has the job's handle.
        """
        self._log.sink = sink
        self._run()
        if self._error is not None and not isinstance(self._error, Exception):
            raise self._error
        return self

    def start(self) -> LocalJob:
        """Run the job in a background thread (``fit(wait=False)``); returns at once."""
        self._thread = threading.Thread(target=self._run, name=f"sagemaker-tc-job-{self.job_name}")
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._result = self._prepared.run(self._log, self._stop)
        except BaseException as error:  # kept for wait(); the foreground run raises it again
            self._error = error
            if self._thread is not None:
                logger.error("Training job %s failed: %s: %s", self.job_name, type(error).__name__, error)
        finally:
            self._ended = datetime.now(timezone.utc)
            try:
                if self._cleanup is not None:
                    self._cleanup()
            finally:
                self._log.close()

    @property
    def result(self) -> LocalJobResult | None:
        """How the job ended; None while it runs."""
        return self._result

    @property
    def status(self) -> str:
        """SageMaker's TrainingJobStatus: ``InProgress``, ``Stopping``, ``Completed``, ``Failed`` or ``Stopped``."""
        if self._result is not None:
            return self._result.status
        if self._error is not None:
            return job_status.FAILED
        return job_status.STOPPING if self._stop.requested else job_status.IN_PROGRESS

    @property
    def secondary_status(self) -> str:
        """SageMaker's SecondaryStatus: ``Training``, ``Stopping``, then ``Completed``, ``Failed``,
        ``Stopped`` or ``MaxRuntimeExceeded``."""
        if self._result is not None:
            return self._result.secondary_status or self._result.status
        status = self.status
        return job_status.TRAINING if status == job_status.IN_PROGRESS else status

    @property
    def failure_reason(self) -> str | None:
        """Why the job failed (or was stopped at its ``max_run``); None otherwise."""
        if self._error is not None:
            return f"{type(self._error).__name__}: {self._error}"
        return self._result.failure_reason if self._result is not None else None

    @property
    def model_artifacts(self) -> str | None:
        """``file://`` URI of ``model.tar.gz`` once the job ended (also when it failed or was stopped)."""
        return self._result.model_artifacts if self._result is not None else None

    @property
    def name(self) -> str:
        """The job's name (SDK v2's ``latest_training_job.name``)."""
        return self.job_name

    @property
    def model_data(self) -> str | None:
        """``model_artifacts`` (the name the SageMaker job's handle uses)."""
        return self.model_artifacts

    @property
    def output_artifacts(self) -> str | None:
        """``file://`` URI of ``output.tar.gz`` once the job ended."""
        return self._result.output_artifacts if self._result is not None else None

    @property
    def exit_code(self) -> int | None:
        """The largest exit code of the hosts' toolkit processes, once the job ended."""
        return self._result.exit_code if self._result is not None else None

    @property
    def duration_seconds(self) -> float | None:
        """Wall time of the job, seconds, once it ended."""
        return self._result.duration_seconds if self._result is not None else None

    def stop(self, *positional: Any, grace_s: float | None = None) -> None:
        """Stop the job as SageMaker's StopTrainingJob does: SIGTERM to every process of every host,
        then, after the grace period, SIGKILL (Docker local mode: ``docker compose stop --timeout
        <grace>`` on the job's containers). Returns at once (the job is ``Stopping``); :meth:`wait` for
        ``Stopped``. The job keeps what it wrote: ``model.tar.gz``, ``output.tar.gz`` and the last
        checkpoint sync. A job that already ended is left as it is.

        Args:
            grace_s: seconds between SIGTERM and SIGKILL; default ``SM_TC_STOP_GRACE_S`` in the job's
                environment, else SageMaker's 120.

        Raises:
            EstimatorArgumentError: ``grace_s`` is not a number of seconds >= 0, or given by position
                (``stop(5)``; it is keyword-only: ``stop(grace_s=5)``), checked before anything is signalled.
        """
        if positional:
            raise EstimatorArgumentError(
                f"stop() takes no positional argument, got {len(positional)}: give the grace period by keyword, "
                "e.g. stop(grace_s=30)"
            )
        if grace_s is not None:
            grace_s = check_grace(grace_s)
        if self._ended is not None:
            logger.info("Training job %s already ended (%s): nothing to stop", self.job_name, self.status)
            return
        if self._stop.request(REQUESTED, grace_s=grace_s):
            logger.info("Stopping training job %s", self.job_name)

    def wait(self, logs: bool | str = True) -> str | None:
        """Block until the job ends; with ``logs`` (True, or SDK v2's ``"All"``, ``"Training"``,
        ``"Rules"``; False, None or ``"None"`` for no log, as ``fit(logs=...)`` takes), print its log to
        stdout (from the start) as it comes.

        Ctrl-C stops the waiting, not a background job (``stop()`` does that).

        Returns:
            The ``file://`` URI of ``model.tar.gz``.

        Raises:
            TrainingJobFailedError: the job failed, or was stopped at its ``max_run``
                (``MaxRuntimeExceeded``); a job stopped by :meth:`stop` raises nothing.
            JobArtifactsError, CheckpointSyncError: the job's archives, or its last checkpoint copy,
                could not be written (the job is ``Failed`` with that reason); any other error of
                the engine, as raised.
            EstimatorArgumentError: a ``logs`` value ``fit()`` would refuse (checked before waiting).
        """
        if job_status.check_logs(logs, call="wait"):
            for chunk in self._log.follow():
                sys.stdout.write(chunk)
            sys.stdout.flush()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        job_status.check_outcome(self.job_name, self.status, self.secondary_status, self.failure_reason)
        return self.model_artifacts

    def rule_job_summary(self) -> list[dict[str, Any]]:
        """SDK v2's, as the SageMaker job's handle answers it: the Debugger and profiler rule
        evaluations of :meth:`describe`; always empty here (local modes run no rule jobs)."""
        return job_status.rule_summary(self.describe())

    def logs(self) -> str:
        """The job's log so far (every host's lines, each starting ``algo-N | ``)."""
        return self._log.text()

    def describe(self) -> dict[str, Any]:
        """The job as SageMaker's DescribeTrainingJob shows it: the request's fields, then
        ``TrainingJobStatus``, ``SecondaryStatus``, ``TrainingStartTime``, and once it ended
        ``TrainingEndTime``, ``TrainingTimeInSeconds``, ``ModelArtifacts`` and ``FailureReason`` (if any)."""
        described = self._prepared.request.to_api_dict()
        described.update(
            {
                "TrainingJobStatus": self.status,
                "SecondaryStatus": self.secondary_status,
                "TrainingStartTime": self._started,
            }
        )
        if self._ended is not None:
            described["TrainingEndTime"] = self._ended
            described["TrainingTimeInSeconds"] = int((self._ended - self._started).total_seconds())
        if self.model_artifacts is not None:
            described["ModelArtifacts"] = {"S3ModelArtifacts": self.model_artifacts}
        if self.failure_reason is not None:
            described["FailureReason"] = self.failure_reason
        return described
