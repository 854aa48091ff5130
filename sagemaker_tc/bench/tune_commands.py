"""The ``sagemaker-tc tune`` subcommand: the tested-models table (max batch eager vs compiled and
samples/s at each) for suite models. Nothing here imports torch at module level."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import IO

from sagemaker_tc.bench.commands import check_out_folder, configure_logging, exit_code, split_names

DEFAULT_OUT = Path("sagemaker-tc-output") / "tune"


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``tune`` on the ``sagemaker-tc`` command's subparsers."""
    tune = commands.add_parser(
        "tune",
        help="largest batch that trains, eager vs compiled, and samples/s at each (the tested-models table)",
        description="For each suite model, find the largest per-device batch that trains within the memory budget, "
        "eagerly and compiled (each in its own process), measure samples/s at that batch, and write NAME.json and "
        "NAME.md.",
    )
    tune.add_argument(
        "--models", nargs="+", metavar="NAME", help="suite models (default: all), space or comma separated"
    )
    tune.add_argument("--size", default="tiny", help="tiny (default) or full")
    tune.add_argument("--seq-len", type=int, help="tokens per sample (default: 64 tiny, 128 full)")
    tune.add_argument("--dtype", default="fp32", help="fp32 (default) or bf16 (autocast)")
    tune.add_argument("--device", help="cpu or cuda (default: cuda if torch sees a GPU)")
    tune.add_argument(
        "--memory-budget-gib",
        type=float,
        help="peak memory allowed per try, GiB (default: 90%% of the GPU; on CPU half the available memory)",
    )
    tune.add_argument("--max-batch-size", type=int, default=1024, help="largest batch tried (default 1024)")
    tune.add_argument("--multiple-of", type=int, default=1, help="only try multiples of this (e.g. 8 on GPUs)")
    tune.add_argument("--start", type=int, default=1, help="first batch tried; doubles from there (default 1)")
    tune.add_argument("--modes", nargs="+", metavar="MODE", help="eager and/or compiled (default both)")
    tune.add_argument("--steps", type=int, default=8, help="timed steps at the found batch (default 8)")
    tune.add_argument(
        "--cpu-threads", type=int, help="OMP_NUM_THREADS for every process (default: one fewer than the usable cores)"
    )
    tune.add_argument("--timeout", type=float, default=1800.0, help="seconds per model and mode (default 1800)")
    tune.add_argument("--time-budget", type=float, help="seconds for the whole run; later cells are skipped")
    tune.add_argument("--data", type=Path, help="SST-2 TSV file or folder (default: examples/sst2/data)")
    tune.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    tune.add_argument("--name", default="tested-models", help="output file stem: NAME.json, NAME.md")


def run_tune_command(options: argparse.Namespace, argv: list[str] | None, stream: IO[str] | None = None) -> int:
    """Run ``sagemaker-tc tune``: check options, run every cell, print one line per model, write
    the files.

    Returns:
        0 when every cell ran; 1 when some failed or were skipped (the files are still written, and
        rewritten after every finished cell, so an interrupted run keeps what it measured).

    Raises:
        BenchError, TuningError: bad options or a missing optional package (before any work).
    """
    from sagemaker_tc.bench.data import check_inputs
    from sagemaker_tc.bench.tune_table import resolve_table_options, run_table, summary_lines, write_outputs

    table_options = resolve_table_options(
        models=split_names(options.models),
        size=options.size,
        seq_len=options.seq_len,
        dtype=options.dtype,
        device=options.device,
        steps=options.steps,
        budget_gib=options.memory_budget_gib,
        max_batch=options.max_batch_size,
        multiple_of=options.multiple_of,
        start=options.start,
        modes=split_names(options.modes),
        cpu_threads=options.cpu_threads,
        timeout_s=options.timeout,
        time_budget_s=options.time_budget,
        data=options.data,
    )
    check_out_folder(options.out)
    check_inputs()
    configure_logging()
    command = "sagemaker-tc " + shlex.join(argv if argv is not None else sys.argv[1:])
    document = run_table(
        table_options, command=command, on_cell=lambda partial: write_outputs(partial, options.out, options.name)
    )
    out = stream or sys.stdout
    for line in summary_lines(document):
        print(line, file=out)
    paths = write_outputs(document, options.out, options.name)
    print(f"wrote {paths['json']}, {paths['markdown']}", file=out)
    failed = [
        f"{row['model']}/{mode}"
        for row in document["rows"]
        for mode in document["options"]["modes"]
        if row.get(mode, {}).get("status") != "ok"
    ]
    return exit_code("tune", "cell", failed)
