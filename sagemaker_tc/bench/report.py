"""Bench outputs: the terminal table (rich), the JSON document, a Markdown table and a PNG plot.

rich and matplotlib come with the ``bench`` extra and are imported only when used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from sagemaker_tc.bench.errors import BenchError

COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "model"),
    ("variant", "variant"),
    ("samples_per_s", "samples/s"),
    ("step_ms", "step ms"),
    ("first_step_s", "first step s"),
    ("peak_memory_bytes", "peak mem MiB"),
    ("recompiles", "recompiles"),
    ("mfu", "MFU"),
    ("speedup_vs_eager", "speedup vs eager"),
)
"""(result field, column title) of every table column, in order."""
MIB = 1024 * 1024


def _cell(key: str, row: dict[str, Any]) -> str:
    if row.get("status") != "ok" and key not in ("model", "variant"):
        return str(row.get("status", "failed")) if key == "samples_per_s" else "-"
    value = row.get(key)
    if value is None:
        return "-"
    if key == "samples_per_s":
        return f"{value:,.1f}"
    if key == "step_ms":
        return f"{value:,.2f}"
    if key == "first_step_s":
        return f"{value:,.2f}"
    if key == "peak_memory_bytes":
        return f"{value / MIB:,.0f}"
    if key == "mfu":
        return f"{100 * value:.1f}%"
    if key == "speedup_vs_eager":
        return f"{value:.2f}x"
    return str(value)


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
        from rich.table import Table
    except ImportError:
        raise BenchError('the bench table needs rich: pip install "sagemaker-tc[bench]"') from None
    table = Table(title=title(document), caption=f"peak mem: {memory_label(document)}")
    for key, heading in COLUMNS:
        table.add_column(heading, justify="left" if key in ("model", "variant") else "right")
    previous_model = None
    for row in document["results"]:
        if previous_model is not None and row["model"] != previous_model:
            table.add_section()
        previous_model = row["model"]
        table.add_row(*(_cell(key, row) for key, _ in COLUMNS))
    Console(file=stream, width=160).print(table)
    for row in document["results"]:
        if row.get("status") != "ok":
            Console(file=stream, width=160).print(f"[red]{row['model']} / {row['variant']}: {row.get('error')}[/red]")


def markdown(document: dict[str, Any]) -> str:
    """The results as a Markdown document: title, table, and the machine/versions it ran on."""
    lines = [f"# {title(document)}", ""]
    lines.append("| " + " | ".join(heading for _, heading in COLUMNS) + " |")
    lines.append("| " + " | ".join("---" if k in ("model", "variant") else "---:" for k, _ in COLUMNS) + " |")
    for row in document["results"]:
        lines.append("| " + " | ".join(_cell(key, row) for key, _ in COLUMNS) + " |")
    env = document["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    loads = [load for row in document["results"] for load in row.get("load_avg_1m") or []]
    load_note = ""
    if loads:
        load_note = (
            f"- Host 1-minute load average around the timed steps: {min(loads):.1f} to {max(loads):.1f} "
            f"on {env['cpu_cores']} usable cores (above the core count, other work competed for the CPU)."
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
    failed = [row for row in document["results"] if row.get("status") != "ok"]
    for row in failed:
        lines.append(f"- **{row['model']} / {row['variant']} {row.get('status')}**: {row.get('error')}")
    return "\n".join(lines) + "\n"


def plot(document: dict[str, Any], path: Path) -> Path:
    """Draw speedup vs eager, first-step time (log scale) and peak memory per model and variant, to a PNG.

    Raises:
        BenchError: matplotlib is not installed (``pip install "sagemaker-tc[bench]"``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BenchError('the bench plot needs matplotlib: pip install "sagemaker-tc[bench]"') from None
    rows = document["results"]
    models = list(dict.fromkeys(row["model"] for row in rows))
    variants = list(dict.fromkeys(row["variant"] for row in rows))
    panels = (
        ("speedup_vs_eager", "speedup vs eager (x, step time)", 1.0, False),
        ("first_step_s", "first step (s)", 1.0, True),
        ("peak_memory_bytes", f"peak memory (MiB, {memory_label(document)})", 1.0 / MIB, False),
    )
    figure, axes = plt.subplots(len(panels), 1, figsize=(max(8.0, 1.4 * len(models) + 3), 10), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for axis, (key, label, scale, log) in zip(axes[:, 0], panels, strict=True):
        drawn: list[float] = []
        for index, variant in enumerate(variants):
            values = []
            for model in models:
                row = next((r for r in rows if r["model"] == model and r["variant"] == variant), None)
                value = row.get(key) if row and row.get("status") == "ok" else None
                values.append(value * scale if value is not None else 0.0)
            positions = [m + (index - (len(variants) - 1) / 2) * width for m in range(len(models))]
            axis.bar(positions, values, width, label=variant)
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


def write_outputs(document: dict[str, Any], out_dir: Path, name: str) -> dict[str, Path]:
    """Write ``<name>.json``, ``<name>.md`` and ``<name>.png`` into ``out_dir`` (created if missing).

    Returns:
        ``{"json": path, "markdown": path, "png": path}``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json", "markdown": out_dir / f"{name}.md", "png": out_dir / f"{name}.png"}
    paths["json"].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    paths["markdown"].write_text(markdown(document), encoding="utf-8")
    plot(document, paths["png"])
    return paths
