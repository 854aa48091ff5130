"""SageMaker's training job statuses, the one rule for which endings ``wait()`` raises on, and the
``logs=`` values ``fit()`` and ``wait()`` take, shared by
the ``local_process`` job (:class:`~sagemaker_tc.sdk.local.job.LocalJob`) and the SageMaker one
(:class:`~sagemaker_tc.sdk.cloud.CloudJob`), and how a ``local_process`` job ended
(:class:`LocalJobResult`: what both front ends' local runs hand back, without importing the local engine).

The values are DescribeTrainingJob's ``TrainingJobStatus`` and ``SecondaryStatus`` (SageMaker API
reference, ``SecondaryStatusTransition``: a ``Stopped`` job's secondary status is ``Stopped``, or
``MaxRuntimeExceeded`` when it "stopped because it exceeded the maximum allowed runtime").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError, MaxRuntimeExceededError, TrainingJobFailedError

IN_PROGRESS = "InProgress"
COMPLETED = "Completed"
FAILED = "Failed"
STOPPING = "Stopping"
STOPPED = "Stopped"
ENDED = (COMPLETED, FAILED, STOPPED)
# SecondaryStatus values besides the ones named like a status.
TRAINING = "Training"
MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
# SDK v2's ``logs`` values (``sagemaker.estimator.EstimatorBase.fit``): a log type, or a bool.
_LOG_TYPES = {"All": True, "Training": True, "Rules": True, "None": False}


def check_outcome(job_name: str, status: str, secondary_status: str | None, failure_reason: str | None) -> None:
    """Raise unless the job ended as asked: ``Completed``, or ``Stopped`` by a stop request (secondary
    status ``Stopped``). A job stopped at its ``max_run`` did not finish: it raises, saying so.

    Raises:
        MaxRuntimeExceededError: ``Stopped`` with ``MaxRuntimeExceeded`` (a :class:`TrainingJobFailedError`).
        TrainingJobFailedError: ``Failed`` (or another ending); carries the FailureReason (else the statuses).
    """
    if status == COMPLETED or (status == STOPPED and secondary_status == STOPPED):
        return
    reason = failure_reason or f"status {status} ({secondary_status})"
    if status == STOPPED and secondary_status == MAX_RUNTIME_EXCEEDED:
        raise MaxRuntimeExceededError(job_name, reason)
    raise TrainingJobFailedError(job_name, reason)


def rule_summary(described: Mapping[str, Any]) -> list[dict[str, Any]]:
    """SDK v2's ``rule_job_summary()`` of a DescribeTrainingJob answer: its Debugger rule evaluations
    (``DebugRuleEvaluationStatuses``) then its profiler ones (``ProfilerRuleEvaluationStatuses``);
    empty for a job without rules (a local job never has any)."""
    return list(described.get("DebugRuleEvaluationStatuses", [])) + list(
        described.get("ProfilerRuleEvaluationStatuses", [])
    )


def check_logs(logs: Any, *, call: str = "fit") -> bool:
    """``fit(logs=...)`` (or ``wait(logs=...)``, named by ``call``) as a flag: True, ``"All"``,
    ``"Training"``, ``"Rules"`` show the log; False, None, ``"None"`` do not.

    Raises:
        EstimatorArgumentError: any other value.
    """
    if logs is None or isinstance(logs, bool):
        return bool(logs)
    if isinstance(logs, str) and logs in _LOG_TYPES:
        return _LOG_TYPES[logs]
    raise EstimatorArgumentError(
        f"{call}(logs={logs!r}) is not accepted: True, False, or one of SDK v2's {', '.join(map(repr, _LOG_TYPES))}"
    )


@dataclass(frozen=True)
class LocalJobResult:
    """How a ``local_process`` job ended.

    Attributes:
        job_name: the job's name.
        status: ``"Completed"``, ``"Failed"`` or ``"Stopped"`` (SageMaker's TrainingJobStatus values).
        failure_reason: None, or the first 1024 characters of ``output/failure``; for a job stopped at
            its ``max_run``, ``"MaxRuntimeExceeded: ..."``.
        exit_code: the toolkit process's exit code.
        job_dir: the ``/opt/ml``-style folder the job ran in.
        model_artifacts: ``file://`` URI of ``model.tar.gz``.
        output_artifacts: ``file://`` URI of ``output.tar.gz``.
        duration_seconds: wall time of the job (all hosts), seconds.
        host_dirs: each host's ``/opt/ml``-style folder (``job_dir`` is ``algo-1``'s).
        secondary_status: SageMaker's SecondaryStatus: ``"Completed"``, ``"Failed"``, ``"Stopped"``
            (a stop was asked for) or ``"MaxRuntimeExceeded"``.
    """

    job_name: str
    status: str
    failure_reason: str | None
    exit_code: int
    job_dir: Path
    model_artifacts: str
    output_artifacts: str
    duration_seconds: float
    host_dirs: dict[str, Path] = field(default_factory=dict)
    secondary_status: str | None = None
