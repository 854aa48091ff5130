"""The package's floors (docs/architecture.md, "Layers"): no module imports one above it, no import
circle inside ``compiler/`` + ``integrations/``, and ``_internals.py`` imports nothing of the package.

Imports are read from the source (``ast``): module level, inside functions and under
``TYPE_CHECKING`` alike.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sagemaker_tc"
DOC = ROOT / "docs" / "architecture.md"


def floors() -> dict[str, int]:
    """``{"compiler/session.py": 4, "compiler/": 3, ...}`` from the doc's floor table."""
    section = DOC.read_text(encoding="utf-8").split("## Layers", 1)[1].split("\n## ", 1)[0]
    table: dict[str, int] = {}
    for line in section.splitlines():
        row = re.match(r"\| (\d+) [^|]+\| ([^|]+) \|", line)
        if row:
            for place in re.findall(r"`([^`]+)`", row.group(2)):
                table[place] = int(row.group(1))
    return table


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (``sagemaker_tc.compiler.session``)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in its source."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {target for target in found if target in modules and target != name}


def floor_of(name: str, path: Path, table: dict[str, int]) -> int:
    relative = path.relative_to(PACKAGE).as_posix()
    if relative in table:
        return table[relative]
    folder = relative.split("/", 1)[0] + "/"
    assert folder in table, f"{relative} is on no floor of docs/architecture.md's Layers table"
    return table[folder]


GRAPH = {name: imports_of(name, path, module_files()) for name, path in module_files().items()}


def test_the_floor_table_names_only_files_and_folders_that_exist():
    table = floors()
    assert len(set(table.values())) == 7
    missing = [place for place in table if not (PACKAGE / place).exists()]
    assert not missing


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_no_module_imports_one_on_a_higher_floor(name):
    table, files = floors(), module_files()
    mine = floor_of(name, files[name], table)
    above = {target: floor_of(target, files[target], table) for target in GRAPH[name]}
    assert {target: floor for target, floor in above.items() if floor > mine} == {}


def test_the_foundation_imports_only_errors_and_internals_imports_nothing_of_the_package():
    table, files = floors(), module_files()
    foundation = [name for name in GRAPH if floor_of(name, files[name], table) == 1]
    assert {name: GRAPH[name] - {"sagemaker_tc.errors"} for name in foundation} == {name: set() for name in foundation}
    assert GRAPH["sagemaker_tc._internals"] == set()


def test_the_sdk_side_never_imports_the_compiler_integrations_or_tuning():
    torch_side = ("sagemaker_tc.compiler", "sagemaker_tc.integrations", "sagemaker_tc.tuning")
    reached = {
        name: sorted(t for t in targets if t.startswith(torch_side))
        for name, targets in GRAPH.items()
        if name.startswith("sagemaker_tc.sdk") or name == "sagemaker_tc.cli"
    }
    assert {name: targets for name, targets in reached.items() if targets} == {}


def circles(names: set[str]) -> list[list[str]]:
    """The import circles among ``names`` (strongly connected parts with more than one module)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(GRAPH[node] & names):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(names):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_inside_the_compiler_and_the_integrations():
    names = {n for n in GRAPH if n.startswith(("sagemaker_tc.compiler", "sagemaker_tc.integrations"))}
    assert circles(names) == []


def test_the_circle_finder_finds_a_circle():
    GRAPH["test.a"], GRAPH["test.b"] = {"test.b"}, {"test.a"}
    try:
        assert circles({"test.a", "test.b"}) == [["test.a", "test.b"]]
    finally:
        del GRAPH["test.a"], GRAPH["test.b"]
