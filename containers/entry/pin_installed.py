"""Print ``name==version`` for each named package installed here: pip constraints that keep the base
image's own builds (its CUDA torch, its transformers) when ``sagemaker-tc[runtime]`` is installed.

Usage: ``python pin_installed.py torch torchvision transformers > constraints.txt``. Packages that
are not installed are left out (pip may then install them).
"""

from __future__ import annotations

import sys
from importlib import metadata


def pins(names: list[str]) -> list[str]:
    """``name==version`` for every installed distribution in ``names``."""
    lines = []
    for name in names:
        try:
            lines.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return lines


if __name__ == "__main__":
    sys.stdout.write("".join(f"{line}\n" for line in pins(sys.argv[1:])))
