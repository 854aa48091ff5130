"""Environment variable names a job sets itself, so a user's ``environment=`` cannot.

Three kinds, checked by :func:`check_reserved_names` for both front ends (the estimators and
``ModelTrainer``) before any job starts:

- **Refused**: names the job contract owns (:mod:`sagemaker_tc.contract`). sagemaker-tc's own
  settings (``SM_TRAINING_COMPILER_SETTINGS``, ...) and the job layout the SageMaker toolkit, or
  ModelTrainer's ``environment.py``, writes for the script (``SM_MODEL_DIR``, ``SM_CHANNEL_<NAME>``,
  ``SM_HP_<NAME>``, ...): a user's value would be replaced in the job without a word.
  ``SAGEMAKER_BASE_DIR`` moves the toolkit's ``/opt/ml`` away from where SageMaker mounts the job's
  data (``local_process`` points it at the job folder), so it is refused too.
- **Warned** (:class:`~sagemaker_tc.errors.ReservedEnvironmentWarning`): torchrun's per-process
  names (``RANK``, ``MASTER_ADDR``, ...). SageMaker passes them, and a one-process job sees them as
  given, but torchrun replaces them in each process of a distributed job.
  The toolkit's ``SAGEMAKER_PROGRAM`` (it runs that script instead of the entry point) and
  ``SAGEMAKER_TRAINING_MODULE`` (the image's training module, which runs the compiler's launcher)
  are refused as well.
- Everything else is the user's, including the knobs the launcher never overrides
  (``TORCH_LOGS``, ``TORCHINDUCTOR_CACHE_DIR``, ``SM_TC_HANG_GRACE_S``), with a few values checked
  before the job starts (:func:`check_job_variables`): ``PYTHONHOME`` is refused (the job's Python
  would not find its standard library), ``TORCHINDUCTOR_CACHE_DIR`` must be a folder the compiler
  can write, and ``TORCH_COMPILE_DISABLE=1`` / ``TORCHDYNAMO_DISABLE=1`` with the compiler on are
  warned about (:class:`~sagemaker_tc.errors.ConfigWarning`: the job runs eager).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from sagemaker_tc import contract
from sagemaker_tc.errors import ConfigWarning, EstimatorArgumentError, LauncherError, ReservedEnvironmentWarning
from sagemaker_tc.paths import unwritable_reason
from sagemaker_tc.warn import warn_user

# Set by sagemaker-tc (the SDK, the launcher, the driver) from the config and the job.
OWN_NAMES = frozenset(
    {
        contract.ENV_SETTINGS,
        contract.ENV_CONFIGURED,
        contract.ENV_CACHE_OUTCOME,
        contract.ENV_RANK_STATE_DIR,
        contract.ENV_BASE_DIR,
    }
)
# Written for the script by the SageMaker toolkit (script mode) and ModelTrainer's environment.py.
JOB_LAYOUT_NAMES = frozenset(
    {
        contract.ENV_FRAMEWORK_PARAMS,
        contract.ENV_MODEL_DIR,
        contract.ENV_OUTPUT_DIR,
        contract.ENV_OUTPUT_DATA_DIR,
        contract.ENV_OUTPUT_FAILURE,
        contract.ENV_INPUT_DIR,
        contract.ENV_INPUT_DATA_DIR,
        contract.ENV_INPUT_CONFIG_DIR,
        contract.ENV_HOSTS,
        contract.ENV_CURRENT_HOST,
        contract.ENV_CURRENT_HOST_RANK,
        contract.ENV_HOST_COUNT,
        contract.ENV_NUM_GPUS,
        contract.ENV_NUM_CPUS,
        contract.ENV_NUM_NEURONS,
        contract.ENV_TRAINING_ENV,
        contract.ENV_HPS,
        contract.ENV_CHANNELS,
        contract.ENV_ENTRY_SCRIPT,
        contract.ENV_SOURCE_DIR,
        contract.ENV_DISTRIBUTED_CONFIG,
        contract.ENV_DISTRIBUTED_DRIVER_DIR,
        contract.ENV_CURRENT_INSTANCE_TYPE,
        contract.ENV_RESOURCE_CONFIG,
        contract.ENV_INPUT_DATA_CONFIG,
        contract.ENV_SM_MASTER_ADDR,
        contract.ENV_SM_MASTER_PORT,
        contract.ENV_TRAINING_JOB_NAME,
    }
)
# Read by the SageMaker training toolkit to choose what the job runs (sagemaker_training/params.py):
# ``SAGEMAKER_PROGRAM`` wins over the entry point sent as a hyperparameter, and
# ``SAGEMAKER_TRAINING_MODULE`` replaces the image's module (which starts the compiler's launcher).
TOOLKIT_PROGRAM_NAMES = frozenset({"SAGEMAKER_PROGRAM", "SAGEMAKER_TRAINING_MODULE"})
# Folders of virtual file systems: no compiler output can be written there.
_VIRTUAL_ROOTS = ("/proc", "/sys", "/dev")
JOB_LAYOUT_PREFIXES = (contract.ENV_HP_PREFIX, contract.ENV_CHANNEL_PREFIX)
# torchrun's per-process variables (torch.distributed.run), set for each rank of a distributed job.
TORCHRUN_NAMES = frozenset(
    {
        contract.ENV_RANK,
        contract.ENV_LOCAL_RANK,
        contract.ENV_WORLD_SIZE,
        contract.ENV_TORCH_MASTER_ADDR,
        contract.ENV_TORCH_MASTER_PORT,
        contract.ENV_USE_AGENT_STORE,
    }
)

# CreateTrainingJob Environment (SageMaker API reference): at most 100 entries, names matching
# [a-zA-Z_][a-zA-Z0-9_]* of at most 512 characters, values of at most 512 characters.
_ENV_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")
MAX_ENV_ENTRIES = 100
MAX_ENV_CHARS = contract.MAX_ENVIRONMENT_VALUE_CHARS


def reserved_reason(name: str) -> str | None:
    """Why a job sets ``name`` itself (None: the name is the user's)."""
    if name in OWN_NAMES:
        return "sagemaker-tc sets it for every job (settings and the job's folders come from compiler_config)"
    if name in JOB_LAYOUT_NAMES or name.startswith(JOB_LAYOUT_PREFIXES):
        return (
            "the SageMaker training toolkit (or ModelTrainer's driver) writes it for your script from the job "
            "itself (folders, hosts, channels, hyperparameters)"
        )
    if name in TOOLKIT_PROGRAM_NAMES:
        return (
            "the SageMaker training toolkit reads it to choose what the job runs: it would run instead of your "
            "entry point and the compiler's launcher (give the script as entry_point)"
        )
    return None


def check_reserved_names(names: Iterable[str]) -> None:
    """Refuse the names the job contract owns; warn for torchrun's.

    Raises:
        EstimatorArgumentError: a name :func:`reserved_reason` gives a reason for.

    Warns:
        ReservedEnvironmentWarning: a torchrun per-process name.
    """
    for name in names:
        reason = reserved_reason(name)
        if reason is not None:
            raise EstimatorArgumentError(
                f"environment variable {name!r} is reserved: {reason}, so your value would be replaced in the job; "
                "remove it (pass settings as hyperparameters, or under a name of your own)"
            )
        if name in TORCHRUN_NAMES:
            warn_user(
                f"environment variable {name!r} is one torchrun sets for each process of a distributed job, where it "
                "replaces your value; a one-process job sees it as given",
                ReservedEnvironmentWarning,
            )


def check_job_environment(
    environment: Any, *, cloud: bool, local_process: bool, compiler_enabled: bool
) -> dict[str, str]:
    """A job's plain-string variables under every rule both front ends apply, in one order: names,
    values and the API's limits (:func:`check_environment`); for ``local_process``, this machine's
    ``PATH`` kept (:func:`check_local_process_path`) and the API's lengths
    (:func:`check_environment_limits`); then the values that would break the job late
    (:func:`check_job_variables`). Returns the variables as a dict of str -> str.

    Raises:
        EstimatorArgumentError: what those functions refuse.

    Warns:
        ReservedEnvironmentWarning, ConfigWarning: as those functions warn.
    """
    checked = check_environment(environment, cloud=cloud)
    if local_process:
        check_local_process_path(checked, os.environ.get("PATH"))
        check_environment_limits(checked)
    check_job_variables(checked, compiler_enabled=compiler_enabled, local_process=local_process)
    return checked


def check_job_variables(environment: Mapping[str, Any], *, compiler_enabled: bool, local_process: bool) -> None:
    """Values of the user's variables that would break the job late or switch the compiler off
    (plain strings only; a pipeline variable is resolved by SageMaker).

    Raises:
        EstimatorArgumentError: ``PYTHONHOME`` is set (it replaces where the job's Python finds its
            standard library; the toolkit and the script fail to start), or ``TORCHINDUCTOR_CACHE_DIR``
            is a folder the compiler cannot write (a virtual file system such as ``/proc``; for
            ``local_process`` jobs, any folder of this machine nothing can be created in).

    Warns:
        ConfigWarning: ``TORCH_COMPILE_DISABLE=1`` or ``TORCHDYNAMO_DISABLE=1`` with the compiler on.
    """
    if "PYTHONHOME" in environment:
        raise EstimatorArgumentError(
            "environment variable 'PYTHONHOME' replaces where the job's Python finds its standard library: the "
            "training toolkit and your script would fail to start. Remove it (add folders with PYTHONPATH instead)"
        )
    folder = environment.get(contract.ENV_INDUCTOR_CACHE_DIR)
    if isinstance(folder, str) and folder:
        reason = _inductor_dir_reason(folder, local_process=local_process)
        if reason is not None:
            raise EstimatorArgumentError(
                f"environment variable {contract.ENV_INDUCTOR_CACHE_DIR!r} = {folder[:200]!r}: {reason}. Give a "
                "folder the job can write, or leave it out (the job then compiles into a folder of its own)"
            )
    for name in contract.ENV_COMPILE_DISABLE:
        if compiler_enabled and environment.get(name) == "1":
            warn_user(
                f"environment variable {name}=1 switches torch.compile off in the job: it wins over compiler_config, "
                "and the job runs eager (its report says compiled: false and names the variable). Remove it to compile",
                ConfigWarning,
            )


def _inductor_dir_reason(folder: str, *, local_process: bool) -> str | None:
    """Why the compiler cannot write under ``folder`` (None: it can, or cannot be told here)."""
    path = PurePosixPath(posixpath.normpath(folder))
    if any(path == PurePosixPath(root) or PurePosixPath(root) in path.parents for root in _VIRTUAL_ROOTS):
        return "a folder of a virtual file system, where the compiler cannot write its files"
    if local_process:
        return unwritable_reason(folder)
    return None


def check_environment_limits(environment: Mapping[str, Any]) -> None:
    """A ``local_process`` job's ``environment`` within CreateTrainingJob's limits, 512 characters per
    name and per value, so a job that runs here runs on SageMaker unchanged. ``PATH`` is left out:
    locally it must keep this machine's ``PATH`` (:func:`check_local_process_path`), whose
    length is the machine's.

    Raises:
        EstimatorArgumentError: a longer name or value (the message gives the length, never the value).
    """
    limit = MAX_ENV_CHARS
    for name, value in environment.items():
        if name == "PATH" or not isinstance(name, str) or not isinstance(value, str):
            continue
        for part, text in (("name", name), ("value", value)):
            if len(text) > limit:
                shown = f"{name[:40]!r}... ({len(name)} characters)" if part == "name" else repr(name)
                raise EstimatorArgumentError(
                    f"environment variable {shown}: its {part} is {len(text)} characters; SageMaker training jobs "
                    f"take names and values of at most {limit}, and local_process keeps to that so the job runs on "
                    "SageMaker unchanged; put a long value in a file in source_dir and pass the file's name"
                )


def check_environment(environment: Any, *, cloud: bool) -> dict[str, str]:
    """Return ``environment`` as a dict of str -> str (``{}`` for None).

    Names follow CreateTrainingJob's rule (``[a-zA-Z_][a-zA-Z0-9_]*``) in every mode, so a job that
    runs locally runs on SageMaker unchanged; values may not hold a NUL byte (no process environment
    can). SageMaker jobs also get the API's limits: 100 variables, 512 characters per name and value.

    Names the job sets itself are refused, or warned about (:func:`check_reserved_names`).

    Raises:
        EstimatorArgumentError: not a mapping of strings to strings, a name or value those rules
            refuse, or a reserved name (``SM_MODEL_DIR``, ``SAGEMAKER_BASE_DIR``, ...).

    Warns:
        ReservedEnvironmentWarning: a name torchrun sets in each process (``RANK``, ...).
    """
    if environment is None:
        return {}
    if not isinstance(environment, Mapping):
        raise EstimatorArgumentError(f"environment must be a dict of str -> str, got {type(environment).__name__}")
    for name, value in environment.items():
        # Name the key and the types, never the value (it may be a secret).
        if not isinstance(name, str):
            raise EstimatorArgumentError(
                f"environment must be a dict of str -> str: a key is of type {type(name).__name__}; variable names are "
                "strings of letters, digits and '_' (e.g. 'NUM_LABELS')"
            )
        if not isinstance(value, str):
            raise EstimatorArgumentError(
                f"environment must be a dict of str -> str: {name!r} has a value of type {type(value).__name__}; pass "
                "every value as a string (e.g. str(8080))"
            )
    for name, value in environment.items():
        if not _ENV_NAME_RE.match(name):
            raise EstimatorArgumentError(
                f"environment variable name {name!r} is not accepted: SageMaker takes names of letters, digits and "
                "'_' that do not start with a digit ([a-zA-Z_][a-zA-Z0-9_]*)"
            )
        if "\x00" in value:
            raise EstimatorArgumentError(f"environment variable {name!r} holds a NUL byte, which no process accepts")
        _check_known_value(name, value)
        if cloud and max(len(name), len(value)) > MAX_ENV_CHARS:
            raise EstimatorArgumentError(
                f"environment variable {name!r}: SageMaker training jobs take names and values of at most "
                f"{MAX_ENV_CHARS} characters"
            )
    check_reserved_names(environment)
    if cloud and len(environment) > MAX_ENV_ENTRIES:
        raise EstimatorArgumentError(
            f"environment has {len(environment)} variables; SageMaker training jobs take at most {MAX_ENV_ENTRIES}"
        )
    return dict(environment)


def check_local_process_path(environment: Mapping[str, Any], machine_path: str | None) -> None:
    """A ``PATH`` in a ``local_process`` job's environment replaces this machine's for the job's
    processes (the toolkit, torchrun, the compilers the script runs): it must keep every folder of
    ``machine_path`` (this machine's ``PATH``), extending it rather than replacing it.

    Raises:
        EstimatorArgumentError: ``environment["PATH"]`` lacks a folder of ``machine_path`` (the job
            would fail with exit 127, "command not found"). The value is never shown.
    """
    given = environment.get("PATH")
    if not isinstance(given, str) or machine_path is None:
        return
    kept = set(given.split(os.pathsep))
    missing = [folder for folder in machine_path.split(os.pathsep) if folder and folder not in kept]
    if missing:
        raise EstimatorArgumentError(
            f"environment['PATH'] leaves out {len(missing)} folder(s) of this machine's PATH: a local_process job "
            "runs this machine's programs (the training toolkit, torchrun, compilers), and without them it fails "
            "with exit 127 (command not found). Extend PATH instead, e.g. '/my/bin:' + os.environ['PATH'], or "
            "leave it out (on SageMaker, environment['PATH'] replaces the container's PATH)"
        )


def _check_known_value(name: str, value: str) -> None:
    """Variables sagemaker-tc reads in the job, checked now rather than after the job started."""
    if name == contract.ENV_HANG_GRACE:
        from sagemaker_tc.container.watchdog import grace_seconds

        try:
            grace_seconds(None, {name: value})
        except LauncherError as error:
            raise EstimatorArgumentError(str(error)) from None
