"""Cold vs warm compile cache: set two bench result files side by side.

``python -m sagemaker_tc_bench.compare COLD.json WARM.json --out DIR --name NAME`` writes
``NAME.json``, ``NAME.md`` and ``NAME.png`` (first-step time per model and variant, cold next to
warm) and prints the Markdown table. COLD.json is a ``sagemaker-tc bench --cache-dir DIR`` run on an
empty DIR; WARM.json the same command run again with the same DIR.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sagemaker_tc_bench.report import dash_or

KEYS = ("first_step_s", "step_ms", "recompiles")


def compare_passes(cold: dict[str, Any], warm: dict[str, Any]) -> dict[str, Any]:
    """Pair the rows of two bench documents by (model, variant).

    Returns:
        ``{"cold_created", "warm_created", "rows"}``; each row has ``model``, ``variant``, the cold and
        warm ``cache`` labels and statuses, ``cold_<key>`` and ``warm_<key>`` for ``first_step_s``
        (s), ``step_ms`` (ms) and ``recompiles``, and ``first_step_warm_over_cold`` (warm first step /
        cold first step; None when either is missing). Rows only in the cold run keep warm values None.
    """
    warm_rows = {(row["model"], row["variant"]): row for row in warm["results"]}
    rows = []
    for cold_row in cold["results"]:
        warm_row = warm_rows.get((cold_row["model"], cold_row["variant"]), {})
        row: dict[str, Any] = {
            "model": cold_row["model"],
            "variant": cold_row["variant"],
            "cold_cache": cold_row.get("cache"),
            "warm_cache": warm_row.get("cache"),
            "cold_status": cold_row.get("status"),
            "warm_status": warm_row.get("status"),
        }
        for key in KEYS:
            row[f"cold_{key}"] = cold_row.get(key) if cold_row.get("status") == "ok" else None
            row[f"warm_{key}"] = warm_row.get(key) if warm_row.get("status") == "ok" else None
        cold_first, warm_first = row["cold_first_step_s"], row["warm_first_step_s"]
        row["first_step_warm_over_cold"] = warm_first / cold_first if cold_first and warm_first else None
        rows.append(row)
    return {"cold_created": cold.get("created"), "warm_created": warm.get("created"), "rows": rows}


def markdown(comparison: dict[str, Any]) -> str:
    """The comparison as a Markdown table."""
    lines = [
        "# First step with a cold vs a warm compile cache",
        "",
        "| model | variant | first step s (cold) | first step s (warm) | warm / cold | step ms (cold) "
        "| step ms (warm) | recompiles (cold / warm) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in comparison["rows"]:
        recompiles = f"{dash_or(row['cold_recompiles'], 'd')} / {dash_or(row['warm_recompiles'], 'd')}"
        lines.append(
            f"| {row['model']} | {row['variant']} | {dash_or(row['cold_first_step_s'], '.2f')} "
            f"| {dash_or(row['warm_first_step_s'], '.2f')} | {dash_or(row['first_step_warm_over_cold'], '.2f')} "
            f"| {dash_or(row['cold_step_ms'], '.2f')} | {dash_or(row['warm_step_ms'], '.2f')} | {recompiles} |"
        )
    return "\n".join(lines) + "\n"


def plot(comparison: dict[str, Any], path: Path) -> Path:
    """Bar chart of first-step seconds, cold next to warm, per (model, variant); log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = comparison["rows"]
    labels = [f"{row['model']}\n{row['variant']}" for row in rows]
    figure, axis = plt.subplots(figsize=(max(8.0, 0.9 * len(rows) + 2), 5))
    positions = range(len(rows))
    axis.bar([p - 0.2 for p in positions], [row["cold_first_step_s"] or 0.0 for row in rows], 0.4, label="cold")
    axis.bar([p + 0.2 for p in positions], [row["warm_first_step_s"] or 0.0 for row in rows], 0.4, label="warm")
    axis.set_xticks(list(positions))
    axis.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    if any(row["cold_first_step_s"] or row["warm_first_step_s"] for row in rows):
        axis.set_yscale("log")
    axis.set_ylabel("first training step (s)")
    axis.legend()
    axis.set_title("First step: cold vs warm TORCHINDUCTOR_CACHE_DIR", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m sagemaker_tc_bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("cold", type=Path)
    parser.add_argument("warm", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--name", default="cache-comparison")
    options = parser.parse_args(argv)
    comparison = compare_passes(json.loads(options.cold.read_text()), json.loads(options.warm.read_text()))
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / f"{options.name}.json").write_text(json.dumps(comparison, indent=2) + "\n", encoding="utf-8")
    text = markdown(comparison)
    (options.out / f"{options.name}.md").write_text(text, encoding="utf-8")
    plot(comparison, options.out / f"{options.name}.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
