"""The per-job compiler report: ``$SM_OUTPUT_DATA_DIR/compiler/report.json`` and metric lines.

The report lands in the job's ``output.tar.gz``. The same figures are printed on stdout as
``[sagemaker-tc] name=value`` lines that a SageMaker ``metric_definitions`` regex reads
(``sagemaker_tc.sdk.COMPILER_METRIC_DEFINITIONS``). The session
(:meth:`sagemaker_tc.compiler.session.CompilerSession.report`) gathers the facts; this module turns
them into the report.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sagemaker_tc import contract
from sagemaker_tc.compiler.dynamo import DynamoStats
from sagemaker_tc.compiler.steps import StepSummary
from sagemaker_tc.config import TrainingCompilerConfig

METRIC_PREFIX = contract.METRIC_PREFIX
METRIC_NAMES = contract.METRIC_NAMES

logger = logging.getLogger("sagemaker_tc.session")


def break_even_steps(
    compile_seconds: float | None, eager_step_seconds: float | None, compiled_step_seconds: float | None
) -> int | None:
    """Optimizer steps after which compiling has paid for itself: compile overhead divided by the
    per-step saving (eager step minus compiled step), rounded up (SMTC's FAQ question "is my job
    long enough?"). None when a figure is missing or the compiled step is not faster.
    """
    if compile_seconds is None or eager_step_seconds is None or compiled_step_seconds is None:
        return None
    saving = eager_step_seconds - compiled_step_seconds
    if saving <= 0:
        return None
    return max(1, math.ceil(compile_seconds / saving))


@dataclass
class JobFacts:
    """What a job's compiler session measured and decided, for :func:`build_report`.

    Attributes:
        steps: the step summary of the final variant (:func:`~sagemaker_tc.compiler.steps.summarize`).
        dynamo: what was compiled (:meth:`~sagemaker_tc.compiler.runtime.CompilerRuntime.compiled_graphs`:
            dynamo's counts, or XLA's with ``backend="xla"``).
        integration: ``"transformers"``, ``"pytorch"`` or None (nothing measured steps).
        regional: True/False as compiled; None when nothing was compiled.
        fallback_reason: why the job did not end compiled (None: it did, or the config does not compile).
        variant: ``"compiled"`` or ``"eager"``: how the job ended (None: no runtime attached).
        plan: the plan the job ended on: ``eager``, ``regional``, ``model`` or ``step``.
        plan_decision: how the plan was chosen (requested plan, optimizer update, ``plan="auto"``'s
            projections and reason, shape policy).
        trials: each measured option, ``{"plan", "variant", "steady_step_seconds", "compile_seconds"}``.
        eager_step_seconds: the eager baseline's steady step, seconds.
        cache: the compile cache outcome (``{"state": "cold" | "warm" | "disabled", ...}``).
        shapes: the bucketing summary (None: no bucketing collator).
        recompile_limit_hits: dynamo's recompile-limit warnings, one line each.
        training_compiles: compilations that started inside training steps.
        inductor_cache: Inductor's FX graph / AOTAutograd cache hits and misses.
        attention: the model's attention kernel (Hugging Face models).
        batch_tuning: the batch-size decision
            (:meth:`sagemaker_tc.tuning.decision.TuningDecision.to_dict`), else None.
        resumed_from: the checkpoint the job resumed from (:func:`sagemaker_tc.compiler.resume.begin`:
            ``{"checkpoint", "step", "steps_lost"}``), else None.
        xla: ``backend="xla"``'s counts (:meth:`sagemaker_tc.compiler.xla.XlaBackend.compile_stats`),
            else None.
    """

    steps: StepSummary
    dynamo: DynamoStats
    integration: str | None = None
    regional: bool | None = None
    fallback_reason: str | None = None
    variant: str | None = None
    plan: str | None = None
    plan_decision: dict[str, Any] | None = None
    trials: list[dict[str, Any]] = field(default_factory=list)
    eager_step_seconds: float | None = None
    cache: dict[str, Any] = field(default_factory=lambda: {"state": "disabled", "hit": False})
    shapes: dict[str, Any] | None = None
    recompile_limit_hits: list[str] = field(default_factory=list)
    training_compiles: int | None = None
    inductor_cache: dict[str, int] | None = None
    attention: str | None = None
    batch_tuning: dict[str, Any] | None = None
    xla: dict[str, Any] | None = None
    resumed_from: dict[str, Any] | None = None
    distributed: dict[str, Any] | None = None  # sharding.report_section: strategy, world size, FSDP2 units


def build_report(config: TrainingCompilerConfig, facts: JobFacts) -> dict[str, Any]:
    """The report as a JSON-ready dict.

    ``compiled`` is True only when the config compiles, dynamo really compiled at least one graph,
    and the job ended on a compiled variant; otherwise, when the config asked for compilation,
    ``fallback_reason`` says why. Times are seconds; ``samples_per_second`` is over the steady
    steps of the final variant; ``break_even_steps`` is :func:`break_even_steps` of
    ``compile_seconds``, ``eager_step_seconds`` and ``steady_step_seconds``. ``graphs`` counts every
    graph dynamo compiled (training and evaluation); ``training_compiles`` the compilations that
    started inside training steps.
    """
    steps, dynamo, variant = facts.steps, facts.dynamo, facts.variant
    fallback_reason = facts.fallback_reason
    ended_compiled = variant is None or variant.startswith("compiled")
    compiled = config.compiles and dynamo.graphs > 0 and fallback_reason is None and ended_compiled
    switched_off = [name for name in contract.ENV_COMPILE_DISABLE if os.environ.get(name) == "1"]
    if config.compiles and not compiled and fallback_reason is None and switched_off and dynamo.graphs == 0:
        fallback_reason = (
            f"{switched_off[0]}=1 in the job's environment switched torch.compile off (it wins over compiler_config): "
            "every step ran eager; remove the variable to compile"
        )
    if not compiled and dynamo.graphs == 0 and ended_compiled and variant is not None:
        variant = "eager"  # no compiled graph ran: the compiled variant's steps ran eager
    if config.compiles and not compiled and fallback_reason is None:
        if not ended_compiled:
            fallback_reason = f"plan='auto' kept eager: {_decision_reason(facts)}"
        else:
            fallback_reason = (
                "the compiler was enabled but no compiled graph ran: a Hugging Face Trainer script compiles on its "
                "own; a plain PyTorch loop must call sagemaker_tc.compile_model(model)"
            )
    limit_hits = list(facts.recompile_limit_hits)
    return {
        "compiled": compiled,
        "backend": config.backend,
        "mode": config.mode,
        "regional": facts.regional,
        "integration": facts.integration,
        "policy": config.policy,
        "variant": variant,
        "plan": facts.plan,
        "plan_decision": facts.plan_decision,
        "fallback_reason": fallback_reason,
        "compile_seconds": _compile_seconds(steps, facts.xla),
        "dynamo_compile_seconds": dynamo.compile_seconds,
        "first_step_seconds": steps.first_step_seconds,
        "steady_step_seconds": steps.steady_step_seconds,
        "eager_step_seconds": facts.eager_step_seconds,
        "break_even_steps": break_even_steps(
            steps.compile_seconds if compiled else None, facts.eager_step_seconds, steps.steady_step_seconds
        ),
        "samples_per_second": steps.samples_per_second,
        "steps": steps.steps,
        "trials": list(facts.trials),
        "attention": facts.attention,
        "graphs": dynamo.graphs,
        "training_compiles": facts.training_compiles,
        "recompiles": dynamo.recompiles,
        "recompile_limit_hit": bool(limit_hits),
        "recompile_limit_messages": limit_hits,
        "graph_breaks": dynamo.graph_breaks,
        "graph_break_reasons": dynamo.graph_break_reasons,
        "shapes": facts.shapes,
        "cache": facts.cache or {"state": "disabled", "hit": False},
        "resumed_from": facts.resumed_from,
        "inductor_cache": facts.inductor_cache,
        "batch_tuning": facts.batch_tuning,
        "xla": facts.xla,
        "distributed": facts.distributed,
        "debug": config.debug,
        "versions": _versions(),
    }


def _compile_seconds(steps: StepSummary, xla: dict[str, Any] | None) -> float | None:
    """The compiling steps' time beyond steady state; for XLA, when no step was seen compiling (a
    ``Trainer``, whose dataloader marks the step between steps), XLA's own compile seconds."""
    if steps.compile_seconds is not None or not xla:
        return steps.compile_seconds
    return xla.get("compile_seconds")


def _decision_reason(facts: JobFacts) -> str:
    """``plan="auto"``'s reason when there is one; the job ended before a decision; else the trials'
    step times."""
    plan_decision = facts.plan_decision or {}
    decision = plan_decision.get("decision") or {}
    if decision.get("reason"):
        return decision["reason"]
    if plan_decision.get("requested") == "auto" and len(facts.trials) <= 1:
        return f"the job ended after {facts.steps.steps} step(s), during plan='auto''s eager steps, before any decision"
    parts = []
    for trial in facts.trials:
        name, seconds = trial.get("plan", trial["variant"]), trial.get("steady_step_seconds")
        parts.append(f"{name} {seconds:.4g} s/step" if seconds is not None else f"{name} n/a")
    return "it measured fastest (" + (", ".join(parts) or "no trials") + ")"


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers", "accelerate"):
        module = sys.modules.get(name)
        versions[name] = getattr(module, "__version__", None) if module else None
    return versions


def write_report(report: dict[str, Any], compiler_dir: Path) -> Path:
    """Write ``report.json`` into ``compiler_dir`` (created if missing) and return its path."""
    compiler_dir.mkdir(parents=True, exist_ok=True)
    path = compiler_dir / contract.REPORT_FILENAME
    path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    logger.info(
        "Compiler report written to %s: compiled=%s variant=%s compile_seconds=%s steady_step_seconds=%s "
        "eager_step_seconds=%s break_even_steps=%s cache=%s",
        path,
        report["compiled"],
        report["variant"],
        _fmt(report["compile_seconds"]),
        _fmt(report["steady_step_seconds"]),
        _fmt(report["eager_step_seconds"]),
        report["break_even_steps"],
        report["cache"]["state"],
    )
    return path


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def metric_lines(report: dict[str, Any]) -> list[str]:
    """``[sagemaker-tc] name=value`` for each metric that has a value (booleans as 0/1)."""
    lines = [f"{METRIC_PREFIX}compiled={int(bool(report['compiled']))}"]
    for name in METRIC_NAMES:
        value = report.get(name)
        if value is None:
            continue
        lines.append(
            f"{METRIC_PREFIX}{name}={value:.6g}" if isinstance(value, float) else f"{METRIC_PREFIX}{name}={value}"
        )
    return lines


def print_metric_lines(report: dict[str, Any], stream: TextIO | None = None) -> None:
    """Print :func:`metric_lines` (the documented metric lines, the one place the runtime prints)."""
    stream = stream or sys.stdout
    for line in metric_lines(report):
        print(line, file=stream, flush=True)
