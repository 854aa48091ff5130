"""SDK v2's positional argument order for the estimators.

sagemaker 2.x defines ``HuggingFace(py_version, entry_point, transformers_version,
tensorflow_version, pytorch_version, source_dir, hyperparameters, image_uri, distribution,
compiler_config, **kwargs)`` and ``PyTorch(entry_point, framework_version, py_version, source_dir,
hyperparameters, image_uri, distribution, compiler_config, ...)``. A notebook that passes them by
position runs unchanged; past those, arguments are keyword-only, as in SDK v2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
