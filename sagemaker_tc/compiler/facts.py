"""What a compiler session measured and decided, gathered for its report.

:func:`job_facts` reads the runtime and its parts (plans, trials, decision, failures, evaluation) and the values the
session hands it (step records, compile watch, cache outcome, batch-size decision) into the
:class:`~sagemaker_tc.compiler.report.JobFacts` that :func:`~sagemaker_tc.compiler.report.build_report`
turns into ``report.json``. Dynamo's counts start at the session's open (:class:`~.dynamo.DynamoMark`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler import known_wrong, planner, sharding
from sagemaker_tc.compiler.dynamo import inductor_cache_counters
from sagemaker_tc.compiler.report import JobFacts
from sagemaker_tc.compiler.steps import StepRecord, summarize

if TYPE_CHECKING:
    from sagemaker_tc.compiler.runtime import CompilerRuntime
    from sagemaker_tc.config import TrainingCompilerConfig

logger = logging.getLogger("sagemaker_tc.session")


@dataclass
class SessionValues:
    """What the session hands :func:`job_facts` besides its runtime.

    Attributes:
        records: the step records, flushed (no step still on the GPU).
        compiles_in_steps: training steps during which something compiled.
        regional_plan: the configured plan compiled per block (a ``CompiledRegions``'s ``regional``; None
            before any attach).
        integration: ``"transformers"``, ``"pytorch"`` or None.
        resumed_from: the report's ``resumed_from`` entry, or None.
        shapes: the bucket statistics' summary.
        recompile_limit_hits: dynamo's recompile-limit warnings, as the compile watch kept them.
        cache_outcome: the compile cache's outcome, None without a compile cache.
        batch_tuning: the batch-size decision's report entry, None when none was recorded.
        script_outcome: how a launcher's script ended (``"finished"``, ``"failed"``), else None.
        world: processes in the job.
    """

    records: list[StepRecord]
    compiles_in_steps: int
    regional_plan: bool | None
    integration: str | None
    resumed_from: dict[str, Any] | None
    shapes: dict[str, Any]
    recompile_limit_hits: list[Any]
    cache_outcome: dict[str, Any] | None
    batch_tuning: dict[str, Any] | None
    script_outcome: str | None
    world: int


def job_facts(config: TrainingCompilerConfig, runtime: CompilerRuntime, values: SessionValues) -> JobFacts:
    """The job's facts as of now, by the session's ``config``, its ``runtime`` and ``values``."""
    records = values.records
    attached = runtime.config is not None
    plan = runtime.final_label() if attached else None
    variant = None if plan is None else ("eager" if plan == "eager" else "compiled")
    regional = None
    if plan is not None and plan != "eager":
        regional = plan == "regional" and bool(values.regional_plan)
    return JobFacts(
        steps=summarize(records, plan),
        dynamo=runtime.compiled_graphs(),
        integration=values.integration,
        regional=regional,
        fallback_reason=_fallback_reason(config, runtime, plan, values),
        variant=variant,
        plan=plan,
        plan_decision=_plan_decision(runtime),
        trials=runtime.trials() if attached else [],
        eager_step_seconds=runtime.eager_step_seconds() if attached else None,
        cache=_cache(values.cache_outcome),
        resumed_from=values.resumed_from,
        shapes=values.shapes,
        recompile_limit_hits=list(values.recompile_limit_hits),
        training_compiles=values.compiles_in_steps,
        inductor_cache=inductor_cache_counters(runtime.compiles_since),
        attention=runtime.attention,
        batch_tuning=_batch_tuning(config, values.batch_tuning),
        xla=runtime.compile_stats(),
        distributed=sharding.report_section(runtime.attached_models(), plan, values.world) if attached else None,
    )


def _cache(outcome: dict[str, Any] | None) -> dict[str, Any]:
    """The cache outcome, with ``hit``: True when the load restored a warm entry."""
    if outcome is None:
        return {"state": "disabled", "hit": False}
    return {**outcome, "hit": outcome.get("state") == "warm"}


def _plan_decision(runtime: CompilerRuntime) -> dict[str, Any] | None:
    if runtime.config is None:
        return None
    decision = runtime.decision
    source = (decision or {}).get("source") or ("configured" if runtime.config.plan != "auto" else None)
    return {
        "requested": runtime.config.plan,
        "source": source,
        "optimizer": runtime.optimizer_kind,
        "decision": runtime.decision,
        "shape_policy": runtime.shapes.describe() if runtime.shapes is not None else None,
        "failures": list(runtime.failures),
        "recompile_budgets": dict(runtime.recompile_budgets),
        "gpu_evidence": planner.gpu_evidence_fields(runtime.device),
        "optimizer_steps_skipped": runtime.optimizer_steps_skipped(),
        "evaluation": runtime.evaluation.summary(),
        **known_wrong.report_fields(runtime.attached_models(), runtime.config.plan, runtime.final_label()),
    }


def _fallback_reason(
    config: TrainingCompilerConfig, runtime: CompilerRuntime, plan: str | None, values: SessionValues
) -> str | None:
    records = values.records
    reason = runtime.fallback_reason if plan == "eager" else None  # a failure stepped back to eager
    if runtime.config is None and values.script_outcome == "failed":
        return "the script failed before it attached a model (its own error, in the job's log); nothing was compiled"
    if runtime.config is None or reason is not None or not plan or plan == "eager":
        return reason
    if any(record.variant == plan for record in records):
        return None
    return (
        f"no training step ran compiled: the job's {len(records)} step(s) all ran before the switch "
        f"to compiled (baseline_steps={config.baseline_steps})"
    )


def _batch_tuning(config: TrainingCompilerConfig, recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    if recorded is not None:
        return recorded
    if config.batch_size is None:
        return None
    note = (
        "nothing in the script applied it: a Hugging Face Trainer applies it when it is built; a plain "
        "PyTorch loop calls sagemaker_tc.tune_batch_size"
    )
    logger.warning("BATCH SIZE NOT TUNED: batch_size=%r was set, but %s", config.batch_size, note)
    return {"requested": config.batch_size, "applied": False, "note": note}
