"""CreateTrainingJob's own limits on a value, read from the SageMaker API model that botocore ships.

SageMaker refuses a request whose fields break the API model's constraints (length, range,
pattern, allowed values). Checking the same constraints at construction turns that late
``ValidationException`` into a named error before anything is uploaded, and the constraints stay
the API's (nothing here is hand-copied from its reference pages).
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError, JobSettingWarning

# \p{Z} (space separators): whitespace but no control character (no newline, tab, ...).
_SPACES = r"(?:(?![\x00-\x1f\x7f-\x9f])\s)"
# Java character classes in the API model's patterns, as Python ``re`` spells them (inside [...]).
# \p{L} letters and \p{N} numbers are in \w (which also has '_'); \p{Z} separators are spaces.
_JAVA_CLASSES = {r"\p{L}": r"^\W_", r"\p{N}": r"\d", r"\p{Z}": _SPACES, r"\p{Alnum}": "a-zA-Z0-9"}


@functools.cache
def _shape(name: str):
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker").shape_for(name)


def _python_pattern(pattern: str) -> re.Pattern[str]:
    """The API pattern as a Python regex matching the whole value."""
    if r"\p{L}" in pattern:  # tag keys and values: letters, numbers, spaces and a few symbols
        allowed = pattern.split(r"\p{N}", 1)[1].split("]", 1)[0]
        return re.compile(r"^(?:[^\W_]|\d|" + _SPACES + "|[" + allowed + r"])*\Z")
    for java, python in _JAVA_CLASSES.items():
        pattern = pattern.replace(java, python)
    return re.compile(f"^(?:{pattern})\\Z")  # \Z, not $: "$" would take a value ending in a newline


def limit_problem(shape_name: str, value: Any) -> str | None:
    """What CreateTrainingJob would refuse about ``value`` as the API shape ``shape_name``, or None.

    Strings are checked for length, pattern and allowed values; integers for range; lists for
    their number of entries (not their entries: check those by their own shape).
    """
    shape = _shape(shape_name)
    meta = shape.metadata
    low, high = meta.get("min"), meta.get("max")
    if shape.type_name == "string":
        if not isinstance(value, str):
            return f"expected a string, got {type(value).__name__}"
        if shape.enum and value not in shape.enum:
            return f"one of {', '.join(shape.enum)}"
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            return f"{low or 0} to {high} characters, got {len(value)}"
        if "pattern" in meta and not _python_pattern(meta["pattern"]).match(value):
            return f"it must match {meta['pattern']}"
    elif shape.type_name == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"expected a whole number, got {value!r}"
        if (low is not None and value < low) or (high is not None and value > high):
            return f"between {low} and {high}" if high is not None else f"at least {low}"
    elif shape.type_name == "list":
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            return f"{low} to {high} entries, got {len(value)}"
    return None


def limit_maximum(shape_name: str) -> int | None:
    """The API model's ``max`` for ``shape_name`` (characters, value or entries), or None."""
    return _shape(shape_name).metadata.get("max")


def check_limit(argument: str, shape_name: str, value: Any) -> Any:
    """Return ``value`` if CreateTrainingJob accepts it as ``shape_name``.

    Raises:
        EstimatorArgumentError: the API would refuse it; the message names the argument and the limit.
    """
    problem = limit_problem(shape_name, value)
    if problem is not None:
        shown = _shown(argument, value)
        raise EstimatorArgumentError(f"{shown} is not accepted by CreateTrainingJob ({shape_name}): {problem}")
    return value


def warn_limit(argument: str, shape_name: str, value: Any) -> None:
    """For a local job: warn (:class:`~sagemaker_tc.errors.JobSettingWarning`) when CreateTrainingJob
    would refuse ``value`` as ``shape_name``, so the same arguments on an ``ml.*`` instance type are
    not a surprise; the local job runs as given."""
    problem = limit_problem(shape_name, value)
    if problem is not None:
        warnings.warn(
            f"{_shown(argument, value)} would be refused on SageMaker (CreateTrainingJob's {shape_name}: "
            f"{problem}); this local job runs with it",
            JobSettingWarning,
            stacklevel=3,
        )


def _shown(argument: str, value: Any) -> str:
    """How a message names ``argument``: a list by its length (the problem is how many entries), not
    echoed entry by entry; any other value as given."""
    return f"{argument} (a list of {len(value)})" if isinstance(value, (list, tuple)) else f"{argument}={value!r}"
