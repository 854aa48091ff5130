"""The ``sagemaker-tc bench`` and ``sagemaker-tc verify`` subcommands (argument parsing and output).

``sagemaker_tc.cli`` registers them; nothing here imports torch at module level.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import IO

from sagemaker_tc.bench.errors import BenchError, NumericalMismatchError, VariantFailedError
from sagemaker_tc.paths import unwritable_reason

COMMANDS = ("bench", "verify")
DEFAULT_OUT = Path("sagemaker-tc-output") / "bench"


def split_names(values: list[str] | None) -> list[str] | None:
    """``--models a,b c`` -> ``[a, b, c]``."""
    if not values:
        return None
    return [name for value in values for name in value.split(",") if name]


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """Register ``bench`` and ``verify`` on the ``sagemaker-tc`` command's subparsers."""
    _add_bench_parser(commands)
    _add_verify_parser(commands)


def _add_bench_parser(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench",
        help="eager vs eager-tuned vs sagemaker-tc vs HF torch_compile, side by side",
        description="Train each suite model for --steps steps in four variants, each in its own process, and "
        "write a table (terminal), JSON, Markdown and PNG. See benchmarks/README.md for how to read the numbers.",
    )
    bench.add_argument(
        "--models", nargs="+", metavar="NAME", help="suite models (default: all), space or comma separated"
    )
    bench.add_argument("--size", default="tiny", help="tiny (default) or full")
    bench.add_argument(
        "--variants", nargs="+", metavar="NAME", help="default: eager eager-tuned sagemaker-tc hf-torch-compile"
    )
    bench.add_argument("--seq-len", type=int, help="tokens per sample (default: 64 tiny, 128 full)")
    bench.add_argument("--batch-size", type=int, help="samples per step (default: 8 tiny, 32 full)")
    bench.add_argument("--steps", type=int, default=20, help="timed steps per variant, first included (default 20)")
    bench.add_argument("--dtype", default="fp32", help="fp32 (default) or bf16 (autocast, fp32 weights)")
    bench.add_argument("--device", help="cpu or cuda (default: cuda if torch sees a GPU)")
    bench.add_argument(
        "--cache-dir",
        type=Path,
        help="keep TORCHINDUCTOR_CACHE_DIR under DIR/<model>/<variant> (a rerun measures a warm compile); "
        "default: a fresh empty cache per variant (cold compile)",
    )
    bench.add_argument(
        "--cpu-threads", type=int, help="OMP_NUM_THREADS for every variant (default: one fewer than the usable cores)"
    )
    bench.add_argument("--timeout", type=float, default=1800.0, help="seconds per variant (default 1800)")
    bench.add_argument(
        "--time-budget",
        type=float,
        help="seconds for the whole run, shared fairly between the models (each gets an equal share of the time "
        "left); a variant gets what is left of its model's share, then the model's later variants are skipped",
    )
    bench.add_argument(
        "--job-steps",
        type=int,
        default=10_000,
        help="the job length the sagemaker-tc variant's plan='auto' plans for (default 10000)",
    )
    bench.add_argument("--data", type=Path, help="SST-2 TSV file or folder (default: examples/sst2/data)")
    bench.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    bench.add_argument("--name", default="bench", help="output file stem: NAME.json, NAME.md, NAME.png")


def _add_verify_parser(commands: argparse._SubParsersAction) -> None:
    verify = commands.add_parser(
        "verify",
        help="check that compiled training matches eager (per-step losses, fp32, dropout off)",
        description="Train an eager and a sagemaker_tc.compile_model copy of the same model for --steps steps, once "
        "per compile plan, and fail (exit 1, NumericalMismatchError) when any step's losses differ by more than "
        "--rtol, relative, or a parameter by more than --param-atol after the last step.",
    )
    target = verify.add_mutually_exclusive_group(required=True)
    target.add_argument("--model", help="a suite model, e.g. gpt2 or bert-base-uncased")
    target.add_argument(
        "--script",
        metavar="PATH.py:FUNCTION",
        help="your own model: FUNCTION() returns (model, batch), (model, batch, loss_fn) or a dict "
        "{'model', 'batch'|'batches', 'loss_fn'}; loss_fn(model, batch) -> loss",
    )
    verify.add_argument("--size", default="tiny", help="suite model size: tiny (default) or full")
    verify.add_argument("--batch-size", type=int, default=4, help="suite model batch (default 4)")
    verify.add_argument("--seq-len", type=int, default=32, help="suite model tokens per sample (default 32)")
    verify.add_argument(
        "--device", default="cpu", help="device for a suite model (default cpu); a script chooses its own"
    )
    verify.add_argument("--steps", type=int, default=20, help="optimizer steps per side (default 20)")
    verify.add_argument("--rtol", type=float, default=1e-4, help="largest relative loss difference (default 1e-4)")
    verify.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (default 1e-4)")
    verify.add_argument("--seed", type=int, default=0)
    verify.add_argument("--mode", default="default", help="torch.compile mode for compile_model (default: default)")
    verify.add_argument(
        "--plan", default="all", choices=("regional", "model", "step", "all"), help="compile plan(s) (default all)"
    )
    verify.add_argument("--whole-model", action="store_true", help="the same as --plan model (kept for old scripts)")
    verify.add_argument(
        "--param-atol", type=float, default=1e-5, help="largest absolute parameter difference (default 1e-5)"
    )
    verify.add_argument("--json", type=Path, help="also write the result as JSON here")


def configure_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)


def check_out_folder(out: Path) -> None:
    """``--out`` is a folder the bench can write its JSON, Markdown and PNG to, checked before the first run.

    Raises:
        BenchError: a file on its path, or a folder that cannot be written (``/proc``, read-only).
    """
    reason = unwritable_reason(out)
    if reason is not None:
        raise BenchError(f"--out {str(out)!r} cannot be written: {reason}; give a folder you can write to")


def run_bench_command(options: argparse.Namespace, argv: list[str] | None, stream: IO[str] | None = None) -> int:
    """Run ``sagemaker-tc bench``: check options and optional packages, run, rewrite the JSON and
    Markdown after every finished variant, print the table, draw the PNG last.

    Returns:
        0 when every variant ran; 1 when some failed or were skipped for the time budget (their rows
        say why), or when the plot failed (the JSON and Markdown hold every row).

    Raises:
        BenchError: bad options, a missing optional package, or an ``--out`` folder that cannot be
            written (before any work).
    """
    from sagemaker_tc.bench.data import check_inputs
    from sagemaker_tc.bench.report import print_table, require_outputs, write_document, write_plot
    from sagemaker_tc.bench.runner import resolve_options, run_bench

    bench_options = resolve_options(
        models=split_names(options.models),
        size=options.size,
        variants=split_names(options.variants),
        batch_size=options.batch_size,
        seq_len=options.seq_len,
        steps=options.steps,
        dtype=options.dtype,
        device=options.device,
        cache_dir=options.cache_dir,
        cpu_threads=options.cpu_threads,
        timeout_s=options.timeout,
        time_budget_s=options.time_budget,
        data=options.data,
        job_steps=options.job_steps,
    )
    require_outputs()
    check_out_folder(options.out)
    check_inputs()
    configure_logging()
    command = "sagemaker-tc " + shlex.join(argv if argv is not None else sys.argv[1:])
    document = run_bench(
        bench_options, command=command, on_row=lambda partial: write_document(partial, options.out, options.name)
    )
    paths = write_document(document, options.out, options.name)
    out = stream or sys.stdout
    print_table(document, out)
    try:
        png = write_plot(document, options.out, options.name)
    except Exception as error:  # the plot comes last: its failure loses nothing else
        print(f"wrote {paths['json']}, {paths['markdown']}", file=out)
        print(
            f"sagemaker-tc bench: the plot failed ({type(error).__name__}: {error}); "
            f"{paths['json']} and {paths['markdown']} hold every row",
            file=sys.stderr,
        )
        return 1
    print(f"wrote {paths['json']}, {paths['markdown']}, {png}", file=out)
    failed = [f"{row['model']}/{row['variant']}" for row in document["results"] if row.get("status") != "ok"]
    return exit_code("bench", "variant", failed)


def exit_code(command: str, what: str, failed: list[str]) -> int:
    """0 when nothing ``failed``; else print one ``VariantFailedError`` line naming them (``what``:
    ``variant``, ``cell``) on stderr and return 1."""
    if not failed:
        return 0
    error = VariantFailedError(f"{len(failed)} {what}(s) failed or were skipped: {', '.join(failed)}")
    print(f"sagemaker-tc {command}: {type(error).__name__}: {error}", file=sys.stderr)
    return 1


def _print_verify(result, stream: IO[str]) -> None:
    print(f"verify {result.name}, plan {result.plan}: {result.steps} steps, rtol {result.rtol:g}", file=stream)
    print(f"{'step':>4}  {'eager loss':>14}  {'compiled loss':>14}  {'rel diff':>10}", file=stream)
    for step, (eager, compiled, diff) in enumerate(
        zip(result.eager_losses, result.compiled_losses, result.rel_diffs, strict=True)
    ):
        print(f"{step:>4}  {eager:>14.8f}  {compiled:>14.8f}  {diff:>10.3g}", file=stream)
    verdict = "PASS" if result.passed else "FAIL"
    print(
        f"{verdict}: max relative difference {result.max_rel_diff:.3g} at step {result.worst_step} "
        f"(rtol {result.rtol:g}), max parameter difference {result.max_param_diff:.3g} "
        f"(atol {result.param_atol:g}); {result.compiled_regions} compiled region(s), "
        f"compiled side {result.compiled_seconds:.1f} s incl. compile, eager {result.eager_seconds:.1f} s",
        file=stream,
    )


def run_verify_command(options: argparse.Namespace, stream: IO[str] | None = None) -> int:
    """Run ``sagemaker-tc verify``: print per-step losses and the verdict.

    Returns:
        0 when every step agrees within ``--rtol``.

    Raises:
        NumericalMismatchError: a step disagrees (after the losses are printed).
        BenchError: bad options or script.
    """
    from sagemaker_tc.bench.verify import PLANS, verify_config, verify_suite_model
    from sagemaker_tc.bench.verify_script import verify_script

    plans = ["model"] if options.whole_model else (list(PLANS) if options.plan == "all" else [options.plan])
    out = stream or sys.stdout
    results = []
    try:
        for plan in plans:
            common = {
                "steps": options.steps,
                "rtol": options.rtol,
                "param_atol": options.param_atol,
                "lr": options.lr,
                "seed": options.seed,
                "config": verify_config(mode=options.mode, plan=plan),
            }
            if options.model:
                result = verify_suite_model(
                    options.model,
                    options.size,
                    batch_size=options.batch_size,
                    seq_len=options.seq_len,
                    device=options.device,
                    **common,
                )
            else:
                result = verify_script(options.script, **common)
            _print_verify(result, out)
            results.append(result)
    except NumericalMismatchError as error:
        _print_verify(error.result, out)
        _write_verify_json(options.json, [*results, error.result])
        raise
    _write_verify_json(options.json, results)
    return 0


def _write_verify_json(path: Path | None, results: list) -> None:
    """One result as its dict (as before plans), several as ``{"results": [...]}``."""
    if path is None:
        return
    data = results[0].to_dict() if len(results) == 1 else {"results": [r.to_dict() for r in results]}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
