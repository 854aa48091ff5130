"""Run the job-side tests on one stack of the support matrix, in a virtual environment of its own.

    python3 tests/stack_lane.py NAME [--write-results]

``NAME`` is a stack of ``sagemaker_tc/sdk/support_matrix.json`` (its ``name``). The lane's environment,
``.venv-stack-NAME``, holds the stack's torch, transformers, accelerate and peft pins with this project
installed editable (``[runtime,bench,v3]`` extras) and pytest; it is made once and made again when the
pins or ``pyproject.toml`` change. Any torch but the dev stack's comes from PyPI as a CUDA build of
several GB (it runs on the CPU), downloaded again for a new environment. The environment uses this
machine's Python, whatever the stack's image carries (the closing note of a lane says which).

The lane runs :data:`LANE_TESTS` not marked ``slow`` (whole jobs through the toolkit run in the dev lane
only, to keep ``make test`` within CI's time; the in-process ``Trainer`` and plain-loop tests run here):
the tests of what runs inside a job (verify for the six tiny architectures under every plan, the
injected failures, hooks, budgets, gradient checkpointing, a failed compiled backward, resume's plan
and checkpoint logic, the ``Trainer`` and plain-loop integrations in process, the private-API
wrappers). The toolkit jobs, LoRA and the FSDP2 plain loop (slow) run in the dev lane.
With ``--install-only`` it makes the environment and runs nothing: ``make test`` makes the DLC lane's
environment this way while the dev lane's tests run (a download, hardly any CPU), so the lane's wait
for PyPI overlaps the tests. With ``--write-results`` it writes ``benchmarks/results/stack-NAME.json``:
the versions, the counts (passed, failed, xfailed, skipped, errors), the failing node ids and the
run's seconds. The exit code is pytest's.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATRIX = REPO / "sagemaker_tc" / "sdk" / "support_matrix.json"
RESULTS = REPO / "benchmarks" / "results"
PACKAGES = ("torch", "transformers", "accelerate", "peft")
LANE_TESTS = (
    "tests/test_internals.py",
    "tests/test_plan_call.py",
    "tests/test_plans.py",
    "tests/test_plan_safety.py",
    "tests/test_fallback.py",
    "tests/test_runtime.py",
    "tests/test_shapes.py",
    "tests/test_session_edges.py",
    "tests/test_known_wrong.py",
    "tests/test_verify.py::test_each_plan_trains_like_eager",
    "tests/test_verify.py::test_user_script_with_loss_fn_passes_and_leaves_model_untouched",
    "tests/test_verify.py::test_t5_decoder_block_compiled_alone_gets_the_relative_bias_gradient",
    "tests/test_compiled_training.py",
    "tests/test_resume.py",
    "tests/test_fsdp2.py",
    "tests/test_captured_step.py",
    "tests/test_captured_trainer.py",
    "tests/test_compile_model_bad_input.py::test_a_torchscript_module_is_refused_by_name_and_touches_no_session",
    "tests/test_compile_model_bad_input.py::test_a_model_torch_compile_already_wrapped_is_refused_and_its_module_then_compiles",
    "tests/test_script_compiles_itself.py",
)
"""The job-side test files every lane runs (module docstring)."""
LANE_DESELECT = (
    "tests/test_resume.py::test_a_job_stopped_after_a_checkpoint_resumes_and_ends_as_an_uninterrupted_one[trainer-2]",
    "tests/test_resume.py::test_a_job_stopped_after_a_checkpoint_resumes_and_ends_as_an_uninterrupted_one[loop-2]",
)
"""Left out of every lane to keep ``make test`` within CI's time: the 2-host stop-and-resume jobs (the
1-host ones run; the dev lane runs all four). The ``sagemaker-tc verify`` command-line cases run in
the dev lane only (the bench's argument handling, the same on every stack)."""


TEST_TOOLS = ("pytest>=8", "pytest-xdist>=3.6")
"""What a lane installs to run its tests besides the stack's pins."""
PYTEST_WORKERS = ("-n", "2", "--dist", "loadfile")
"""Two pytest processes, a test file each at a time (its module fixtures computed once), as make test runs
the dev lane."""


def stack(name: str) -> dict:
    """The support matrix's stack called ``name``.

    Raises:
        SystemExit: no such stack (the message lists the names there are).
    """
    stacks = json.loads(MATRIX.read_text(encoding="utf-8"))["stacks"]
    for entry in stacks:
        if entry["name"] == name:
            return entry
    raise SystemExit(f"stack_lane: no stack {name!r} in {MATRIX.name}; there are: {[s['name'] for s in stacks]}")


def pins(entry: dict) -> list[str]:
    """The stack's pip requirements (``torch==2.8.0``, ...), for the packages it names."""
    return [f"{package}=={entry[package]}" for package in PACKAGES if entry.get(package)]


LANE_DISK_GIB = 12
"""Free space a new lane environment needs (GiB): a CUDA torch with its nvidia-* wheels is 6 to 8 GiB
installed, and pip holds the downloaded wheels beside it while it installs."""


def check_disk(folder: Path, need_gib: float = LANE_DISK_GIB) -> None:
    """Stop before pip starts when ``folder``'s file system has less than ``need_gib`` GiB free.

    Raises:
        SystemExit: too little space (the message says how much there is and what takes it).
    """
    free_gib = shutil.disk_usage(folder).free / 2**30
    if free_gib < need_gib:
        raise SystemExit(
            f"stack_lane: {free_gib:.1f} GiB free on the disk of {folder}; a lane's environment needs about "
            f"{need_gib} GiB (a CUDA torch build). Free space (old .venv-stack-* folders, clones) and run again."
        )


def environment(entry: dict) -> Path:
    """The lane's virtual environment, made (or made again) when its pins or pyproject.toml changed.

    Returns:
        The environment's python.

    Raises:
        SystemExit: a new environment would not fit on the disk (:func:`check_disk`).
        subprocess.CalledProcessError: venv or pip failed.
    """
    venv = REPO / f".venv-stack-{entry['name']}"
    python = venv / "bin" / "python"
    wanted = pins(entry)
    recipe = "\n".join([*wanted, *TEST_TOOLS]) + (REPO / "pyproject.toml").read_text()
    stamp = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    marker = venv / f".installed-{stamp}"
    if marker.exists():
        return python
    with (REPO / ".pip-install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the Makefile's installs take it too (INSTALL_LOCK)
        if not python.exists():
            check_disk(REPO)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        install = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*install, "-e", f"{REPO}[runtime,bench,v3]", *wanted, *TEST_TOOLS], check=True)
    for old in venv.glob(".installed-*"):
        old.unlink()
    marker.touch()
    return python


def installed_versions(python: Path) -> dict[str, str]:
    """The versions the lane's environment really holds (what the results file records; None for a
    package it lacks, such as peft on the GPU bench stack)."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "def version(p):\n"
        "    try:\n"
        "        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        f"print(json.dumps({{p: version(p) for p in {list(PACKAGES)!r}}} | "
        "{'python': sys.version.split()[0]}))"
    )
    return json.loads(subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout)


def counts(junit: Path) -> tuple[dict[str, int], list[str]]:
    """Passed, failed, xfailed, skipped and error counts from pytest's JUnit XML, and the failing node ids."""
    tally = dict.fromkeys(("passed", "failed", "xfailed", "skipped", "errors"), 0)
    failing: list[str] = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        node = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        kinds = {child.tag: child for child in case}
        skipped = kinds.get("skipped")
        if "failure" in kinds or "error" in kinds:
            tally["failed" if "failure" in kinds else "errors"] += 1
            failing.append(node)
        elif skipped is not None:
            tally["xfailed" if (skipped.get("type") == "pytest.xfail") else "skipped"] += 1
        else:
            tally["passed"] += 1
    return tally, failing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="a stack's name in sagemaker_tc/sdk/support_matrix.json")
    parser.add_argument("--write-results", action="store_true", help="write benchmarks/results/stack-NAME.json")
    parser.add_argument(
        "--install-only", action="store_true", help="make the lane's environment and stop (make test does it early)"
    )
    args = parser.parse_args(argv)
    entry = stack(args.name)
    python = environment(entry)
    if args.install_only:
        return 0
    versions = installed_versions(python)
    print(f"stack lane {entry['name']}: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        junit = Path(folder) / "junit.xml"
        started = time.monotonic()
        deselect = [f"--deselect={node}" for node in LANE_DESELECT]
        command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *PYTEST_WORKERS]
        command.append(f"--junitxml={junit}")
        command += deselect
        command += LANE_TESTS
        code = subprocess.run(command, cwd=REPO).returncode
        seconds = round(time.monotonic() - started, 1)
        tally, failing = counts(junit) if junit.exists() else ({}, [])
    if args.write_results:
        RESULTS.mkdir(parents=True, exist_ok=True)
        result = {
            "stack": entry,
            "installed": versions,
            "host": {"machine": platform.machine(), "cpus": "2-core CPU, no GPU"},
            "tests": list(LANE_TESTS),
            "counts": tally,
            "failing": failing,
            "seconds": seconds,
            "exit_code": code,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
        }
        (RESULTS / f"stack-{entry['name']}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
