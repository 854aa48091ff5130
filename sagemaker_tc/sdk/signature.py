"""SDK v2's estimator signature as sagemaker-tc takes it: the positional order, and the arguments
it does not take, named all at once with what to do instead.

sagemaker 2.x defines ``HuggingFace(py_version, entry_point, transformers_version,
tensorflow_version, pytorch_version, source_dir, hyperparameters, image_uri, distribution,
compiler_config, **kwargs)`` and ``PyTorch(entry_point, framework_version, py_version, source_dir,
hyperparameters, image_uri, distribution, compiler_config, ...)``. A notebook that passes them by
position runs unchanged; past those, arguments are keyword-only, as in SDK v2.

SMTC jobs were written against SageMaker Python SDK v2, whose estimators take many more arguments
(``EstimatorBase`` and ``Framework`` in sagemaker 2.x). Moving such a job should cost one error
listing every argument to change, not one ``TypeError`` per run (:func:`check_unsupported`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError

HUGGINGFACE_ORDER = (
    "py_version",
    "entry_point",
    "transformers_version",
    "tensorflow_version",
    "pytorch_version",
    "source_dir",
    "hyperparameters",
    "image_uri",
    "distribution",
    "compiler_config",
)
PYTORCH_ORDER = (
    "entry_point",
    "framework_version",
    "py_version",
    "source_dir",
    "hyperparameters",
    "image_uri",
    "distribution",
    "compiler_config",
)


def bind_positional(estimator: str, order: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict:
    """The keyword arguments with ``args`` named by SDK v2's ``order``.

    One positional argument with no ``entry_point=`` keyword is the entry point, as sagemaker-tc's
    own ``HuggingFace("train.py", ...)`` has always read it (SDK v2's ``HuggingFace`` puts
    ``py_version`` first). A ``tensorflow_version`` of None given by position is dropped.

    Raises:
        TypeError: more positional arguments than SDK v2 takes, or one given both by position and
            by keyword; the message says to use keywords.
    """
    if not args:
        return dict(kwargs)
    if len(args) == 1 and "entry_point" not in kwargs:
        return {"entry_point": args[0], **kwargs}
    if len(args) > len(order):
        raise TypeError(
            f"{estimator} takes at most {len(order)} positional arguments, in SDK v2's order ({', '.join(order)}), "
            f"got {len(args)}: pass the others by keyword"
        )
    bound = dict(zip(order, args, strict=False))  # fewer args than names: the rest stay keywords
    if bound.get("tensorflow_version", "") is None:
        del bound["tensorflow_version"]
    clash = sorted(set(bound) & set(kwargs))
    if clash:
        raise TypeError(
            f"{estimator} got {', '.join(clash)} both by position and by keyword: pass each argument once, by keyword"
        )
    return {**bound, **kwargs}


# SDK v2 arguments sagemaker-tc does not take, each with what to do. (Every other EstimatorBase and
# Framework argument is taken: :data:`sagemaker_tc.sdk.job_settings.SETTING_NAMES`.)
ADVICE = {
    "instance_groups": "heterogeneous clusters are not supported (nor were they with SMTC): use instance_type "
    "and instance_count",
    "tensorflow_version": "sagemaker-tc compiles PyTorch; TensorFlow jobs are not supported",
    "framework_version": "HuggingFace takes transformers_version and pytorch_version, not framework_version",
    "transformers_version": "PyTorch takes framework_version; transformers_version is HuggingFace's",
    "pytorch_version": "PyTorch takes framework_version; pytorch_version is HuggingFace's",
    "git_config": "check the repository out locally and pass its folder as source_dir",
    "dependencies": "put the folders your script needs inside source_dir",
    "training_recipe": "SageMaker HyperPod recipes run their own launcher, not the compiler's: use entry_point",
    "recipe_overrides": "SageMaker HyperPod recipes run their own launcher, not the compiler's: use entry_point",
}


# SDK v2 arguments sagemaker-tc does not take, whose SDK v2 default (None) or an empty value asks for
# nothing: a notebook that spells the default out (``dependencies=[]``, ``git_config=None``) is accepted.
ASKS_NOTHING_WHEN_EMPTY = (
    "instance_groups",
    "git_config",
    "dependencies",
    "training_recipe",
    "recipe_overrides",
    "tensorflow_version",
)


def _asks_nothing(value: Any) -> bool:
    return value is None or (type(value) in (list, tuple, dict) and len(value) == 0)


def drop_unasked(unsupported: dict[str, Any]) -> list[str]:
    """Remove from ``unsupported`` (in place) the arguments of :data:`ASKS_NOTHING_WHEN_EMPTY` given
    as None or empty, which ask for nothing; returns their names."""
    dropped = [name for name in ASKS_NOTHING_WHEN_EMPTY if name in unsupported and _asks_nothing(unsupported[name])]
    for name in dropped:
        del unsupported[name]
    return dropped


def _advice(name: str, accepted: Sequence[str]) -> str:
    if name in ADVICE:
        return ADVICE[name]
    close = difflib.get_close_matches(name, accepted, n=1)
    return f"unknown: did you mean {close[0]}?" if close else "unknown"


def check_unsupported(estimator: str, unsupported: Mapping[str, Any], accepted: Sequence[str]) -> None:
    """Refuse every argument the estimator does not take, all in one error.

    Args:
        estimator: the estimator's class name.
        unsupported: the keyword arguments no parameter took.
        accepted: the estimator's parameter names.

    Raises:
        EstimatorArgumentError: ``unsupported`` is not empty; the message names each argument with
            what to do, then the accepted arguments.
    """
    if not unsupported:
        return
    listed = "; ".join(f"{name} ({_advice(name, accepted)})" for name in unsupported)
    raise EstimatorArgumentError(
        f"{estimator} does not take {len(unsupported)} of the arguments given: {listed}. "
        f"The arguments it takes: {', '.join(accepted)}"
    )
