"""What the session records about the job for its report, and the report's gathering and writing.

:class:`JobRecord` holds what the integrations and the launcher tell the session (which integration
drives the job, what the configured plan compiles, the batch-size decision, the checkpoint resumed
from, how the script ended, the captured step's entry). :func:`gather` turns it, the runtime and the
session's other parts into the report (:func:`~sagemaker_tc.compiler.facts.job_facts`, then
:func:`~sagemaker_tc.compiler.report.build_report`); :func:`write_files` writes it at close.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sagemaker_tc.compiler.facts import SessionValues, job_facts
from sagemaker_tc.compiler.ranks import world_size
from sagemaker_tc.compiler.report import build_report, print_metric_lines, write_report

if TYPE_CHECKING:
    from sagemaker_tc.compiler.debug import DebugCapture
    from sagemaker_tc.compiler.dynamo import CompileWatch
    from sagemaker_tc.compiler.job_cache import JobCache
    from sagemaker_tc.compiler.regions import CompiledRegions
    from sagemaker_tc.compiler.runtime import CompilerRuntime
    from sagemaker_tc.compiler.runtime_protocol import SessionRuntime
    from sagemaker_tc.compiler.shapes import BucketStats
    from sagemaker_tc.compiler.steps import StepTimer
    from sagemaker_tc.config import TrainingCompilerConfig


class BatchTuning(Protocol):
    """What the record keeps of a batch-size decision (:class:`sagemaker_tc.tuning.decision.TuningDecision`,
    recorded by :func:`sagemaker_tc.tuning.api.record`): its report entry."""

    def to_dict(self) -> dict[str, Any]:
        """The report's ``batch_tuning`` entry (JSON-ready)."""
        ...


def _no_captured_step() -> dict[str, Any] | None:
    return None


@dataclass
class JobRecord:
    """What the job told its session, for the report (module docstring).

    Attributes:
        integration: the integration that drives the job (``"transformers"``, ``"pytorch"``) or None.
        regions: what the configured plan compiles (set by the session's ``attach``), or None.
        batch_tuning: the batch-size decision, or None.
        resumed_from: the report's ``resumed_from`` entry (set by the session's ``resume_from``), or None.
        script_outcome: a job launcher's ``"finished"`` or ``"failed"``, set before the session closes.
        captured_step: the Trainer integration's ``captured_step`` entry (None: no entry).
    """

    integration: str | None = None
    regions: CompiledRegions | None = None
    batch_tuning: BatchTuning | None = None
    resumed_from: dict[str, Any] | None = None
    script_outcome: str | None = None
    captured_step: Callable[[], dict[str, Any] | None] = field(default=_no_captured_step)

    def join(self, integration: str, *, first_only: bool = False) -> None:
        """Record the integration that drives the job; with ``first_only``, only when none has joined yet."""
        if not (first_only and self.integration is not None):
            self.integration = integration


def gather(
    config: TrainingCompilerConfig,
    runtime: CompilerRuntime,
    record: JobRecord,
    timer: StepTimer,
    buckets: BucketStats,
    watch: CompileWatch,
    job_cache: JobCache | None,
    environ: Mapping[str, str],
) -> dict[str, Any]:
    """The report (``report.json``'s fields) as of now from a session's parts: its config, runtime,
    record, step timer, bucket statistics, compile watch, compile cache (None: none) and environment
    (the world size); waits for steps still on the GPU (the timer's flush)."""
    values = SessionValues(
        records=timer.flush(),
        compiles_in_steps=timer.compiles_in_steps,
        regional_plan=record.regions.regional if record.regions is not None else None,
        integration=record.integration,
        resumed_from=record.resumed_from,
        shapes=buckets.summary(),
        recompile_limit_hits=list(watch.recompile_limit_hits),
        cache_outcome=job_cache.outcome if job_cache is not None else None,
        batch_tuning=record.batch_tuning.to_dict() if record.batch_tuning is not None else None,
        script_outcome=record.script_outcome,
        world=world_size(environ),
    )
    report = build_report(config, job_facts(config, runtime, values))
    captured = record.captured_step()
    if captured is not None:
        report["captured_step"] = captured
    return report


def write_files(report: dict[str, Any], folder: Path, *, debug: DebugCapture | None, runtime: SessionRuntime) -> None:
    """Write ``report`` to ``folder/report.json`` (with debug mode's files first: the capture's and
    ``runtime.write_debug``'s, listed in the report's ``debug_files``) and print its metric lines.

    Raises:
        OSError: a file could not be written (the session catches it: the job's result matters more).
    """
    if debug is not None:
        report["debug_files"] = debug.write(folder)
        report["debug_files"]["files"] += runtime.write_debug(folder)
    write_report(report, folder)
    print_metric_lines(report)
