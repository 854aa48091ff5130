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
- Everything else is the user's, including the knobs the launcher never overrides
  (``TORCH_LOGS``, ``TORCHINDUCTOR_CACHE_DIR``, ``SM_TC_HANG_GRACE_S``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sagemaker_tc import contract
from sagemaker_tc.errors import EstimatorArgumentError, ReservedEnvironmentWarning
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


def reserved_reason(name: str) -> str | None:
    """Why a job sets ``name`` itself (None: the name is the user's)."""
    if name in OWN_NAMES:
        return "sagemaker-tc sets it for every job (settings and the job's folders come from compiler_config)"
    if name in JOB_LAYOUT_NAMES or name.startswith(JOB_LAYOUT_PREFIXES):
        return (
            "the SageMaker training toolkit (or ModelTrainer's driver) writes it for your script from the job "
            "itself (folders, hosts, channels, hyperparameters)"
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
