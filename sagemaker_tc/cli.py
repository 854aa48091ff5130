"""The ``sagemaker-tc`` command.

- ``sagemaker-tc launch SCRIPT [ARGS...]``: run a training script under the compiler launcher
  (what the injected ``sagemaker_tc_launcher.py`` does, with the script named on the command line).
- ``sagemaker-tc report PATH``: print a job's compiler report (``report.json``, a job's
  ``output.tar.gz``, or a folder that holds either).
- ``sagemaker-tc bench``: eager, eager-tuned, sagemaker-tc and HF ``torch_compile`` training of the
  model suite side by side (:mod:`sagemaker_tc.bench`).
- ``sagemaker-tc verify``: check that compiled training gives eager's per-step losses.
- ``sagemaker-tc tune``: the largest batch that trains, eager vs compiled, and samples/s at each
  (the tested-models table, :mod:`sagemaker_tc.bench.tune_table`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

from sagemaker_tc.bench import commands as bench_commands
from sagemaker_tc.bench import tune_commands
from sagemaker_tc.contract import COMPILER_OUTPUT_DIRNAME, REPORT_FILENAME
from sagemaker_tc.errors import SagemakerTCError


class ReportNotFoundError(SagemakerTCError, FileNotFoundError):
    """No compiler report at the given path (or the file there is not one)."""


# Where a report can be, relative to a folder the user names: the report's own folder, a job's
# output/data folder, a local_process job's artifacts folder, the job folder itself.
_REPORT_PLACES = (
    REPORT_FILENAME,
    f"{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}",
    "output.tar.gz",
    "output/output.tar.gz",
)


def read_report(path: Path) -> dict:
    """Load a compiler report from ``report.json``, an ``output.tar.gz``, or a folder that holds
    either (a job's ``output/data`` folder, a ``local_process`` job's folder or its ``output/``).

    Raises:
        ReportNotFoundError: nothing at ``path`` is a compiler report (the job may have run without
            the compiler).
    """
    if path.is_dir():
        for place in _REPORT_PLACES:
            if (path / place).exists():
                return read_report(path / place)
        raise ReportNotFoundError(f"no {REPORT_FILENAME} or output.tar.gz in {path}")
    if not path.is_file():
        raise ReportNotFoundError(f"{path} does not exist")
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            try:
                handle = tar.extractfile(f"{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}")
            except KeyError:
                handle = None
            if handle is None:
                raise ReportNotFoundError(
                    f"{path} holds no {COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}: the job ran without the compiler"
                )
            text = handle.read().decode("utf-8", errors="replace")
    else:
        text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or "compiled" not in data:
        raise ReportNotFoundError(f"{path} is not a sagemaker-tc compiler report")
    return data


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code (1 with a one-line message for sagemaker-tc's own errors)."""
    parser = argparse.ArgumentParser(prog="sagemaker-tc", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    launch = commands.add_parser("launch", help="run a training script under the compiler launcher")
    launch.add_argument("script")
    launch.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    report = commands.add_parser("report", help="print a job's compiler report as JSON")
    report.add_argument("path", type=Path)
    bench_commands.add_parsers(commands)
    tune_commands.add_parser(commands)
    options = parser.parse_args(argv)
    try:
        if options.command == "bench":
            return bench_commands.run_bench_command(options, argv)
        if options.command == "verify":
            return bench_commands.run_verify_command(options)
        if options.command == "tune":
            return tune_commands.run_tune_command(options, argv)
        if options.command == "launch":
            from sagemaker_tc.container.launcher import run

            run(options.script, options.args)
            return 0
        data = read_report(options.path)
    except SagemakerTCError as error:
        print(f"sagemaker-tc {options.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
