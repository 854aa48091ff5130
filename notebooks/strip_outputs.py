"""Strip outputs and execution counts from notebooks (``make strip-notebooks``), as committed notebooks must be.

Usage: ``python notebooks/strip_outputs.py [NOTEBOOK ...]`` (default: every notebook in this folder).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat


def strip(path: Path) -> bool:
    """Clear ``path``'s code cell outputs and execution counts; returns True if the file changed."""
    book = nbformat.read(path, as_version=4)
    changed = False
    for cell in book.cells:
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None):
            cell.outputs, cell.execution_count, changed = [], None, True
    if book.metadata.pop("widgets", None) is not None:
        changed = True
    if changed:
        nbformat.write(book, path)
    return changed


if __name__ == "__main__":
    paths = [Path(arg) for arg in sys.argv[1:]] or sorted(Path(__file__).parent.glob("*.ipynb"))
    for notebook in paths:
        if strip(notebook):
            sys.stdout.write(f"stripped {notebook}\n")
