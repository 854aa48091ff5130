"""The ``sagemaker-tc`` command.

- ``sagemaker-tc launch SCRIPT [ARGS...]``: run a training script under the compiler launcher
  (what the injected ``sagemaker_tc_launcher.py`` does, with the script named on the command line).
- ``sagemaker-tc report PATH``: print a job's compiler report (``report.json``, a job's
  ``output.tar.gz``, or a folder that holds either).
- ``sagemaker-tc bench``: eager, eager-tuned, sagemaker-tc and HF ``torch_compile`` training of the
  model suite side by side.
- ``sagemaker-tc verify``: check that compiled training gives eager's per-step losses.
- ``sagemaker-tc tune``: the largest batch that trains, eager vs compiled, and samples/s at each
  (the tested-models table).
- ``sagemaker-tc --version``: the installed version.

The last three are workstation tools in their own package, :mod:`sagemaker_tc_bench`, imported only
when one of them runs (a job never ships or imports it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import zlib
from pathlib import Path

from sagemaker_tc import __version__
from sagemaker_tc.contract import COMPILER_OUTPUT_DIRNAME, REPORT_FILENAME
from sagemaker_tc.errors import BenchNotInstalledError, ReportNotFoundError, SagemakerTCError

# Where a report can be, relative to a folder the user names: the report's own folder, a job's
# output/data folder, a local_process job's artifacts folder, the job folder itself.
_REPORT_PLACES = (
    REPORT_FILENAME,
    f"{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}",
    f"data/{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}",  # the job's /opt/ml/output
    f"output/data/{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}",  # the job's /opt/ml
    f"opt_ml/output/data/{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}",  # a local_process host's folder (algo-1)
    "output.tar.gz",
    "output/output.tar.gz",
)
_MEMBER = f"{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}"
_GZIP_MAGIC = b"\x1f\x8b"  # output.tar.gz: opened as an archive even when cut short
# Exit code of ``sagemaker-tc report`` when PATH holds no report (2, as for a bad command line).
REPORT_NOT_FOUND_EXIT = 2
BENCH_PACKAGE = "sagemaker_tc_bench"
# The subcommands of the bench package, with their one-line help (``sagemaker-tc --help`` lists them
# without importing it).
BENCH_COMMANDS = {
    "bench": "eager vs eager-tuned vs sagemaker-tc vs HF torch_compile, side by side",
    "verify": "check that compiled training matches eager (per-step losses, fp32, dropout off)",
    "tune": "largest batch that trains, eager vs compiled, and samples/s at each (the tested-models table)",
}


def read_report(path: str | Path) -> dict:
    """Load a compiler report from ``report.json``, an ``output.tar.gz``, or a folder that holds
    either (a job's ``/opt/ml``, ``output`` or ``output/data`` folder, a ``local_process`` job's
    folder, its ``output/``, a host's folder such as ``algo-1`` or its ``opt_ml/``).

    Raises:
        ReportNotFoundError: nothing at ``path`` is a compiler report: it is an ``s3://`` URI (only
            this machine's files are read), does not exist, is not a regular file, is empty, is a
            damaged or truncated archive, holds no report (a ``model.tar.gz``, a job run without the
            compiler), or is JSON that is not a report.
    """
    if str(path).startswith("s3://"):
        raise ReportNotFoundError(
            f"{path} is an S3 URI: the report command reads this machine's files; download the job's "
            "output.tar.gz first (aws s3 cp <output_path>/<job name>/output/output.tar.gz .) and give its path"
        )
    path = Path(path)
    if path.is_dir():
        for place in _REPORT_PLACES:
            if (path / place).exists():
                return read_report(path / place)
        raise ReportNotFoundError(f"no {REPORT_FILENAME} or output.tar.gz in {path}")
    if not path.exists():
        raise ReportNotFoundError(f"{path} does not exist")
    if not path.is_file():
        raise ReportNotFoundError(f"{path} is not a regular file (give report.json, output.tar.gz or a job folder)")
    try:
        text = _report_text(path)
    except ReportNotFoundError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:  # a gzip/tar cut short or corrupted
        raise ReportNotFoundError(
            f"{path} is a damaged or truncated archive ({type(error).__name__}: {error})"
        ) from None
    if not text.strip():
        raise ReportNotFoundError(f"{path} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    except (RecursionError, ValueError) as error:  # nested past Python's recursion limit, a 5,000-digit number
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error).split(";")[0]
        raise ReportNotFoundError(
            f"{path} is not a sagemaker-tc compiler report: its JSON cannot be read ({reason})"
        ) from None
    if not _is_report(data):
        raise ReportNotFoundError(
            f"{path} is not a sagemaker-tc compiler report (a JSON object with 'compiled' true/false and 'steps')"
        )
    return data


def _report_text(path: Path) -> str:
    """The report's text: the file itself, or the report member of an archive."""
    with open(path, "rb") as handle:
        gzipped = handle.read(2) == _GZIP_MAGIC
    if not gzipped and not tarfile.is_tarfile(path):
        return path.read_text(encoding="utf-8", errors="replace")
    with tarfile.open(path) as tar:
        names = tar.getnames()
        if _MEMBER not in names:
            if path.name == "model.tar.gz":
                raise ReportNotFoundError(
                    f"{path} is a job's model archive, which holds the model: the report is in output.tar.gz next to it"
                )
            raise ReportNotFoundError(
                f"{path} holds no {_MEMBER}: the job ran without the compiler, or this is not a job's output.tar.gz"
            )
        member = tar.getmember(_MEMBER)
        handle = tar.extractfile(member) if member.isfile() else None
        if handle is None:  # a link (possibly to nothing in the archive), a folder, a device: never followed
            raise ReportNotFoundError(f"{path}: {_MEMBER} is not a regular file (a job writes it as one)")
        return handle.read().decode("utf-8", errors="replace")


def _is_report(data: object) -> bool:
    """Every report has ``compiled`` (a bool) and ``steps`` (a count) (``sagemaker_tc.compiler.report``)."""
    if not isinstance(data, dict):
        return False
    steps = data.get("steps")
    return isinstance(data.get("compiled"), bool) and isinstance(steps, int) and not isinstance(steps, bool)


def bench_commands():
    """The bench package's commands module (``sagemaker_tc_bench.commands``), imported on first use.

    Raises:
        BenchNotInstalledError: the ``sagemaker_tc_bench`` package is not installed next to ``sagemaker_tc``.
    """
    try:
        from sagemaker_tc_bench import commands
    except ModuleNotFoundError as error:
        if error.name != BENCH_PACKAGE:
            raise
        raise BenchNotInstalledError(
            f"the bench, verify and tune commands live in the {BENCH_PACKAGE} package, which is not installed: "
            'pip install "sagemaker-tc[bench]"'
        ) from None
    return commands


def _error_exit(command: str, error: SagemakerTCError) -> int:
    """Print ``error`` as one line on stderr; the exit code (2 for ``ReportNotFoundError``, else 1)."""
    print(f"sagemaker-tc {command}: {type(error).__name__}: {error}", file=sys.stderr)
    return REPORT_NOT_FOUND_EXIT if isinstance(error, ReportNotFoundError) else 1


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code: 1 with a one-line message for sagemaker-tc's own errors
    (``BenchNotInstalledError`` for ``bench``, ``verify`` or ``tune`` without the bench package), 2 when
    ``report`` finds no report at PATH (``ReportNotFoundError``)."""
    words = sys.argv[1:] if argv is None else argv
    chosen = words[0] if words and words[0] in BENCH_COMMANDS else None
    try:
        bench = bench_commands() if chosen else None
    except BenchNotInstalledError as error:
        return _error_exit(chosen, error)
    parser = argparse.ArgumentParser(prog="sagemaker-tc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"sagemaker-tc {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    launch = commands.add_parser("launch", help="run a training script under the compiler launcher")
    launch.add_argument("script", help="the training script to run, e.g. train.py")
    script_args = launch.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script (optional)")
    script_args.required = False  # argparse counts a REMAINDER positional as required when naming what is missing
    report = commands.add_parser("report", help="print a job's compiler report as JSON")
    report.add_argument(
        "path", help="report.json, a job's output.tar.gz, or a folder holding either (a job folder, its /opt/ml)"
    )
    for name, summary in BENCH_COMMANDS.items():
        subparser = commands.add_parser(name, help=summary)
        if name == chosen:  # only the command that runs gets its arguments from the bench package
            bench.add_arguments(name, subparser)
    options = parser.parse_args(argv)
    try:
        if options.command in BENCH_COMMANDS:
            return bench.run(options.command, options, argv)
        if options.command == "launch":
            from sagemaker_tc.container.launcher import run

            run(options.script, options.args, program=argv is None)  # the process's program when run as a command
            return 0
        data = read_report(options.path)
    except SagemakerTCError as error:
        return _error_exit(options.command, error)
    print(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
