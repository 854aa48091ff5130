"""The tested-models table, generated: SMTC's "Tested models" table (native vs compiled batch size
per model) for our compiler, with samples/s at each batch.

For each suite model, each mode (``eager``, ``compiled``) runs in its own process
(:mod:`.tune_worker`): the largest batch that trains within the memory budget at the given sequence
length, then samples/s at that batch. Written as JSON (every try and measurement, the options, the
versions and the hardware) and Markdown.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sagemaker_tc.errors import TuningError
from sagemaker_tc.tuning.memory import format_bytes
from sagemaker_tc_bench import hardware
from sagemaker_tc_bench.data import tokenize_sst2
from sagemaker_tc_bench.options import MAX_BATCH_SIZE, BenchOptions
from sagemaker_tc_bench.processes import budget_timeout, run_cell
from sagemaker_tc_bench.report import INCOMPLETE_NOTE, dash_or, replace_file
from sagemaker_tc_bench.runner import resolve_options
from sagemaker_tc_bench.tune_worker import MODES, TuneSpec

logger = logging.getLogger(__name__)
SCHEMA = "sagemaker-tc/tested-models/1"
DEFAULT_STEPS = 8
RULES = {
    "max_batch": "largest per-device batch whose 2 training steps (forward, backward, AdamW step) ran without "
    "running out of memory and peaked within the budget; doubling from --start, then bisection",
    "peak": "CUDA: torch.cuda.max_memory_allocated; CPU: parameters and buffers + peak of the steps' allocations "
    "through PyTorch's CPU allocator (profiler memory events)",
    "compiled": "regions compiled as sagemaker_tc does (each repeated block); tries use dynamic shapes, the "
    "samples/s run compiles static shapes at the found batch (sagemaker_tc.compile_model)",
    "samples_per_s": "batch / median steady step (bench rules), measured at each mode's own max batch",
}


@dataclass(frozen=True)
class TableOptions:
    """Checked options of one table run (bench options plus the search's bounds)."""

    bench: BenchOptions
    modes: tuple[str, ...]
    budget_gib: float | None
    max_batch: int
    multiple_of: int
    start: int


def resolve_table_options(
    *,
    models: list[str] | None = None,
    size: str = "tiny",
    seq_len: int | None = None,
    dtype: str = "fp32",
    device: str | None = None,
    steps: int = DEFAULT_STEPS,
    budget_gib: float | None = None,
    max_batch: int = 1024,
    multiple_of: int = 1,
    start: int = 1,
    modes: list[str] | None = None,
    cpu_threads: int | None = None,
    timeout_s: float = 1800.0,
    time_budget_s: float | None = None,
    data: str | Path | None = None,
) -> TableOptions:
    """Check every option before any model is built (the bench's checks for models, size, dtype,
    device, steps and data; the search's for the rest).

    Raises:
        BenchError: a bench option (unknown model, ``cuda`` without a GPU, ...).
        TuningError: a bad budget, cap, multiple, start or mode.
    """
    bench = resolve_options(
        models=models,
        size=size,
        seq_len=seq_len,
        steps=steps,
        dtype=dtype,
        device=device,
        cpu_threads=cpu_threads,
        timeout_s=timeout_s,
        time_budget_s=time_budget_s,
        data=data,
    )
    chosen = MODES if modes is None else tuple(modes)
    if not chosen:
        raise TuningError("modes: none given; name eager and/or compiled, or leave modes out for both")
    for mode in chosen:
        if mode not in MODES:
            raise TuningError(f"unknown mode {mode!r}; accepted: {', '.join(MODES)}")
    if budget_gib is not None and not (math.isfinite(budget_gib) and budget_gib > 0):
        raise TuningError(f"memory budget must be a finite number > 0 GiB (got {budget_gib})")
    for name, value in (("max_batch", max_batch), ("multiple_of", multiple_of), ("start", start)):
        if value < 1:
            raise TuningError(f"{name} must be >= 1 (got {value})")
    if max_batch > MAX_BATCH_SIZE:
        raise TuningError(
            f"max_batch must be at most {MAX_BATCH_SIZE} (got {max_batch}): no device trains a larger batch"
        )
    if multiple_of > max_batch:
        raise TuningError(f"multiple_of ({multiple_of}) is larger than max_batch ({max_batch})")
    return TableOptions(bench, chosen, budget_gib, max_batch, multiple_of, start)


def _cell(options: TableOptions, model: str, mode: str, workdir: Path, data_path: Path, timeout_s: float) -> dict:
    bench = options.bench
    spec = TuneSpec(
        model=model,
        size=bench.size,
        mode=mode,
        seq_len=bench.seq_len,
        dtype=bench.dtype,
        device=bench.device,
        data_path=str(data_path),
        budget_gib=options.budget_gib,
        max_batch=options.max_batch,
        multiple_of=options.multiple_of,
        start=options.start,
        steps=bench.steps,
    )
    stem = f"{model}--{mode}"
    logger.info("tune: %s / %s", model, mode)
    return run_cell(
        "sagemaker_tc_bench.tune_worker", spec, workdir / stem, bench, workdir / "inductor-cache" / stem, timeout_s
    )


def _row(model: str, cells: dict[str, dict]) -> dict[str, Any]:
    row: dict[str, Any] = {"model": model}
    for mode, cell in cells.items():
        ok = cell.get("status") == "ok"
        throughput = cell.get("throughput") or {}
        search = cell.get("search") or {}
        peaks = [
            t["peak_bytes"] for t in search.get("trials", []) if t["fits"] and t["batch_size"] == cell.get("max_batch")
        ]
        row[mode] = {
            "status": cell.get("status"),
            "error": cell.get("error"),
            "max_batch": cell.get("max_batch") if ok else None,
            "first_too_large": search.get("first_too_large"),
            "exact": search.get("exact"),
            "capped": search.get("capped"),
            "tries": search.get("tries"),
            "search_seconds": search.get("search_seconds"),
            "peak_bytes_at_max": peaks[0] if peaks else None,
            "samples_per_s": throughput.get("samples_per_s"),
            "step_ms": throughput.get("step_ms"),
            "first_step_s": throughput.get("first_step_s"),
            "throughput_status": throughput.get("status"),
            "device_name": throughput.get("device_name"),
            "process_wall_s": cell.get("process_wall_s"),
            "trials": search.get("trials", []),
        }
    eager, compiled = row.get("eager", {}), row.get("compiled", {})
    row["max_batch_ratio"] = (
        compiled["max_batch"] / eager["max_batch"] if eager.get("max_batch") and compiled.get("max_batch") else None
    )
    row["samples_per_s_ratio"] = (
        compiled["samples_per_s"] / eager["samples_per_s"]
        if eager.get("samples_per_s") and compiled.get("samples_per_s")
        else None
    )
    return row


def run_table(
    options: TableOptions, *, command: str | None = None, on_cell: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Run every (model, mode) cell and return the table document (JSON-ready): ``schema``,
    ``created``, ``command``, ``complete``, ``options``, ``device``, ``environment`` (versions and
    hardware), ``budget``, ``rules``, and ``rows``: per model, each mode's ``max_batch``,
    ``first_too_large``, ``peak_bytes_at_max`` (bytes), ``samples_per_s`` at that batch, every try,
    and the compiled/eager ratios of max batch and samples/s.

    Args:
        on_cell: called with the document so far (``complete`` False) after every finished cell.
    """
    bench = options.bench
    data = tokenize_sst2(options.max_batch, bench.seq_len, bench.data)
    workdir = Path(tempfile.mkdtemp(prefix="sagemaker-tc-tune-"))
    rows: list[dict[str, Any]] = []
    facts = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "data": {"source": data.source, "rows": options.max_batch},
    }
    deadline = None if bench.time_budget_s is None else time.perf_counter() + bench.time_budget_s
    try:
        data_path = workdir / "data.json"
        data_path.write_text(json.dumps(data.to_dict()), encoding="utf-8")
        for model in bench.models:
            cells: dict[str, dict] = {}
            for mode in options.modes:
                timeout_s = budget_timeout(bench.timeout_s, deadline)
                if timeout_s <= 0:
                    cells[mode] = {"status": "skipped", "error": f"time budget of {bench.time_budget_s:.0f} s spent"}
                else:
                    cells[mode] = _cell(options, model, mode, workdir, data_path, timeout_s)
                if on_cell is not None:
                    on_cell(_document(options, facts, [*rows, _row(model, cells)], complete=False))
            rows.append(_row(model, cells))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _document(options, facts, rows, complete=True)


def _document(
    options: TableOptions, facts: dict[str, Any], rows: list[dict[str, Any]], *, complete: bool
) -> dict[str, Any]:
    """The table document (:func:`run_table`) with ``rows``; ``facts``: its ``created``, ``command``, ``data``."""
    bench = options.bench
    environment = hardware.environment()
    first = next((r[m] for r in rows for m in options.modes if r.get(m, {}).get("status") == "ok"), {})
    return {
        "schema": SCHEMA,
        "created": facts["created"],
        "command": facts["command"],
        "complete": complete,
        "options": {
            **{
                k: (str(v) if isinstance(v, Path) else v)
                for k, v in asdict(bench).items()
                if k not in ("variants", "batch_size", "cache_dir")
            },
            "modes": list(options.modes),
            "budget_gib": options.budget_gib,
            "max_batch": options.max_batch,
            "multiple_of": options.multiple_of,
            "start": options.start,
        },
        "device": {"type": bench.device, "name": first.get("device_name") or bench.device_name},
        "environment": environment,
        "data": facts["data"],
        "rules": RULES,
        "rows": rows,
    }


def markdown(document: dict[str, Any]) -> str:
    """The table as Markdown: a heading line with device, versions and budget, then one row per model."""
    options, env = document["options"], document["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    budget = f"{options['budget_gib']:g} GiB" if options["budget_gib"] else "device default"
    lines = [
        f"# Tested models: max batch, eager vs compiled ({options['size']} size)",
        "",
        f"- Device: {document['device']['type']} ({document['device']['name']}); {env['cpu_cores']} CPU cores, "
        f"{env['platform']}",
        f"- Versions: python {env['python']}, {versions}",
        f"- Sequence length {options['seq_len']}, {options['dtype']}, memory budget {budget}, batch cap "
        f"{options['max_batch']}, multiples of {options['multiple_of']}; samples/s over {options['steps']} steps",
        f"- Created {document['created']} by `{document['command']}`",
        "",
        "| model | device | seq len | max batch eager | max batch compiled | compiled/eager batch | samples/s eager "
        "| samples/s compiled | compiled/eager samples/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in document["rows"]:
        eager, compiled = row.get("eager", {}), row.get("compiled", {})

        def batch(cell: dict) -> str:
            if cell.get("status") != "ok":
                return str(cell.get("status") or "-")
            return f"{cell['max_batch']}{'+' if cell.get('capped') else ''}"

        device = document["device"]["type"]
        lines.append(
            f"| {row['model']} | {device} | {options['seq_len']} | {batch(eager)} | {batch(compiled)} "
            f"| {dash_or(row['max_batch_ratio'], '.2f')} | {dash_or(eager.get('samples_per_s'), ',.1f')} "
            f"| {dash_or(compiled.get('samples_per_s'), ',.1f')} | {dash_or(row['samples_per_s_ratio'], '.2f')} |"
        )
    if not document.get("complete", True):
        lines += ["", INCOMPLETE_NOTE]
    lines += ["", "`N+`: the batch cap fit, so the true maximum may be larger. Rules:", ""]
    lines += [f"- {key}: {rule}" for key, rule in document["rules"].items()]
    return "\n".join(lines) + "\n"


def write_outputs(document: dict[str, Any], out_dir: Path, name: str) -> dict[str, Path]:
    """Write ``NAME.json`` and ``NAME.md`` into ``out_dir`` (created), each replaced whole; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json", "markdown": out_dir / f"{name}.md"}
    replace_file(paths["json"], json.dumps(document, indent=2) + "\n")
    replace_file(paths["markdown"], markdown(document))
    return paths


def summary_lines(document: dict[str, Any]) -> list[str]:
    """One line per model for the terminal: max batch and samples/s per mode."""
    lines = []
    for row in document["rows"]:
        parts = []
        for mode in document["options"]["modes"]:
            cell = row.get(mode, {})
            if cell.get("status") == "ok":
                capped = "+ (the cap fit)" if cell.get("capped") else ""
                parts.append(
                    f"{mode} max batch {cell['max_batch']}{capped} (peak {format_bytes(cell['peak_bytes_at_max'])}, "
                    f"{dash_or(cell.get('samples_per_s'), ',.1f')} samples/s)"
                )
            else:
                parts.append(f"{mode} {cell.get('status')}: {cell.get('error')}")
        lines.append(f"{row['model']}: " + "; ".join(parts))
    return lines
