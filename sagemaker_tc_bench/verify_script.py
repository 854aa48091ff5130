"""``sagemaker-tc verify --script PATH.py:FUNCTION``: verify a model the user builds in a script.

:func:`load_script` imports the script (or module) and calls the function; :func:`verify_script`
runs :func:`sagemaker_tc_bench.verify.verify_training` on what it built.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker_tc_bench.errors import ScriptLoadError
from sagemaker_tc_bench.verify import LossFn, VerifyResult, verify_training

if TYPE_CHECKING:
    import torch


def load_script(target: str) -> tuple[torch.nn.Module, list[Any], LossFn | None]:
    """Load ``"path/to/file.py:function"`` (or ``"package.module:function"``), call the function
    with no arguments, and return what it built.

    The function returns one of:

    - ``(model, batch)``: the batch is repeated every step;
    - ``(model, batch, loss_fn)``: ``loss_fn(model, batch) -> scalar loss`` computes the loss;
    - a dict with ``"model"``, ``"batch"`` or ``"batches"`` (a list, cycled), and optionally ``"loss_fn"``.

    Without ``loss_fn`` the loss is :func:`~sagemaker_tc.compiler.loss.compute_loss`'s. Seed torch inside
    the function if its randomness matters; verify copies the model, so it is built once.

    Raises:
        ScriptLoadError: bad ``target``, missing file/module/function, the function raised, or it
            returned something else.
    """
    path_part, sep, function_name = target.rpartition(":")
    if not sep or not path_part or not function_name.isidentifier():
        raise ScriptLoadError(f"--script must be PATH.py:FUNCTION or MODULE:FUNCTION (got {target!r})")
    module = _import(path_part)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ScriptLoadError(f"{path_part} has no function {function_name!r}")
    try:
        built = function()
    except Exception as error:
        raise ScriptLoadError(f"{target}() raised {type(error).__name__}: {error}") from error
    return _unpack(target, built)


def _import(path_part: str) -> Any:
    """The module at ``path_part``: a ``.py`` file (or an existing path), else an importable module.

    Raises:
        ScriptLoadError: the file is missing, cannot be loaded, raises on import, or the module
            cannot be imported.
    """
    if path_part.endswith(".py") or Path(path_part).exists():
        path = Path(path_part).resolve()
        if not path.is_file():
            raise ScriptLoadError(f"script {path} does not exist")
        module_name = f"_sagemaker_tc_verify_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise ScriptLoadError(f"cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:
            raise ScriptLoadError(f"importing {path} raised {type(error).__name__}: {error}") from error
    else:
        if not all(part.isidentifier() for part in path_part.split(".")):
            raise ScriptLoadError(
                f"--script {path_part!r}: no such .py file, and not a module name (dotted Python names, e.g. "
                "my_models.bert); give PATH.py:FUNCTION with an existing file, or MODULE:FUNCTION"
            )
        try:
            module = importlib.import_module(path_part)
        except ImportError as error:
            raise ScriptLoadError(f"cannot import module {path_part!r}: {error}") from error
    return module


def _unpack(target: str, built: Any) -> tuple[torch.nn.Module, list[Any], LossFn | None]:
    """``(model, batches, loss_fn)`` from what the script's function returned.

    Raises:
        ScriptLoadError: it returned something else.
    """
    import torch

    loss_fn = None
    if isinstance(built, Mapping):
        model = built.get("model")
        batches = built.get("batches") or ([built["batch"]] if "batch" in built else None)
        loss_fn = built.get("loss_fn")
    elif isinstance(built, tuple) and len(built) in (2, 3):
        model, batches = built[0], [built[1]]
        loss_fn = built[2] if len(built) == 3 else None
    else:
        model, batches = None, None
    if not isinstance(model, torch.nn.Module) or not batches or (loss_fn is not None and not callable(loss_fn)):
        raise ScriptLoadError(
            f"{target}() must return (model, batch), (model, batch, loss_fn) or a dict with 'model', "
            f"'batch' or 'batches', optional 'loss_fn'; got {type(built).__name__}"
        )
    return model, list(batches), loss_fn


def verify_script(target: str, **kwargs: Any) -> VerifyResult:
    """:func:`verify_training` on what ``target``'s function builds (see :func:`load_script`).

    Raises:
        ScriptLoadError: see :func:`load_script`; and what :func:`verify_training` raises.
    """
    model, batches, loss_fn = load_script(target)
    return verify_training(model, batches, loss_fn=loss_fn, name=target, **kwargs)
