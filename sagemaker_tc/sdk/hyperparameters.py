"""Hyperparameters, encoded the way SageMaker sends them: every value JSON-encoded to a string.

The sagemaker-training toolkit ``json.loads`` each value back, so a value reaches the script with
its JSON type (SM_HPS, SM_HP_<NAME>) and as text on the command line (``--name value``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sagemaker_tc.errors import HyperparameterError

# CreateTrainingJob limits (SageMaker API reference, HyperParameters): key <= 256 chars, value <= 2500.
MAX_KEY_CHARS = 256
MAX_VALUE_CHARS = 2500
RESERVED_PREFIX = "sagemaker_"


def encode_value(name: str, value: Any) -> str:
    """JSON-encode one hyperparameter value (strings gain quotes: ``"a b"`` -> ``'"a b"'``).

    Raises:
        HyperparameterError: the value is not JSON (a set, an object, NaN or infinity) or the
            encoded text is longer than SageMaker's 2500-character limit.
    """
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise HyperparameterError(
            f"hyperparameter {name!r} cannot be JSON-encoded ({error}); accepted values are str, int, float "
            "(finite), bool, None, and lists/dicts of those"
        ) from None
    if len(encoded) > MAX_VALUE_CHARS:
        raise HyperparameterError(
            f"hyperparameter {name!r} is {len(encoded)} characters once JSON-encoded; SageMaker accepts at most "
            f"{MAX_VALUE_CHARS}"
        )
    return encoded


def encode_hyperparameters(
    hyperparameters: Mapping[str, Any] | None, *, allow_reserved: bool = False
) -> dict[str, str]:
    """Encode the user's hyperparameters for ``CreateTrainingJob``.

    Args:
        hyperparameters: name -> JSON-encodable value.
        allow_reserved: accept ``sagemaker_*`` names (only the SDK's own keys use it).

    Returns:
        name -> JSON text, in the given order.

    Raises:
        HyperparameterError: not a mapping, a name that is not a non-empty string of at most 256
            characters, a user name starting with ``sagemaker_`` (the toolkit would hide it from the
            script), or a value :func:`encode_value` rejects.
    """
    if hyperparameters is None:
        return {}
    if not isinstance(hyperparameters, Mapping):
        raise HyperparameterError(
            f"hyperparameters must be a dict of name -> value, got {type(hyperparameters).__name__}"
        )
    encoded: dict[str, str] = {}
    for name, value in hyperparameters.items():
        if not isinstance(name, str) or not name or len(name) > MAX_KEY_CHARS:
            raise HyperparameterError(
                f"hyperparameter name {name!r} is not accepted: names are non-empty strings of at most "
                f"{MAX_KEY_CHARS} characters"
            )
        if name.startswith(RESERVED_PREFIX) and not allow_reserved:
            raise HyperparameterError(
                f"hyperparameter {name!r} starts with {RESERVED_PREFIX!r}, which the SageMaker toolkit reserves and "
                "never passes to your script; rename it (compiler settings belong in TrainingCompilerConfig)"
            )
        encoded[name] = encode_value(name, value)
    return encoded
