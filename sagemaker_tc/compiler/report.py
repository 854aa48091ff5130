"""The per-job compiler report: ``$SM_OUTPUT_DATA_DIR/compiler/report.json`` and metric lines.

The report lands in the job's ``output.tar.gz``. The same figures are printed on stdout as
``[sagemaker-tc] name=value`` lines that a SageMaker ``metric_definitions`` regex reads
(``sagemaker_tc.sdk.COMPILER_METRIC_DEFINITIONS``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from sagemaker_tc.compiler.recorder import DynamoStats, StepSummary
from sagemaker_tc.config import TrainingCompilerConfig

METRIC_PREFIX = "[sagemaker-tc] "
METRIC_NAMES = ("compile_seconds", "steady_step_seconds", "samples_per_second", "recompiles", "graph_breaks")


def build_report(
    *,
    config: TrainingCompilerConfig,
    steps: StepSummary,
    dynamo: DynamoStats,
    integration: str | None,
    regional: bool | None,
    fallback_reason: str | None = None,
) -> dict[str, Any]:
    """The report as a JSON-ready dict.

    ``compiled`` is True only when the config compiles and dynamo really compiled at least one
    graph that the job ran; when the config asked for compilation and none ran, ``fallback_reason``
    says why. Times are seconds; ``samples_per_second`` is over steady steps.
    """
    compiled = config.compiles and dynamo.graphs > 0
    if config.compiles and not compiled and fallback_reason is None:
        fallback_reason = (
            "the compiler was enabled but no compiled graph ran: a Hugging Face Trainer script compiles on its own; "
            "a plain PyTorch loop must call sagemaker_tc.compile_model(model)"
        )
    return {
        "compiled": compiled,
        "backend": config.backend,
        "mode": config.mode,
        "regional": regional,
        "integration": integration,
        "fallback_reason": fallback_reason,
        "compile_seconds": steps.compile_seconds,
        "dynamo_compile_seconds": dynamo.compile_seconds,
        "first_step_seconds": steps.first_step_seconds,
        "steady_step_seconds": steps.steady_step_seconds,
        "samples_per_second": steps.samples_per_second,
        "steps": steps.steps,
        "graphs": dynamo.graphs,
        "recompiles": dynamo.recompiles,
        "graph_breaks": dynamo.graph_breaks,
        "graph_break_reasons": dynamo.graph_break_reasons,
        "debug": config.debug,
        "versions": _versions(),
    }


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers", "accelerate"):
        module = sys.modules.get(name)
        versions[name] = getattr(module, "__version__", None) if module else None
    return versions


def write_report(report: dict[str, Any], compiler_dir: Path) -> Path:
    """Write ``report.json`` into ``compiler_dir`` (created if missing) and return its path."""
    compiler_dir.mkdir(parents=True, exist_ok=True)
    path = compiler_dir / "report.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


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
