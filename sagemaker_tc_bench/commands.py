"""The ``sagemaker-tc bench``, ``verify`` and ``tune`` subcommands: their arguments, their runs and output.

``sagemaker_tc.cli`` registers the three subcommands and imports this module only when one of them
runs (:func:`add_arguments`, :func:`run`); nothing here imports torch at module level.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shlex
import sys
from pathlib import Path
from typing import IO

from sagemaker_tc.paths import unwritable_reason
from sagemaker_tc_bench.errors import BenchError, NumericalMismatchError, VariantFailedError

COMMANDS = ("bench", "verify", "tune")
OUTPUT_ROOT = Path("sagemaker-tc-output")


def split_names(values: list[str] | None, option: str = "--models") -> list[str] | None:
    """``--models a,b c`` -> ``[a, b, c]``; None when the option was not given.

    Raises:
        BenchError: the option was given but names nothing (``--models ''``, ``--variants ,``): an
            empty list is never taken for the default.
    """
    if values is None:
        return None
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    if not names:
        raise BenchError(
            f"{option} {' '.join(map(repr, values))} names nothing: give one or more names (space or comma "
            f"separated), or leave {option} out for the default"
        )
    return names


def file_stem(value: str) -> str:
    """``--name``: a file name stem written into ``--out``, never a path (argparse type).

    Raises:
        argparse.ArgumentTypeError: empty, a path (``/``, ``\\``), ``.``/``..``, or starting with
            ``.`` or ``-``, or holding a control character.
    """
    bad = (
        not value
        or any(separator in value for separator in "/\\")
        or value.startswith((".", "-"))
        or any(ord(char) < 32 for char in value)
    )
    if bad:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a file name: --name takes a stem such as 'gpu-check' (no '/', not starting with "
            "'.' or '-'), written into --out"
        )
    return value


def _number(low: float, *, inclusive: bool):
    """An argparse type: a finite float at least (``inclusive``) or above ``low``."""

    def parse(value: str) -> float:
        number = float(value)
        if not math.isfinite(number) or number < low or (number == low and not inclusive):
            bound = f">= {low:g}" if inclusive else f"> {low:g}"
            raise argparse.ArgumentTypeError(f"{value!r}: takes a finite number {bound}")
        return number

    parse.__name__ = "number"  # argparse's "invalid number value" on a non-number
    return parse


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Give the ``sagemaker-tc`` subparser of ``command`` (one of :data:`COMMANDS`) its description
    and arguments."""
    {"bench": _bench_arguments, "verify": _verify_arguments, "tune": _tune_arguments}[command](parser)


def run(command: str, options: argparse.Namespace, argv: list[str] | None, stream: IO[str] | None = None) -> int:
    """Run ``command`` with the parsed ``options``; ``argv`` is the command line (None: ``sys.argv``),
    recorded in the result files. Returns the exit code (see each command's function).

    Raises:
        BenchError, TuningError, NumericalMismatchError: as the command's function says.
    """
    if command == "verify":
        return run_verify_command(options, stream)
    line = "sagemaker-tc " + shlex.join(argv if argv is not None else sys.argv[1:])
    if command == "bench":
        return run_bench_command(options, line, stream)
    return run_tune_command(options, line, stream)


def _suite_arguments(parser: argparse.ArgumentParser, *, variants: bool = False) -> None:
    """The suite's models, size and inputs (``bench`` and ``tune``)."""
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="suite models (default: all but llama-3.2-1b), space or comma separated",
    )
    parser.add_argument("--size", default="tiny", help="tiny (default) or full")
    if variants:
        parser.add_argument(
            "--variants",
            nargs="+",
            metavar="NAME",
            help="default: eager eager-tuned sagemaker-tc hf-torch-compile; NAME@N runs NAME again as its own row",
        )
    parser.add_argument("--seq-len", type=int, help="tokens per sample (default: 64 tiny, 128 full)")


def _limit_arguments(parser: argparse.ArgumentParser, *, per: str, budget_help: str) -> None:
    """Threads, time limits and the data (``bench`` and ``tune``); ``per``: what one process runs."""
    parser.add_argument(
        "--cpu-threads", type=int, help="OMP_NUM_THREADS for every process (default: one fewer than the usable cores)"
    )
    seconds = _number(0, inclusive=False)
    parser.add_argument("--timeout", type=seconds, default=1800.0, help=f"seconds per {per} (default 1800)")
    parser.add_argument("--time-budget", type=seconds, help=budget_help)
    parser.add_argument("--data", type=Path, help="SST-2 TSV file or folder (default: examples/sst2/data)")


def _output_arguments(parser: argparse.ArgumentParser, *, command: str, name: str, files: str) -> None:
    out = OUTPUT_ROOT / command
    parser.add_argument("--out", type=Path, default=out, help=f"output folder (default {out})")
    parser.add_argument("--name", type=file_stem, default=name, help=f"output file stem: {files}")


def _bench_arguments(bench: argparse.ArgumentParser) -> None:
    bench.description = (
        "Train each suite model for --steps steps in four variants, each in its own process, and write a table "
        "(terminal), JSON, Markdown and PNG. See benchmarks/README.md for how to read the numbers."
    )
    _suite_arguments(bench, variants=True)
    bench.add_argument("--batch-size", type=int, help="samples per step (default: 8 tiny, 32 full)")
    bench.add_argument("--steps", type=int, default=60, help="timed steps per variant, first included (default 60)")
    bench.add_argument("--dtype", default="fp32", help="fp32 (default) or bf16 (autocast, fp32 weights)")
    bench.add_argument("--device", help="cpu or cuda (default: cuda if torch sees a GPU)")
    bench.add_argument(
        "--cache-dir",
        type=Path,
        help="keep TORCHINDUCTOR_CACHE_DIR under DIR/<model>/<variant> (a rerun measures a warm compile); "
        "default: a fresh empty cache per variant (cold compile)",
    )
    _limit_arguments(
        bench,
        per="variant",
        budget_help="seconds for the whole run, shared fairly between the models (each gets an equal share of the "
        "time left); a variant gets what is left of its model's share, then the model's later variants are skipped",
    )
    bench.add_argument(
        "--job-steps",
        type=int,
        default=10_000,
        help="the job length the sagemaker-tc variant's plan='auto' plans for (default 10000)",
    )
    _output_arguments(bench, command="bench", name="bench", files="NAME.json, NAME.md, NAME.png")


def _verify_arguments(verify: argparse.ArgumentParser) -> None:
    verify.description = (
        "Train an eager and a sagemaker_tc.compile_model copy of the same model for --steps steps, once per compile "
        "plan, and fail (exit 1, NumericalMismatchError) when any step's losses differ by more than --rtol, "
        "relative, or a parameter by more than --param-atol after the last step."
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
    verify.add_argument(
        "--rtol", type=_number(0, inclusive=True), default=1e-4, help="largest relative loss difference (default 1e-4)"
    )
    verify.add_argument(
        "--lr", type=_number(0, inclusive=False), default=1e-4, help="AdamW learning rate (default 1e-4)"
    )
    verify.add_argument("--seed", type=int, default=0)
    verify.add_argument("--mode", default="default", help="torch.compile mode for compile_model (default: default)")
    verify.add_argument(
        "--plan", default="all", choices=("regional", "model", "step", "all"), help="compile plan(s) (default all)"
    )
    verify.add_argument(
        "--param-atol",
        type=_number(0, inclusive=True),
        default=1e-5,
        help="largest absolute parameter difference (default 1e-5)",
    )
    verify.add_argument("--json", type=Path, help="also write the result as JSON here")


def _tune_arguments(tune: argparse.ArgumentParser) -> None:
    tune.description = (
        "For each suite model, find the largest per-device batch that trains within the memory budget, eagerly and "
        "compiled (each in its own process), measure samples/s at that batch, and write NAME.json and NAME.md."
    )
    _suite_arguments(tune)
    tune.add_argument("--dtype", default="fp32", help="fp32 (default) or bf16 (autocast)")
    tune.add_argument("--device", help="cpu or cuda (default: cuda if torch sees a GPU)")
    tune.add_argument(
        "--memory-budget-gib",
        type=_number(0, inclusive=False),
        help="peak memory allowed per try, GiB (default: 90%% of the GPU; on CPU half the available memory)",
    )
    tune.add_argument("--max-batch-size", type=int, default=1024, help="largest batch tried (default 1024)")
    tune.add_argument("--multiple-of", type=int, default=1, help="only try multiples of this (e.g. 8 on GPUs)")
    tune.add_argument("--start", type=int, default=1, help="first batch tried; doubles from there (default 1)")
    tune.add_argument("--modes", nargs="+", metavar="MODE", help="eager and/or compiled (default both)")
    tune.add_argument("--steps", type=int, default=8, help="timed steps at the found batch (default 8)")
    _limit_arguments(tune, per="model and mode", budget_help="seconds for the whole run; later cells are skipped")
    _output_arguments(tune, command="tune", name="tested-models", files="NAME.json, NAME.md")


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


def check_json_file(path: Path) -> None:
    """``--json``: a file that can be written, checked before any work (so a result is never lost).

    Raises:
        BenchError: a folder, something other than a regular file, or a file whose folder cannot be
            written (``/proc``, read-only, a file on its path).
    """
    if path.exists() and not path.is_file():
        raise BenchError(f"--json {str(path)!r} is not a regular file; give the path of a JSON file to write")
    reason = unwritable_reason(path.absolute().parent)
    if reason is not None:
        raise BenchError(f"--json {str(path)!r} cannot be written: {reason}; give a file in a folder you can write to")


def _before_work(out: Path) -> None:
    """What ``bench`` and ``tune`` check after their options and before any work: ``--out`` can be
    written and the inputs' packages are there; then logging goes to stderr."""
    from sagemaker_tc_bench.data import check_inputs

    check_out_folder(out)
    check_inputs()
    configure_logging()


def run_bench_command(options: argparse.Namespace, command: str, stream: IO[str] | None = None) -> int:
    """Run ``sagemaker-tc bench``: check options and optional packages, run, rewrite the JSON and
    Markdown after every finished variant, print the table, draw the PNG last. ``command``: the
    command line, recorded in the files.

    Returns:
        0 when every variant ran; 1 when some failed or were skipped for the time budget (their rows
        say why), or when the plot failed (the JSON and Markdown hold every row).

    Raises:
        BenchError: bad options, a missing optional package, or an ``--out`` folder that cannot be
            written (before any work).
    """
    from sagemaker_tc_bench.report import print_table, require_outputs, write_document, write_plot
    from sagemaker_tc_bench.runner import resolve_options, run_bench

    bench_options = resolve_options(
        models=split_names(options.models),
        size=options.size,
        variants=split_names(options.variants, "--variants"),
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
    _before_work(options.out)
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


def run_tune_command(options: argparse.Namespace, command: str, stream: IO[str] | None = None) -> int:
    """Run ``sagemaker-tc tune``: check options, run every cell, print one line per model, write
    the files. ``command``: the command line, recorded in the files.

    Returns:
        0 when every cell ran; 1 when some failed or were skipped (the files are still written, and
        rewritten after every finished cell, so an interrupted run keeps what it measured).

    Raises:
        BenchError, TuningError: bad options or a missing optional package (before any work).
    """
    from sagemaker_tc_bench.tune_table import resolve_table_options, run_table, summary_lines, write_outputs

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
        modes=split_names(options.modes, "--modes"),
        cpu_threads=options.cpu_threads,
        timeout_s=options.timeout,
        time_budget_s=options.time_budget,
        data=options.data,
    )
    _before_work(options.out)
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
        BenchError: bad options or script, or a ``--json`` file that cannot be written (before any work).
    """
    from sagemaker_tc_bench.verify import PLANS, verify_config, verify_suite_model
    from sagemaker_tc_bench.verify_script import verify_script

    if options.json is not None:
        check_json_file(options.json)
    plans = list(PLANS) if options.plan == "all" else [options.plan]
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
            if options.model is not None:  # --model '' is an unknown model, not --script
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
