"""The driver SDK v3's ModelTrainer runs when the compiler is on: ModelTrainer's environment in, the launcher out.

``sagemaker_tc.ModelTrainer`` installs :class:`~sagemaker_tc.sdk.v3.driver.TrainingCompilerDriver` as
the trainer's ``distributed`` config. sagemaker-train then ships this folder in its ``sm_drivers``
channel, and its ``sm_train.sh`` runs ``python .../sm_drivers/distributed_drivers/sagemaker_tc_driver.py``
instead of its own ``basic_script_driver.py`` or ``torchrun_driver.py``. No sagemaker-training toolkit
runs in that path, so the driver does the toolkit's part that the launcher relies on:

1. the script's command line: every hyperparameter as ``--name value``, the value exactly as the
   request sent it (``input/config/hyperparameters.json``: ModelTrainer sends strings as they are and
   other values JSON-encoded), except ``sagemaker_*`` names, which never reach the script (as with
   the toolkit);
2. ``SM_FRAMEWORK_PARAMS``: those ``sagemaker_*`` hyperparameters, JSON-decoded, plus torchrun's
   switch and processes per host from ``SM_DISTRIBUTED_CONFIG`` (what the estimator path sends as
   hyperparameters);
3. ``PYTHONPATH``: this folder (which holds the container side of ``sagemaker_tc``) first, so
   torchrun's rank processes import it too;
4. then the launcher runs the entry script (:func:`sagemaker_tc.container.launcher.run`) as the
   process's program: the same log lines, compiler session, ``report.json``, failure file, metric
   lines, watchdog and teardown (the script's globals live until the interpreter shuts down) as the
   estimator path;
5. when it ends well, writes the empty ``output/success`` the toolkit writes.

The compiler settings come from ``SM_TRAINING_COMPILER_SETTINGS`` (the trainer's ``environment``).
Everything here reads paths under ``SAGEMAKER_BASE_DIR`` (default ``/opt/ml``), so the docker-free
``local_process`` mode runs this same driver in a job folder on the host.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from sagemaker_tc import contract
from sagemaker_tc.container import launcher
from sagemaker_tc.errors import LauncherError, SagemakerTCError

logger = logging.getLogger("sagemaker_tc.driver")

DEFAULT_BASE_DIR = "/opt/ml"


def read_hyperparameters(environ: Mapping[str, str]) -> dict[str, Any]:
    """The request's hyperparameters, as sent (``<base>/input/config/hyperparameters.json``).

    Raises:
        LauncherError: the file is missing or is not a JSON object.
    """
    path = Path(environ.get(contract.ENV_BASE_DIR) or DEFAULT_BASE_DIR) / "input" / "config" / "hyperparameters.json"
    try:
        hyperparameters = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise LauncherError(f"cannot read the job's hyperparameters from {path}: {error}") from None
    if not isinstance(hyperparameters, dict):
        raise LauncherError(f"{path} is not a JSON object of hyperparameters")
    return hyperparameters


def script_arguments(hyperparameters: Mapping[str, Any]) -> list[str]:
    """``--name value`` for every hyperparameter but the ``sagemaker_*`` ones, in the request's order."""
    arguments: list[str] = []
    for name, value in hyperparameters.items():
        if not name.startswith(contract.HP_TOOLKIT_PREFIX):
            arguments += [f"--{name}", contract.value_text(value)]
    return arguments


def framework_params(hyperparameters: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """What the toolkit would have put in ``SM_FRAMEWORK_PARAMS``: the ``sagemaker_*`` hyperparameters
    (decoded), and the distribution keys from ``SM_DISTRIBUTED_CONFIG``.

    Raises:
        LauncherError: ``SM_DISTRIBUTED_CONFIG`` is set but is not a JSON object.
    """
    params = {
        name: contract.decoded_value(value)
        for name, value in hyperparameters.items()
        if name.startswith(contract.HP_TOOLKIT_PREFIX)
    }
    distributed = contract.decoded_value(environ.get(contract.ENV_DISTRIBUTED_CONFIG) or "{}")
    if not isinstance(distributed, dict):
        raise LauncherError(f"{contract.ENV_DISTRIBUTED_CONFIG} is not a JSON object: {distributed!r}")
    if distributed.get(contract.DRIVER_TORCHRUN):
        params[contract.HP_TORCH_DISTRIBUTED] = True
        if distributed.get(contract.DRIVER_PROCESSES):
            params[contract.HP_PROCESSES_PER_HOST] = int(distributed[contract.DRIVER_PROCESSES])
    return params


def prepare(environ: MutableMapping[str, str], driver_dir: Path) -> tuple[str, list[str]]:
    """Set up ``environ`` for the launcher, as the toolkit would have; returns the entry script and
    the script's arguments.

    Raises:
        LauncherError: no compiler settings in the environment (the driver ran outside
            ``sagemaker_tc.ModelTrainer``), no entry script, or unreadable hyperparameters.
        ConfigError: the settings are malformed.
    """
    settings = contract.settings_from_environment({contract.ENV_SETTINGS: environ.get(contract.ENV_SETTINGS, "")})
    if settings is None:
        raise LauncherError(
            f"no {contract.ENV_SETTINGS} in the environment: this driver is installed by sagemaker_tc.ModelTrainer "
            "(compiler_config=TrainingCompilerConfig()), which sets it; do not use it as a distributed config alone"
        )
    entry_script = settings.entry_point or environ.get(contract.ENV_ENTRY_SCRIPT)
    if not entry_script:
        raise LauncherError(f"no entry script: neither the compiler settings nor {contract.ENV_ENTRY_SCRIPT} name one")
    hyperparameters = read_hyperparameters(environ)
    environ[contract.ENV_FRAMEWORK_PARAMS] = json.dumps(framework_params(hyperparameters, environ))
    path = environ.get(contract.ENV_PYTHONPATH)
    environ[contract.ENV_PYTHONPATH] = os.pathsep.join([str(driver_dir), *([path] if path else [])])
    dropped = [name for name in hyperparameters if name.startswith(contract.HP_TOOLKIT_PREFIX)]
    if dropped:
        logger.info("Hyperparameters kept from the script's command line (as the toolkit does): %s", dropped)
    return entry_script, script_arguments(hyperparameters)


def main() -> None:
    """Entry of ``sagemaker_tc_driver.py``: prepare the environment, then run the launcher.

    Raises:
        LauncherError, ConfigError: see :func:`prepare` (the failure file is written first).
        BaseException: whatever the user's script raises (the launcher writes the failure file).
    """
    launcher.setup_logging()
    try:
        entry_script, arguments = prepare(os.environ, Path(sys.argv[0]).resolve().parent)
    except SagemakerTCError as error:
        launcher.write_failure(error, os.environ)
        raise
    logger.info("sagemaker-tc driver: running %s with %d arguments", entry_script, len(arguments))
    launcher.run(entry_script, arguments, program=True)  # the driver is the process's program
    if os.environ.get(contract.ENV_OUTPUT_DIR):
        Path(os.environ[contract.ENV_OUTPUT_DIR], "success").touch()
