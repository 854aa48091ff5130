"""Debug mode (``TrainingCompilerConfig(debug=True)``): readable files about what the compiler did.

Written at job end under ``$SM_OUTPUT_DATA_DIR/compiler/`` (next to ``report.json`` and torch's own
``TORCH_TRACE`` logs):

- ``graph_breaks.txt``: each graph break dynamo logged, with its reason and the user code location
  (torch's ``graph_breaks`` log artifact);
- ``recompiles.txt``: each recompile with the guard that failed (torch's ``recompiles`` artifact);
- ``compiles.json``: one entry per compiled frame from dynamo's compilation metrics: compile id,
  function and source location, seconds, graph op count, recompile reason, failure.

The launcher turns torch's artifacts on through ``TORCH_LOGS=graph_breaks,recompiles`` before torch
is imported; :func:`install` attaches handlers that keep their records.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

# torch's artifact loggers (torch._logging.getArtifactLogger(module, artifact): "<module>.__<artifact>").
GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
RECOMPILE_LOGGERS = ("torch._dynamo.guards.__recompiles",)
MAX_RECORDS = 500


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.messages) >= MAX_RECORDS:
            return
        try:
            self.messages.append(record.getMessage())
        except Exception:  # a malformed record must not break training
            return


_GRAPH_BREAKS = _Keep()
_RECOMPILES = _Keep()
_installed = False


def install() -> None:
    """Keep torch's graph-break and recompile log records (idempotent). When ``TORCH_LOGS`` did not
    turn the artifacts on, turn them on here."""
    global _installed
    if _installed:
        return
    import os

    import torch._logging

    if not os.environ.get("TORCH_LOGS"):
        torch._logging.set_logs(graph_breaks=True, recompiles=True)
    for name in GRAPH_BREAK_LOGGERS:
        logging.getLogger(name).addHandler(_GRAPH_BREAKS)
    for name in RECOMPILE_LOGGERS:
        logging.getLogger(name).addHandler(_RECOMPILES)
    _installed = True


def compile_records() -> list[dict[str, Any]]:
    """One dict per compiled frame (dynamo's compilation metrics; empty without torch)."""
    import sys

    if "torch" not in sys.modules:
        return []
    from torch._dynamo.utils import get_compilation_metrics

    records = []
    for metric in get_compilation_metrics():
        records.append(
            {
                "compile_id": metric.compile_id,
                "function": metric.co_name,
                "location": f"{metric.co_filename}:{metric.co_firstlineno}" if metric.co_filename else None,
                "seconds": metric.entire_frame_compile_time_s,
                "backend_seconds": metric.backend_compile_time_s,
                "graph_ops": metric.graph_op_count,
                "graph_breaks": getattr(metric, "num_graph_breaks", None),
                "recompile_reason": getattr(metric, "recompile_reason", None),
                "failure": f"{metric.fail_type}: {metric.fail_reason}" if metric.fail_type else None,
            }
        )
    return records


def write(folder: Path) -> dict[str, Any]:
    """Write the debug files into ``folder`` and return the report's ``debug`` summary: file names,
    graph breaks and recompile reasons (first 20 each), and per-graph compile seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    records = compile_records()
    (folder / "graph_breaks.txt").write_text("\n\n".join(_GRAPH_BREAKS.messages) + "\n", encoding="utf-8")
    (folder / "recompiles.txt").write_text("\n\n".join(_RECOMPILES.messages) + "\n", encoding="utf-8")
    (folder / "compiles.json").write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
    return {
        "files": ["graph_breaks.txt", "recompiles.txt", "compiles.json"],
        "graph_breaks": [m.strip().splitlines()[0] if m.strip() else m for m in _GRAPH_BREAKS.messages[:20]],
        "recompile_reasons": [r["recompile_reason"] for r in records if r["recompile_reason"]][:20],
        "compile_seconds_per_graph": [
            {"compile_id": r["compile_id"], "function": r["function"], "seconds": r["seconds"]} for r in records
        ],
    }
