"""The sagemaker-tc image's training module (``SAGEMAKER_TRAINING_MODULE=sagemaker_tc_image:main``).

The image keeps the DLC's entry: SageMaker runs ``docker run <image> train``; the sagemaker-training
toolkit's ``train`` reads ``/opt/ml/input/config/*.json`` and calls this module's :func:`main` in
process. It sorts the job into one of four kinds, then hands off to the DLC's own training module
(``SAGEMAKER_TC_BASE_TRAINING_MODULE``, ``sagemaker_pytorch_container.training:main`` on the AWS
PyTorch and Hugging Face DLCs), which picks the runner (one process, or torchrun for
``torch_distributed``) exactly as on the stock DLC:

1. the program is ``sagemaker_tc_launcher.py`` (a job from a ``sagemaker_tc`` estimator): unchanged;
2. the hyperparameters carry a compiler key (``sagemaker_training_compiler_enabled``, ``..._debug_mode``
   or ``..._settings``) but the program is the user's own ``.py`` script (an SMTC-era
   ``CreateTrainingJob`` request, or an SDK v2 estimator given ``image_uri=`` this image): the
   module writes ``sagemaker_tc_image_launcher.py`` into the code directory and makes it the program,
   so the script runs under the compiler launcher with the same arguments;
3. SMTC's ``sagemaker_pytorch_xla_multi_worker_enabled`` is on: the job fails at once with the fix
   (``sagemaker_torch_distributed_enabled``), since the image has no torch_xla;
4. no compiler key: unchanged, the image behaves as the DLC it is built on.

This file is copied into the image's site-packages by the Dockerfiles in ``containers/``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from pathlib import Path

logger = logging.getLogger("sagemaker_tc.image")

BASE_MODULE_ENV = "SAGEMAKER_TC_BASE_TRAINING_MODULE"
DEFAULT_BASE_MODULE = "sagemaker_pytorch_container.training:main"
LAUNCHER_PROGRAM = "sagemaker_tc_launcher.py"  # what sagemaker_tc estimators name as sagemaker_program
IMAGE_LAUNCHER_PROGRAM = "sagemaker_tc_image_launcher.py"  # what this module writes for other jobs
COMPILER_KEYS = (
    "sagemaker_training_compiler_enabled",
    "sagemaker_training_compiler_debug_mode",
    "sagemaker_training_compiler_settings",
)
XLA_KEY = "sagemaker_pytorch_xla_multi_worker_enabled"
TORCH_DISTRIBUTED_KEY = "sagemaker_torch_distributed_enabled"

IMAGE_LAUNCHER_SOURCE = '''"""Written by the sagemaker-tc image: runs {entry} under the compiler launcher."""

import sys

from sagemaker_tc.container.launcher import run

if __name__ == "__main__":
    run({entry_literal}, sys.argv[1:])
'''


try:  # the image installs sagemaker-tc; the fallback keeps this module importable (and testable) without it
    from sagemaker_tc.errors import ImageEntryError
except ImportError:  # pragma: no cover - only outside a sagemaker-tc image

    class ImageEntryError(RuntimeError):
        """The job's hyperparameters ask for something this image cannot run (the message says the fix)."""


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return value is True


def route(params: dict, program: str | None, code_dir: Path) -> str | None:
    """Decide how the job runs; returns the program to run instead of ``program``, or None for unchanged.

    Args:
        params: the toolkit's ``additional_framework_parameters`` (the ``sagemaker_*`` hyperparameters).
        program: the job's ``sagemaker_program``.
        code_dir: the code directory, already holding the job's source.

    Raises:
        ImageEntryError: SMTC's XLA distribution is on (the image has no torch_xla).
    """
    if _truthy(params.get(XLA_KEY)):
        raise ImageEntryError(
            f"{XLA_KEY} (SMTC's distribution={{'pytorchxla': ...}}) is not supported: this image compiles with "
            f"TorchInductor and has no torch_xla; set the hyperparameter {TORCH_DISTRIBUTED_KEY}=true instead "
            "(sagemaker_tc estimators translate 'pytorchxla' to it for you)"
        )
    if not program or program == LAUNCHER_PROGRAM or not any(key in params for key in COMPILER_KEYS):
        return None
    if not program.endswith(".py"):
        logger.warning(
            "sagemaker-tc image: %s is not a Python script, so it runs without the compiler "
            "(the compiler runs inside a Python process)",
            program,
        )
        return None
    source = IMAGE_LAUNCHER_SOURCE.format(entry=program, entry_literal=repr(program))
    (code_dir / IMAGE_LAUNCHER_PROGRAM).write_text(source, encoding="utf-8")
    return IMAGE_LAUNCHER_PROGRAM


def _write_failure(message: str) -> None:
    from sagemaker_training import environment

    failure = Path(environment.output_dir) / "failure"
    if not failure.exists():
        failure.parent.mkdir(parents=True, exist_ok=True)
        failure.write_text(f"ImageEntryError: {message}", encoding="utf-8")


def main() -> None:
    """Route the job (see the module docstring), then run the DLC's own training module.

    Raises:
        ImageEntryError: the job cannot run on this image (written to ``output/failure`` first).
    """
    from sagemaker_training import environment, files

    env = environment.Environment()
    program = env.user_entry_point
    code_dir = Path(environment.code_dir)
    # The toolkit unpacks the source only into an empty code directory, so unpacking it here first
    # changes nothing for the DLC module, which then finds it in place.
    files.download_and_extract(uri=env.module_dir, path=str(code_dir))
    try:
        replacement = route(dict(env.additional_framework_parameters), program, code_dir)
    except ImageEntryError as error:
        _write_failure(str(error))
        raise
    if replacement is None:
        logger.info("sagemaker-tc image: running %s as it is", program)
    else:
        logger.info("sagemaker-tc image: running %s under the compiler launcher (%s)", program, replacement)
        os.environ["SAGEMAKER_PROGRAM"] = replacement  # the toolkit reads it before the hyperparameter
    module_name, _, function = os.environ.get(BASE_MODULE_ENV, DEFAULT_BASE_MODULE).partition(":")
    getattr(importlib.import_module(module_name), function or "main")()
