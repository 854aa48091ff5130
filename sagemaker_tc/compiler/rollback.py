"""All-or-nothing changes to a runtime's parts: what a failed attach puts back."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any


def snapshot(*objects: Any) -> Callable[[], None]:
    """Keep each object's attributes as they are now (lists and dicts copied, one level deep).
    Returns what puts them back: the attributes set since are replaced by the kept ones."""
    saved = [(obj, {name: _kept(value) for name, value in vars(obj).items()}) for obj in objects]

    def restore() -> None:
        for obj, values in saved:
            vars(obj).update(values)

    return restore


def _kept(value: Any) -> Any:
    return copy.copy(value) if isinstance(value, (list, dict)) else value
