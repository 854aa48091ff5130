"""Debug mode (``TrainingCompilerConfig(debug=True)``): readable files about what the compiler did.

Written at job end under ``$SM_OUTPUT_DATA_DIR/compiler/`` (next to ``report.json`` and torch's own
``TORCH_TRACE`` logs):

- ``graph_breaks.txt``: each graph break dynamo logged, with its reason and the user code location
  (torch's ``graph_breaks`` log artifact);
- ``recompiles.txt``: each recompile with the guard that failed (torch's ``recompiles`` artifact);
- ``compiles.json``: one entry per compiled frame from dynamo's compilation metrics: compile id,
  function and source location, seconds, graph op count, recompile reason, failure.

The launcher turns torch's artifacts on through ``TORCH_LOGS=graph_breaks,recompiles`` before torch
is imported; the session's :class:`DebugCapture` attaches handlers that keep their records.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagemaker_tc import _internals, contract

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


class DebugCapture:
    """Keeps torch's graph-break and recompile log records for one session (debug mode).

    :meth:`install` attaches the handlers (and turns the artifacts on when ``TORCH_LOGS`` did not);
    :meth:`uninstall` takes them off again; :meth:`write` writes the files.
    """

    def __init__(self) -> None:
        self.graph_breaks = _Keep()
        self.recompiles = _Keep()
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        """Attach the handlers (idempotent; imports torch)."""
        if self._undo:
            return
        if not os.environ.get(contract.ENV_TORCH_LOGS):
            self._undo.append(_internals.turn_on_compile_logs())
        for names, handler in (
            (_internals.GRAPH_BREAK_LOGGERS, self.graph_breaks),
            (_internals.RECOMPILE_LOGGERS, self.recompiles),
        ):
            for name in names:
                logging.getLogger(name).addHandler(handler)
                self._undo.append(lambda name=name, handler=handler: logging.getLogger(name).removeHandler(handler))

    def uninstall(self) -> None:
        """Detach what :meth:`install` attached."""
        while self._undo:
            self._undo.pop()()

    def write(self, folder: Path) -> dict[str, Any]:
        """Write the debug files into ``folder`` and return the report's ``debug_files`` summary: file
        names, graph breaks and recompile reasons (first 20 each), and per-graph compile seconds."""
        folder.mkdir(parents=True, exist_ok=True)
        records = compile_records()
        breaks, recompiles = self.graph_breaks.messages, self.recompiles.messages
        (folder / "graph_breaks.txt").write_text("\n\n".join(breaks) + "\n", encoding="utf-8")
        (folder / "recompiles.txt").write_text("\n\n".join(recompiles) + "\n", encoding="utf-8")
        (folder / "compiles.json").write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
        return {
            "files": ["graph_breaks.txt", "recompiles.txt", "compiles.json"],
            "graph_breaks": [m.strip().splitlines()[0] if m.strip() else m for m in breaks[:20]],
            "recompile_reasons": [r["recompile_reason"] for r in records if r["recompile_reason"]][:20],
            "compile_seconds_per_graph": [
                {"compile_id": r["compile_id"], "function": r["function"], "seconds": r["seconds"]} for r in records
            ],
        }


def compile_records() -> list[dict[str, Any]]:
    """One dict per compiled frame (dynamo's compilation records; empty without torch). A frame's
    backward compiled later in ``loss.backward()`` has a record of its own (``is_forward`` false,
    no function or compile time: torch 2.8 writes them, 2.13 compiles the backward with its forward);
    it is part of that frame's compilation and left out, as :func:`~.dynamo.dynamo_stats` does."""
    import sys

    if "torch" not in sys.modules:
        return []
    records = []
    for metric in _internals.compilation_records():
        if not getattr(metric, "is_forward", True):
            continue
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
