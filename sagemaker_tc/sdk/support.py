"""The support matrix: which version stacks sagemaker-tc runs on, read from ``support_matrix.json``.

The JSON (package data beside this module) holds the PyTorch floor and one entry per stack: the dev
stack ``make test`` runs, the Hugging Face and PyTorch DLCs a job resolves, and the GPU bench
machine. A stack whose lane ran green is ``"tested"``; the estimators refuse, when built, a stock
DLC that matches no tested stack (:func:`sagemaker_tc.sdk.images.check_tested_stack`). The docs'
"Tested versions" table is generated from the same file. Standard library only: no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from typing import Any, Literal

from sagemaker_tc.errors import SupportMatrixError

StackKind = Literal["dev", "huggingface-dlc", "pytorch-dlc", "gpu-bench"]
StackStatus = Literal["tested", "untested"]
_KINDS = ("dev", "huggingface-dlc", "pytorch-dlc", "gpu-bench")
_STATUSES = ("tested", "untested")


def major_minor(version: str) -> tuple[int, int]:
    """``"2.8.0"`` -> ``(2, 8)``; ``"2.8"`` -> ``(2, 8)``; a local tag (``"2.13.0+cpu"``) is ignored.

    Raises:
        ValueError: ``version`` does not start with two dot-separated integers.
    """
    parts = version.split("+", 1)[0].split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"{version!r} is not a version number such as '2.8' or '2.8.0'")
    return int(parts[0]), int(parts[1])


@dataclass(frozen=True)
class Floor:
    """The oldest PyTorch the runtime supports, and why."""

    torch: str
    """major.minor, e.g. ``"2.7"``."""
    reason: str
    """One sentence: why older versions cannot run the compiler."""

    @property
    def version(self) -> tuple[int, int]:
        """``torch`` as ``(major, minor)``."""
        return major_minor(self.torch)


@dataclass(frozen=True)
class Stack:
    """One version stack: a Python with torch and the Hugging Face libraries, and the lane that tests it."""

    name: str
    kind: StackKind
    status: StackStatus
    """``"tested"``: its lane ran green; ``"untested"``: listed, not yet run."""
    torch: str
    lane: str
    """The command that runs the test suite on this stack, e.g. ``"make test"``."""
    python: str | None = None
    transformers: str | None = None
    accelerate: str | None = None
    peft: str | None = None
    default: bool = False
    """True for the stack the docs and examples use by default (one Hugging Face DLC)."""
    source: str | None = None
    """Where the versions come from: which were confirmed and which chosen."""
    notes: str | None = None
    """What the lane showed beside its passing tests (a known failure the fallback absorbs), if anything."""

    @property
    def tested(self) -> bool:
        """True when the stack's lane ran green."""
        return self.status == "tested"

    def matches(self, *, torch: str, transformers: str | None = None) -> bool:
        """True when ``torch`` (and ``transformers``, when given) has this stack's major.minor.

        Raises:
            ValueError: a version is not a version number.
        """
        if major_minor(torch) != major_minor(self.torch):
            return False
        if transformers is None:
            return True
        return self.transformers is not None and major_minor(transformers) == major_minor(self.transformers)

    def describe(self) -> str:
        """``"transformers 4.56.2 / torch 2.8.0"`` (``"torch 2.8.0"`` without transformers)."""
        if self.transformers is None:
            return f"torch {self.torch}"
        return f"transformers {self.transformers} / torch {self.torch}"


@dataclass(frozen=True)
class SupportMatrix:
    """The floor and every stack, in the JSON's order."""

    floor: Floor
    stacks: tuple[Stack, ...]

    def tested(self) -> tuple[Stack, ...]:
        """The stacks whose status is ``"tested"``."""
        return tuple(stack for stack in self.stacks if stack.tested)

    def default(self) -> Stack:
        """The stack marked ``"default": true``.

        Raises:
            SupportMatrixError: no stack, or more than one, is the default.
        """
        defaults = [stack for stack in self.stacks if stack.default]
        if len(defaults) != 1:
            raise SupportMatrixError(f"support_matrix.json must mark one default stack, marks {len(defaults)}")
        return defaults[0]

    def stack(self, name: str) -> Stack:
        """The stack called ``name``.

        Raises:
            KeyError: no stack has that name; the message lists the names.
        """
        for stack in self.stacks:
            if stack.name == name:
                return stack
        raise KeyError(f"no stack {name!r} in support_matrix.json; stacks: {', '.join(s.name for s in self.stacks)}")

    def tested_match(self, *, torch: str, transformers: str | None = None) -> Stack | None:
        """The first tested stack :meth:`Stack.matches` these versions, or None."""
        return next((stack for stack in self.tested() if stack.matches(torch=torch, transformers=transformers)), None)


def _stack(entry: dict[str, Any]) -> Stack:
    known = {field.name for field in fields(Stack)}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise SupportMatrixError(f"support_matrix.json stack {entry.get('name')!r}: unknown keys {unknown}")
    try:
        stack = Stack(**entry)
    except TypeError as error:
        raise SupportMatrixError(f"support_matrix.json stack {entry.get('name')!r}: {error}") from None
    if stack.kind not in _KINDS or stack.status not in _STATUSES:
        raise SupportMatrixError(
            f"support_matrix.json stack {stack.name!r}: kind {stack.kind!r} / status {stack.status!r}; "
            f"accepted kinds: {', '.join(_KINDS)}; statuses: {', '.join(_STATUSES)}"
        )
    major_minor(stack.torch)  # a malformed version fails here, not at the first estimator
    return stack


def parse_matrix(data: dict[str, Any]) -> SupportMatrix:
    """The matrix from the JSON's parsed object.

    Raises:
        SupportMatrixError: a key is missing or unknown, or a kind or status is not one of the accepted ones.
        ValueError: a torch version is not a version number.
    """
    try:
        floor = Floor(**data["floor"])
        stacks = tuple(_stack(entry) for entry in data["stacks"])
    except (KeyError, TypeError) as error:
        raise SupportMatrixError(f"support_matrix.json is malformed: {error}") from None
    major_minor(floor.torch)
    return SupportMatrix(floor=floor, stacks=stacks)


@cache
def support_matrix() -> SupportMatrix:
    """The packaged ``sagemaker_tc/sdk/support_matrix.json``, read once.

    Raises:
        SupportMatrixError: the file is malformed (see :func:`parse_matrix`).
    """
    text = resources.files("sagemaker_tc.sdk").joinpath("support_matrix.json").read_text(encoding="utf-8")
    return parse_matrix(json.loads(text))
