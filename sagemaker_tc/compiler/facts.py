"""What a compiler session measured and decided, gathered for its report.

:func:`job_facts` reads a :class:`~sagemaker_tc.compiler.session.CompilerSession` (its runtime, step
records, compile watch, cache outcome and batch-size decision) into the
:class:`~sagemaker_tc.compiler.report.JobFacts` that :func:`~sagemaker_tc.compiler.report.build_report`
turns into ``report.json``. Dynamo's counts start at the session's open (:class:`~.dynamo.DynamoMark`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler import known_wrong, planner, sharding
from sagemaker_tc.compiler.dynamo import inductor_cache_counters
from sagemaker_tc.compiler.report import JobFacts
from sagemaker_tc.compiler.steps import summarize

if TYPE_CHECKING:
    from sagemaker_tc.compiler.session import CompilerSession

logger = logging.getLogger("sagemaker_tc.session")


def job_facts(session: CompilerSession) -> JobFacts:
    """The session's facts as of now; waits for steps still on the GPU (the step timer's flush)."""
    runtime = session.runtime
    records = session.timer.flush()
    attached = runtime.config is not None
    plan = runtime.final_label() if attached else None
    variant = None if plan is None else ("eager" if plan == "eager" else "compiled")
    regional = None
    if plan is not None and plan != "eager":
        regional = plan == "regional" and session.plan is not None and session.plan.regional
    return JobFacts(
        steps=summarize(records, plan),
        dynamo=runtime.compiled_graphs(),
        integration=session.integration,
        regional=regional,
        fallback_reason=_fallback_reason(session, plan, records),
        variant=variant,
        plan=plan,
        plan_decision=_plan_decision(session),
        trials=runtime.trials() if attached else [],
        eager_step_seconds=runtime.eager_step_seconds() if attached else None,
        cache=_cache(session),
        resumed_from=session.resumed_from,
        shapes=session.buckets.summary(),
        recompile_limit_hits=list(session.watch.recompile_limit_hits),
        training_compiles=session.timer.compiles_in_steps,
        inductor_cache=inductor_cache_counters(runtime.compiles_since),
        attention=runtime.attention,
        batch_tuning=_batch_tuning(session),
        xla=runtime.compile_stats(),
        distributed=sharding.report_section(session) if attached else None,
    )


def _cache(session: CompilerSession) -> dict[str, Any]:
    """The cache outcome, with ``hit``: True when the load restored a warm entry."""
    if session.job_cache is None:
        return {"state": "disabled", "hit": False}
    return {**session.job_cache.outcome, "hit": session.job_cache.outcome.get("state") == "warm"}


def _plan_decision(session: CompilerSession) -> dict[str, Any] | None:
    runtime = session.runtime
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
        "evaluation": runtime.evaluation_report(),
        **known_wrong.report_fields(runtime.attached_models(), runtime.config.plan, runtime.final_label()),
    }


def _fallback_reason(session: CompilerSession, plan: str | None, records: list) -> str | None:
    runtime = session.runtime
    reason = runtime.fallback_reason if plan == "eager" else None  # a failure stepped back to eager
    if runtime.config is None and session.script_outcome == "failed":
        return "the script failed before it attached a model (its own error, in the job's log); nothing was compiled"
    if runtime.config is None or reason is not None or not plan or plan == "eager":
        return reason
    if any(record.variant == plan for record in records):
        return None
    return (
        f"no training step ran compiled: the job's {len(records)} step(s) all ran before the switch "
        f"to compiled (baseline_steps={session.config.baseline_steps})"
    )


def _batch_tuning(session: CompilerSession) -> dict[str, Any] | None:
    if session.batch_tuning is not None:
        return session.batch_tuning.to_dict()
    if session.config.batch_size is None:
        return None
    note = (
        "nothing in the script applied it: a Hugging Face Trainer applies it when it is built; a plain "
        "PyTorch loop calls sagemaker_tc.tune_batch_size"
    )
    logger.warning("BATCH SIZE NOT TUNED: batch_size=%r was set, but %s", session.config.batch_size, note)
    return {"requested": session.config.batch_size, "applied": False, "note": note}
