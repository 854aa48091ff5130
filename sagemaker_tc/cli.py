"""The ``sagemaker-tc`` command.

- ``sagemaker-tc launch SCRIPT [ARGS...]``: run a training script under the compiler launcher
  (what the injected ``sagemaker_tc_launcher.py`` does, with the script named on the command line).
- ``sagemaker-tc report PATH``: print a job's compiler report (``report.json``, a job's
  ``output.tar.gz``, or its output folder).
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

from sagemaker_tc.contract import COMPILER_OUTPUT_DIRNAME, REPORT_FILENAME


def read_report(path: Path) -> dict:
    """Load a compiler report from ``report.json``, an ``output.tar.gz`` or a folder that holds either.

    Raises:
        FileNotFoundError: no report at ``path``.
    """
    if path.is_dir():
        for candidate in (
            path / REPORT_FILENAME,
            path / COMPILER_OUTPUT_DIRNAME / REPORT_FILENAME,
            path / "output.tar.gz",
        ):
            if candidate.exists():
                return read_report(candidate)
        raise FileNotFoundError(f"no {REPORT_FILENAME} or output.tar.gz in {path}")
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            member = tar.extractfile(f"{COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}")
            if member is None:
                raise FileNotFoundError(f"{path} holds no {COMPILER_OUTPUT_DIRNAME}/{REPORT_FILENAME}")
            return json.load(member)
    return json.loads(path.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    parser = argparse.ArgumentParser(prog="sagemaker-tc", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    launch = commands.add_parser("launch", help="run a training script under the compiler launcher")
    launch.add_argument("script")
    launch.add_argument("args", nargs=argparse.REMAINDER)
    report = commands.add_parser("report", help="print a job's compiler report as JSON")
    report.add_argument("path", type=Path)
    options = parser.parse_args(argv)
    if options.command == "launch":
        from sagemaker_tc.container.launcher import run

        run(options.script, options.args)
        return 0
    try:
        data = read_report(options.path)
    except (FileNotFoundError, KeyError) as error:
        print(f"sagemaker-tc report: {error}", file=sys.stderr)
        return 1
    print(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
