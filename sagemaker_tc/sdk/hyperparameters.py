"""Hyperparameters, encoded the way SageMaker sends them: every value JSON-encoded to a string.

The sagemaker-training toolkit ``json.loads`` each value back, so a value reaches the script with
its JSON type (SM_HPS, SM_HP_<NAME>) and as text on the command line (``--name value``). That
command line is why user hyperparameters follow more rules than the API's: the toolkit writes
``--<name> <value>`` (``-<name>`` for one-letter names), a dict value as ``k=v,k2=v2`` and other
values with Python's ``str()``, and exports ``SM_HP_<NAME>`` (sagemaker-training 5.x,
``mapping.to_cmd_args`` / ``mapping.to_env_vars``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sagemaker_tc.contract import ENV_HP_PREFIX, HP_TOOLKIT_PREFIX
from sagemaker_tc.errors import HyperparameterError, HyperparameterWarning
from sagemaker_tc.warn import warn_user

# CreateTrainingJob limits (SageMaker API reference, HyperParameters): key <= 256 chars, value <= 2500.
MAX_KEY_CHARS = 256
MAX_VALUE_CHARS = 2500
# CreateTrainingJob HyperParameters: at most 100 entries. The estimators add up to 10 of their own
# (SMTC's and sagemaker-tc's compiler keys, the toolkit's script-mode keys, torchrun's switch).
MAX_HYPERPARAMETERS = 100
ESTIMATOR_KEYS = 10
# Lists (or dicts) in a value nest at most this deep: deeper is no hyperparameter, and encoding it
# (json, the toolkit's command line) would recurse past Python's limit.
MAX_NESTING = 100
RESERVED_PREFIX = HP_TOOLKIT_PREFIX
# A name becomes the option --<name> and the variable SM_HP_<NAME>: no leading '-' (it would read
# ----name), no '=' (illegal in a variable name), no whitespace or control characters.
_BAD_NAME_RE = re.compile(r"^-|[=\s\x00-\x1f\x7f]")
# Names that look like a secret's (warned about: hyperparameters are shown and logged).
# "token" only as a word of the name (hf_token, token), not max_tokens or tokenizer_name.
_SECRET_NAME_RE = re.compile(
    r"passw(or)?d|secret|(^|[_-])token($|[_-])|api_?key|access_?key|private_?key|credential", re.IGNORECASE
)
_NUMBER_RE = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def encode_value(name: str, value: Any) -> str:
    """JSON-encode one hyperparameter value (strings gain quotes: ``"a b"`` -> ``'"a b"'``).

    Raises:
        HyperparameterError: the value is not JSON (a set, an object, NaN or infinity), holds a
            NUL byte or a lone surrogate, nests lists more than 100 deep, or the encoded text is longer
            than SageMaker's 2500-character limit.
    """
    _check_nesting(name, value)
    _check_no_nul(name, value)
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise HyperparameterError(
            f"hyperparameter {name!r} cannot be JSON-encoded ({error}); accepted values are str, int, float "
            "(finite), bool, None, and lists of those"
        ) from None
    check_utf8(f"hyperparameter {name!r}", encoded)
    _check_length(name, encoded, "once JSON-encoded")
    return encoded


def check_utf8(what: str, text: str) -> None:
    """``text`` (a hyperparameter's name or value) is text UTF-8 can encode: no lone surrogate
    (``"\\ud800"``), which the job's ``hyperparameters.json``, command line and environment cannot hold.

    Raises:
        HyperparameterError: a lone surrogate; the message gives its code point and position.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise HyperparameterError(
            f"{what} holds a lone surrogate (U+{ord(text[error.start]):04X} at position {error.start}), which is "
            "not text: UTF-8 cannot encode it, so the job's hyperparameters.json and command line cannot hold it; "
            "a surrogate pair read apart, or bytes decoded with errors='surrogateescape', gives one; pass the "
            "character itself"
        ) from None


def _check_nesting(name: str, value: Any) -> None:
    """A value whose lists (or dicts) nest at most :data:`MAX_NESTING` deep and hold at most
    :data:`MAX_VALUE_CHARS` items in all (each takes a character once encoded), walked level by level
    without recursion: no ``RecursionError``, and no endless walk of a list that holds itself.

    Raises:
        HyperparameterError: deeper, or more items.
    """
    depth, items, level = 0, 0, [value]
    while True:
        containers = [item for item in level if isinstance(item, (list, tuple, Mapping))]
        if not containers:
            return
        depth += 1
        level = [
            child
            for item in containers
            for child in ([*item.keys(), *item.values()] if isinstance(item, Mapping) else item)
        ]
        items += len(level)
        if depth > MAX_NESTING:
            raise HyperparameterError(
                f"hyperparameter {name!r} nests lists more than {MAX_NESTING} deep, which JSON and the training "
                "toolkit's command line cannot pass on; flatten it, or put the structure in a file in source_dir "
                "and pass the file's name"
            )
        if items > MAX_VALUE_CHARS:
            raise HyperparameterError(
                f"hyperparameter {name!r} holds more than {MAX_VALUE_CHARS} items, so it is longer than "
                f"SageMaker's {MAX_VALUE_CHARS} characters once JSON-encoded; put it in a file in source_dir and "
                "pass the file's name"
            )


def _check_no_nul(name: str, value: Any) -> None:
    """A value (or a list's item) holding a NUL byte: no process takes one on its command line."""
    holds = (
        "\x00" in value
        if isinstance(value, str)
        else isinstance(value, (list, tuple)) and any(isinstance(item, str) and "\x00" in item for item in value)
    )
    if holds:
        raise HyperparameterError(
            f"hyperparameter {name!r} holds a NUL byte, which no process's command line accepts (the job would "
            "fail as the script starts); remove it"
        )


def _check_length(name: str, text: str, how: str) -> None:
    if len(text) > MAX_VALUE_CHARS:
        raise HyperparameterError(
            f"hyperparameter {name!r} is {len(text)} characters {how}; SageMaker accepts at most {MAX_VALUE_CHARS}"
        )


def encode_hyperparameters(
    hyperparameters: Mapping[str, Any] | None, *, allow_reserved: bool = False
) -> dict[str, str]:
    """Encode hyperparameters for ``CreateTrainingJob``.

    Args:
        hyperparameters: name -> JSON-encodable value.
        allow_reserved: the SDK's own keys: accept ``sagemaker_*`` names and dict values, and skip
            :func:`check_user_hyperparameter` (they reach ``SM_FRAMEWORK_PARAMS``, never the script's
            command line).

    Returns:
        name -> JSON text, in the given order; a pipeline variable's value stays a pipeline variable
        (its ``to_string()``, as SDK v2 sent it), its ``default_value`` checked.

    Raises:
        HyperparameterError: not a mapping, more than :data:`MAX_HYPERPARAMETERS` less the
            estimators' own keys, a name that is not a non-empty string of at most 256 characters, a
            user name or value :func:`check_user_hyperparameter` refuses, or a value
            :func:`encode_value` rejects.

    Warns:
        HyperparameterWarning: a user value the script's argument parser will read as an option, or
            a name that looks like a secret's (:func:`warn_if_secret_name`).
    """
    if hyperparameters is None:
        return {}
    if not isinstance(hyperparameters, Mapping):
        raise HyperparameterError(
            f"hyperparameters must be a dict of name -> value, got {type(hyperparameters).__name__}"
        )
    if not allow_reserved:
        check_count(len(hyperparameters), sdk_keys=ESTIMATOR_KEYS)
    encoded: dict[str, str] = {}
    for name, value in hyperparameters.items():
        if not isinstance(name, str) or not name or len(name) > MAX_KEY_CHARS:
            raise HyperparameterError(
                f"hyperparameter name {name!r} is not accepted: names are non-empty strings of at most "
                f"{MAX_KEY_CHARS} characters"
            )
        if is_pipeline_variable(value):
            encoded[name] = _pipeline_value(name, value, allow_reserved=allow_reserved)
            continue
        if not allow_reserved:
            check_user_hyperparameter(name, value)
        encoded[name] = encode_value(name, value)
    return encoded


def is_pipeline_variable(value: Any) -> bool:
    """True for a SageMaker Pipelines variable (a ``ParameterString``, a step's property, ...)."""
    try:
        from sagemaker.core.helper.pipeline_variable import PipelineVariable
    except ImportError:  # the container side runs without sagemaker-core
        return False
    return isinstance(value, PipelineVariable)


def _pipeline_value(name: str, value: Any, *, allow_reserved: bool) -> Any:
    """A pipeline variable's value as SDK v2 sent it (``value.to_string()``, a reference resolved when
    the pipeline runs), its ``default_value`` checked like a plain value."""
    default = getattr(value, "default_value", None)
    if default is not None:
        if not allow_reserved:
            check_user_hyperparameter(name, default)
        encode_value(name, default)
    return value.to_string()


def check_count(count: int, *, sdk_keys: int) -> None:
    """SageMaker takes at most 100 hyperparameters per job, ``sdk_keys`` of them the SDK's own.

    Raises:
        HyperparameterError: more than ``100 - sdk_keys`` of the user's.
    """
    room = MAX_HYPERPARAMETERS - sdk_keys
    if count > room:
        raise HyperparameterError(
            f"{count} hyperparameters is more than a job can take: SageMaker takes at most {MAX_HYPERPARAMETERS} per "
            f"training job, {sdk_keys} of them sagemaker-tc's own, which leaves {room}; pass the rest in one JSON "
            "value or a config file in source_dir"
        )


def check_hyperparameter_name(name: str) -> None:
    """A user hyperparameter's name becomes ``--<name>`` on the script's command line and ``SM_HP_<NAME>``.

    Raises:
        HyperparameterError: a name starting with ``sagemaker_`` (the toolkit, and sagemaker-tc's
            ModelTrainer driver, keep those from the script) or ``-``, or holding ``=``, whitespace, a
            control character or a lone surrogate.
    """
    check_utf8(f"hyperparameter name {name!r}", name)
    if name.startswith(RESERVED_PREFIX):
        raise HyperparameterError(
            f"hyperparameter {name!r} starts with {RESERVED_PREFIX!r}, which the SageMaker toolkit reserves and "
            "never passes to your script (nor does sagemaker-tc's ModelTrainer driver); rename it (compiler settings "
            "belong in TrainingCompilerConfig)"
        )
    if _BAD_NAME_RE.search(name):
        raise HyperparameterError(
            f"hyperparameter name {name!r} is not accepted: the toolkit passes it to your script as --{name} and "
            f"as the variable {ENV_HP_PREFIX}<NAME>, so a name may not start with '-' or contain '=', spaces or "
            "control characters; use letters, digits and '_' (e.g. 'learning_rate')"
        )


def check_value_text(name: str, text: str) -> None:
    """A value as sent, for drivers that pass it to the script as it is (SDK v3's ModelTrainer).

    Raises:
        HyperparameterError: longer than SageMaker's 2500 characters, or holding a NUL byte or a
            lone surrogate.

    Warns:
        HyperparameterWarning: see :func:`check_user_hyperparameter`.
    """
    _check_no_nul(name, text)
    check_utf8(f"hyperparameter {name!r}", text)
    _check_length(name, text, "as sent")
    _warn_if_option(name, text)
    warn_if_secret_name(name)


def check_user_hyperparameter(name: str, value: Any) -> None:
    """The rules the toolkit's command line adds for a hyperparameter of the user's (module docstring).

    Raises:
        HyperparameterError: a name :func:`check_hyperparameter_name` refuses; a value nested too
            deep (:func:`encode_value`); a value that is or holds a dict (the script would get
            ``k=v,...`` or a Python repr, not JSON).

    Warns:
        HyperparameterWarning: a string value starting with ``-`` that is not a number: the
            script's argument parser reads it as an option (``--help`` prints the help and exits 0).
    """
    check_hyperparameter_name(name)
    _check_nesting(name, value)  # before _holds_dict's recursion
    if _holds_dict(value):
        raise HyperparameterError(
            f"hyperparameter {name!r} is or holds a dict, which the toolkit passes to your script's command line as "
            "'key=value,...' or a Python repr, not JSON; pass json.dumps(value) and parse it in the script with "
            "json.loads"
        )
    _warn_if_option(name, value)
    warn_if_secret_name(name)


def warn_if_secret_name(name: str) -> None:
    """Warn when a hyperparameter's name looks like a secret's (``db_password``, ``hf_token``, ...):
    SageMaker shows hyperparameters in DescribeTrainingJob and the console, and the toolkit writes
    them to the job's log and ``hyperparameters.json``.

    Warns:
        HyperparameterWarning: the name holds ``password``, ``secret``, the word ``token``, ``api_key``,
            ``access_key``, ``private_key`` or ``credential`` (any case).
    """
    if _SECRET_NAME_RE.search(name):
        warn_user(
            f"hyperparameter {name!r} looks like a secret: hyperparameters are not secret (SageMaker shows them in "
            "DescribeTrainingJob and the console, and the training toolkit prints them in the job's log and writes "
            "them to hyperparameters.json); pass secrets through a secrets service (AWS Secrets Manager, read in the "
            "script) or an environment variable instead",
            HyperparameterWarning,
        )


def _warn_if_option(name: str, value: Any) -> None:
    if isinstance(value, str) and value.startswith("-") and not _NUMBER_RE.match(value):
        warn_user(
            f"hyperparameter {name!r} has a value starting with '-', which your script's argument parser will read "
            f"as an option, not as the value of --{name} (a value such as '--help' makes the script print its help and "
            "the job end Completed without training); rename the value if that is not what you want",
            HyperparameterWarning,
        )


def _holds_dict(value: Any) -> bool:
    if isinstance(value, Mapping):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_dict(item) for item in value)
