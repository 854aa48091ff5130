"""Bench outputs: the terminal table (rich), the JSON document, a Markdown table and a PNG plot.

rich and matplotlib come with the ``bench`` extra; :func:`require_outputs` checks them before any
work, and they are imported only when used. The JSON and Markdown are rewritten after every finished
row (:func:`write_document`, each file replaced whole), the plot is drawn last (:func:`write_plot`),
so a run that is interrupted, or whose plot fails, keeps every row it finished.

A row marked noisy (:mod:`sagemaker_tc_bench.rows`) shows ``noisy`` instead of a speedup figure, in
the table and the Markdown; the plot draws its speedup hatched, with error bars from the quartiles.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import IO, Any

from sagemaker_tc_bench.errors import BenchError

INSTALL_BENCH = 'pip install "sagemaker-tc[bench]"'
INCOMPLETE_NOTE = "**Incomplete**: the run had not finished when this file was written; these are its finished rows."
COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "model"),
    ("variant", "variant"),
    ("samples_per_s", "samples/s"),
    ("step_ms", "step ms"),
    ("step_ms_iqr", "step IQR ms"),
    ("first_step_s", "first step s"),
    ("peak_memory_bytes", "peak mem MiB"),
    ("recompiles", "recompiles"),
    ("mfu", "MFU"),
    ("speedup_vs_eager", "speedup vs eager"),
    ("host_ms", "host ms"),
    ("gpu_busy_ms", "GPU busy ms"),
    ("syncs_per_step", "syncs/step"),
    ("cuda_graphs_recorded", "graphs recorded"),
    ("cuda_graph_replays_per_step", "replays/step"),
    ("peak_reserved_bytes", "peak reserved MiB"),
)
"""(result field, column title) of every table column, in order."""
NEEDS_CUDA_CELL = "needs CUDA"
"""A CUDA-only figure's cell on a row that ran elsewhere (the row's ``needs_cuda`` names the fields)."""
PEER_COLUMN = ("ours_vs_peer", "ours vs peer")
"""Added after :data:`COLUMNS` when the run has the peer and one of our variants."""
PEER_RO_COLUMN = ("ours_vs_peer_ro", "ours vs peer+reduce-overhead")
"""Added when the run has ``hf-torch-compile-reduce-overhead`` and one of our variants."""
UNCOMPILED_COLUMN = ("vs_uncompiled", "vs uncompiled (same settings)")
"""Added when the run has ``eager-tuned`` and a compiled variant: each compiled row against the
uncompiled row with its own optimizer and attention."""
NOISY_FLAGS = {
    "speedup_vs_eager": "speedup_noisy",
    "ours_vs_peer": "ours_vs_peer_noisy",
    "vs_uncompiled": "vs_uncompiled_noisy",
    "ours_vs_peer_ro": "ours_vs_peer_ro_noisy",
}
"""Each ratio column and the row flag that shows it as ``noisy``."""
MIB = 1024 * 1024
FAILURE_CHARS = 400
"""A failed row's note in the Markdown is cut to about this many characters (the JSON keeps it whole)."""


def require_outputs() -> None:
    """Check that the table's and the plot's packages are installed, before any work.

    Raises:
        BenchError: rich or matplotlib is missing; the message has the install command.
    """
    missing = [name for name in ("rich", "matplotlib") if importlib.util.find_spec(name) is None]
    if missing:
        raise BenchError(
            f"sagemaker-tc bench needs {' and '.join(missing)} (the table needs rich, the plot matplotlib), "
            f"not installed here: {INSTALL_BENCH}"
        )


def columns(document: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The table's (result field, column title) pairs for this run: :data:`COLUMNS`, plus
    :data:`PEER_COLUMN` when the run has ``hf-torch-compile`` and a ``sagemaker-tc`` variant, and
    :data:`UNCOMPILED_COLUMN` when it has ``eager-tuned`` and a compiled variant."""
    named = {*document["options"].get("variants", ()), *(row["variant"] for row in document["results"])}
    variants = {name.partition("@")[0] for name in named}
    ours = any(v.startswith("sagemaker-tc") for v in variants)
    chosen = COLUMNS
    if "eager-tuned" in variants and (ours or "hf-torch-compile" in variants):
        chosen = (*chosen, UNCOMPILED_COLUMN)
    if "hf-torch-compile" in variants and ours:
        chosen = (*chosen, PEER_COLUMN)
    if "hf-torch-compile-reduce-overhead" in variants and ours:
        chosen = (*chosen, PEER_RO_COLUMN)
    return chosen


def dash_or(value: Any, spec: str) -> str:
    """``value`` formatted with ``spec`` (``format``'s mini-language), or ``-`` for None (a cell with
    no measurement)."""
    return "-" if value is None else format(value, spec)


def _cell(key: str, row: dict[str, Any]) -> str:
    if row.get("status") != "ok" and key not in ("model", "variant"):
        return str(row.get("status", "failed")) if key == "samples_per_s" else "-"
    if key in NOISY_FLAGS and row.get(NOISY_FLAGS[key]):
        return "noisy"
    value = row.get(key)
    if value is None:
        return NEEDS_CUDA_CELL if key in (row.get("needs_cuda") or ()) else "-"
    if key == "samples_per_s":
        return f"{value:,.1f}"
    if key in ("step_ms", "step_ms_iqr", "host_ms", "gpu_busy_ms", "cuda_graph_replays_per_step"):
        return f"{value:,.2f}"
    if key == "syncs_per_step":
        return f"{value:.1f}"
    if key == "first_step_s":
        return f"{value:,.2f}"
    if key in ("peak_memory_bytes", "peak_reserved_bytes"):
        return f"{value / MIB:,.0f}"
    if key == "mfu":
        return f"{100 * value:.1f}%"
    if key in ("speedup_vs_eager", "ours_vs_peer", "vs_uncompiled", "ours_vs_peer_ro"):
        return f"{value:.2f}x"
    return str(value)


def _one_line(text: str, limit: int = FAILURE_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def failure_note(row: dict[str, Any]) -> str:
    """One line on why a row failed or was skipped: its error, then where the worker's traceback
    ended (the JSON's ``traceback`` has it whole) or, without one, the last line the worker's process
    wrote (``log_tail``: where a timed-out variant was)."""
    note = _one_line(row.get("error"))
    frames = [line.strip() for line in (row.get("traceback") or "").splitlines() if line.strip().startswith("File ")]
    log_lines = (row.get("log_tail") or "").strip().splitlines()
    if frames:
        note += f"; raised at {_one_line(frames[-1], 200)} (whole traceback in the JSON)"
    elif log_lines:
        note += f"; its last output: {_one_line(log_lines[-1], 200)} (more in the JSON's log_tail)"
    return note


def memory_label(document: dict[str, Any]) -> str:
    """What the peak-memory column measured on this run's device."""
    if document["device"]["type"] == "cuda":
        return "CUDA max allocated"
    return "peak RSS of the variant's process"


def title(document: dict[str, Any]) -> str:
    """One line naming the run: device, size, dtype, batch x sequence, steps, cache state."""
    options = document["options"]
    states = sorted(
        {row.get("cache") for row in document["results"] if row.get("status") == "ok" and row.get("graphs")}
    )
    cache = f"{'/'.join(states)} compile cache" if states else "nothing compiled"
    return (
        f"sagemaker-tc bench: {options['size']} models on {document['device']['type']} "
        f"({document['device']['name']}), {options['dtype']}, batch {options['batch_size']} x "
        f"{options['seq_len']} tokens, {options['steps']} steps, {cache}"
    )


def print_table(document: dict[str, Any], stream: IO[str] | None = None) -> None:
    """Print the results as a rich table (to ``stream``, default stdout).

    Raises:
        BenchError: rich is not installed (``pip install "sagemaker-tc[bench]"``).
    """
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:
        raise BenchError('the bench table needs rich: pip install "sagemaker-tc[bench]"') from None
    table = Table(title=title(document), caption=f"peak mem: {memory_label(document)}")
    shown = columns(document)
    for key, heading in shown:
        table.add_column(heading, justify="left" if key in ("model", "variant") else "right")
    previous_model = None
    for row in document["results"]:
        if previous_model is not None and row["model"] != previous_model:
            table.add_section()
        previous_model = row["model"]
        table.add_row(*(_cell(key, row) for key, _ in shown))
    console = Console(file=stream, width=400)  # wide enough for every column unwrapped (a log, not a terminal)
    console.print(table)
    for row in document["results"]:
        if row.get("status") != "ok":
            console.print(f"[red]{row['model']} / {row['variant']}: {escape(failure_note(row))}[/red]")
        elif row.get("noisy"):
            console.print(f"[yellow]{row['model']} / {row['variant']} noisy: {'; '.join(row['noise'])}[/yellow]")


def markdown(document: dict[str, Any]) -> str:
    """The results as a Markdown document: title, table, and the machine/versions it ran on."""
    lines = [f"# {title(document)}", ""]
    shown = columns(document)
    lines.append("| " + " | ".join(heading for _, heading in shown) + " |")
    lines.append("| " + " | ".join("---" if k in ("model", "variant") else "---:" for k, _ in shown) + " |")
    for row in document["results"]:
        lines.append("| " + " | ".join(_cell(key, row) for key, _ in shown) + " |")
    env = document["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    loads = [load for row in document["results"] for load in row.get("load_avg_1m") or []]
    load_note = ""
    if loads:
        busy = max(loads) > env["cpu_cores"]
        reading = "above the core count: other work competed for the CPU" if busy else "within the core count"
        load_note = (
            f"- Host 1-minute load average around the timed steps: {min(loads):.1f} to {max(loads):.1f} "
            f"on {env['cpu_cores']} usable cores ({reading})."
        )
    lines += [
        "",
        f"- Peak memory: {memory_label(document)}.",
        f"- Machine: {env['cpu']} ({env['cpu_cores']} cores usable), {env['platform']}; "
        f"device {document['device']['type']} ({document['device']['name']}).",
        f"- Versions: Python {env['python']}, {versions}.",
        f"- Created {document['created']} by `{document['command']}`.",
        "- Rules behind each figure: the JSON's `rules`; how to read them: `benchmarks/README.md`.",
    ]
    if load_note:
        lines.append(load_note)
    if not document.get("complete", True):
        lines.append(f"- {INCOMPLETE_NOTE}")
    lines += _row_notes(document["results"])
    return "\n".join(lines) + "\n"


def _row_notes(results: list[dict[str, Any]]) -> list[str]:
    """The Markdown's notes on single rows: why one failed, why one is noisy, what plan="auto" chose."""
    notes = []
    for row in results:
        name = f"{row['model']} / {row['variant']}"
        if row.get("status") != "ok":
            notes.append(f"- **{name} {row.get('status')}**: {failure_note(row)}")
            continue
        if row.get("noisy"):
            notes.append(f"- **{name} noisy** (no speedup figure): {'; '.join(row['noise'])}")
        decision = (row.get("details") or {}).get("plan_decision") or {}
        if decision.get("reason"):
            notes.append(f"- **{name} plan** (decided at step {decision.get('decided_at_step')}): {decision['reason']}")
    return notes


def plot(document: dict[str, Any], path: Path) -> Path:
    """Draw speedup vs eager (hatched with error bars where noisy), first-step time (log scale) and peak
    memory per model and variant, to a PNG.

    Raises:
        BenchError: matplotlib is not installed (``pip install "sagemaker-tc[bench]"``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BenchError(f"the bench plot needs matplotlib: {INSTALL_BENCH}") from None
    rows = document["results"]
    models = list(dict.fromkeys(row["model"] for row in rows))
    variants = list(dict.fromkeys(row["variant"] for row in rows))
    panels = (
        ("speedup_vs_eager", "speedup vs eager (x, step time; hatched: noisy)", 1.0, False),
        ("first_step_s", "first step (s)", 1.0, True),
        ("peak_memory_bytes", f"peak memory (MiB, {memory_label(document)})", 1.0 / MIB, False),
    )
    figure, axes = plt.subplots(len(panels), 1, figsize=(max(8.0, 1.4 * len(models) + 3), 10), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for axis, (key, label, scale, log) in zip(axes[:, 0], panels, strict=True):
        drawn: list[float] = []
        for index, variant in enumerate(variants):
            cells = [next((r for r in rows if r["model"] == m and r["variant"] == variant), None) for m in models]
            values = [_value(cell, key) * scale for cell in cells]
            positions = [m + (index - (len(variants) - 1) / 2) * width for m in range(len(models))]
            bars = axis.bar(positions, values, width, label=variant)
            if key == "speedup_vs_eager":
                _mark_noise(axis, bars, positions, values, cells)
            drawn += values
        axis.set_ylabel(label)
        axis.set_xticks(range(len(models)))
        axis.set_xticklabels(models, rotation=15, fontsize=8)
        if key == "speedup_vs_eager":
            axis.axhline(1.0, color="grey", linewidth=0.8)
        if log and any(value > 0 for value in drawn):
            axis.set_yscale("log")
    axes[0, 0].legend(fontsize=8, ncols=len(variants), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    figure.suptitle(title(document), fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _value(row: dict[str, Any] | None, key: str) -> float:
    value = row.get(key) if row and row.get("status") == "ok" else None
    return float(value) if value is not None else 0.0


def _mark_noise(axis: Any, bars: Any, positions: list[float], values: list[float], cells: list) -> None:
    """Hatch the speedup bars of noisy rows and draw each bar's quartile range as an error bar."""
    low, high = [], []
    for bar, value, cell in zip(bars, values, cells, strict=True):
        if cell and cell.get("speedup_noisy"):
            bar.set_hatch("//")
            bar.set_alpha(0.5)
        span = (cell or {}).get("speedup_range") or [value, value]
        low.append(max(0.0, value - span[0]))
        high.append(max(0.0, span[1] - value))
    axis.errorbar(positions, values, yerr=[low, high], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: a reader never sees half a file, even if this process dies."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_document(document: dict[str, Any], out_dir: Path, name: str) -> dict[str, Path]:
    """Write ``<name>.json`` and ``<name>.md`` into ``out_dir`` (created if missing), each replaced whole.

    Returns:
        ``{"json": path, "markdown": path}``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json", "markdown": out_dir / f"{name}.md"}
    replace_file(paths["json"], json.dumps(document, indent=2) + "\n")
    replace_file(paths["markdown"], markdown(document))
    return paths


def write_plot(document: dict[str, Any], out_dir: Path, name: str) -> Path:
    """Draw ``<name>.png`` into ``out_dir`` (the last output: see the module docstring).

    Raises:
        BenchError: matplotlib is not installed.
    """
    return plot(document, out_dir / f"{name}.png")
