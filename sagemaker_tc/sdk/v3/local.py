"""``Compute(instance_type="local_process")`` for SDK v3's ModelTrainer: the job on this machine, no Docker.

The same compiler driver a SageMaker job runs (:mod:`sagemaker_tc.container.modeltrainer`), in the
same job layout as the estimators' ``local_process`` (:mod:`sagemaker_tc.sdk.local.process`: one
``/opt/ml``-style folder per host, channels linked, artifacts tarred, a failed host failing the
job), laid out as ModelTrainer's container sees it: the code in ``input/data/code``, the driver in
``input/data/sm_drivers/distributed_drivers``, and the environment sagemaker-train's
``environment.py`` writes (``SM_HPS``, ``SM_HP_*``, ``SM_CHANNEL_*``, ``SM_ENTRY_SCRIPT``,
``SM_DISTRIBUTED_CONFIG``, ...), with this machine's paths instead of ``/opt/ml``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker.core.shapes import Channel

from sagemaker_tc import contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import ChannelNotFoundError
from sagemaker_tc.sdk.channels import check_channels
from sagemaker_tc.sdk.job_paths import check_local_checkpoints, is_synced_locally, local_path
from sagemaker_tc.sdk.job_status import LocalJobResult
from sagemaker_tc.sdk.local import process as local_process
from sagemaker_tc.sdk.local.docker import check_docker as check_docker  # the local_container mode's check
from sagemaker_tc.sdk.local.hosts import HostCommand, free_port
from sagemaker_tc.sdk.request import TrainingJobRequest, build_request, make_job_name
from sagemaker_tc.sdk.source_tree import copy_entries, mark_job_folder
from sagemaker_tc.sdk.v3 import checks
from sagemaker_tc.sdk.v3.driver import driver_folder

if TYPE_CHECKING:  # run() reads sagemaker-train's own fields only: never sagemaker_tc's subclass (it calls run())
    from sagemaker.train.model_trainer import ModelTrainer

logger = logging.getLogger(__name__)
NETWORK_INTERFACE = "lo"  # what local_process's resourceconfig.json names


def input_channels(*configs: list[Any] | None) -> dict[str, str]:
    """Channel name -> ``file://`` URI from ModelTrainer inputs (``InputData`` with a local path, or
    a ``Channel`` with a file-system source); later lists win, as in ``train(input_data_config=...)``.

    Raises:
        ChannelNotFoundError: an S3 or other non-local source, or a path that does not exist.
    """
    paths: dict[str, str] = {}
    for config in configs:
        for item in config or []:
            source = item.data_source
            if isinstance(item, Channel):
                source = getattr(source.file_system_data_source, "directory_path", None)
            if not isinstance(source, (str, os.PathLike)) or str(source).startswith("s3://"):
                raise ChannelNotFoundError(
                    f"channel {item.channel_name!r}: instance_type='local_process' reads local folders or files, got "
                    f"{source!r} (download S3 data first, or run a SageMaker training job)"
                )
            paths[item.channel_name] = str(source)
    return check_channels(paths, cloud=False)


def checkpoint_location(trainer: ModelTrainer) -> tuple[str | None, str | None]:
    """``(location, container folder)`` of the trainer's ``CheckpointConfig`` that this job syncs, as
    the estimators' ``checkpoint_s3_uri``/``checkpoint_local_path`` in ``local_process``
    (:mod:`~sagemaker_tc.sdk.local.checkpoints`): a local folder (``file://`` URI or path) is synced
    with each host's folder; an ``s3://`` one, and managed spot training, apply on SageMaker only (logged).

    Raises:
        EstimatorArgumentError: a synced location with a ``local_path`` outside ``/opt/ml``.
    """
    config = trainer.checkpoint_config
    cloud_only = []
    if getattr(trainer.compute, "enable_managed_spot_training", None):
        cloud_only.append("Compute(enable_managed_spot_training=True)")
    if getattr(trainer.stopping_condition, "max_wait_time_in_seconds", None):
        cloud_only.append("StoppingCondition(max_wait_time_in_seconds=...)")
    location = str(config.s3_uri) if config is not None and config.s3_uri else None
    if location is not None and not is_synced_locally(location):
        cloud_only.append(f"CheckpointConfig(s3_uri={location!r})")
        location = None
    if cloud_only:
        logger.warning(
            "%s: applies on SageMaker only; this local_process job runs without it (a local folder as "
            "CheckpointConfig.s3_uri is synced)",
            ", ".join(cloud_only),
        )
    if location is None:
        return None, None
    local_folder = str(config.local_path) if config.local_path else None
    check_local_checkpoints(location, local_folder)
    return location, local_folder


def _gpu_count() -> int:
    """GPUs on this machine as ``nvidia-smi`` lists them (0 without it), as ModelTrainer's environment counts."""
    try:
        listed = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU ")) if listed.returncode == 0 else 0


class _Hosts:
    """Each host's ModelTrainer environment and command, for :func:`local_process.run_job`."""

    def __init__(self, request: TrainingJobRequest, entry_script: str, distributed: dict[str, Any]) -> None:
        self.request, self.entry_script, self.distributed = request, entry_script, distributed
        self.hosts = local_process.hosts_for(request)
        self.master_port, self.gpus = str(free_port()), _gpu_count()

    def environment(self, job_dir: Path, host: str) -> dict[str, str]:
        """The variables sagemaker-train's ``environment.py`` sets, for ``host`` in ``job_dir``."""
        data_dir, config_dir = job_dir / "input" / "data", job_dir / "input" / "config"
        channels = [channel.channel_name for channel in self.request.input_data_config]
        hyperparameters = {name: contract.decoded_value(text) for name, text in self.request.hyper_parameters.items()}
        instance_type = self.request.resource_config.instance_type
        env: dict[str, Any] = {
            contract.ENV_BASE_DIR: str(job_dir),
            contract.ENV_MODEL_DIR: str(job_dir / "model"),
            contract.ENV_INPUT_DIR: str(job_dir / "input"),
            contract.ENV_INPUT_DATA_DIR: str(data_dir),
            contract.ENV_INPUT_CONFIG_DIR: str(config_dir),
            contract.ENV_OUTPUT_DIR: str(job_dir / "output"),
            contract.ENV_OUTPUT_FAILURE: str(job_dir / "output" / "failure"),
            contract.ENV_OUTPUT_DATA_DIR: str(job_dir / "output" / "data"),
            contract.ENV_LOG_LEVEL: logging.INFO,
            contract.ENV_SM_MASTER_ADDR: "127.0.0.1",
            contract.ENV_SM_MASTER_PORT: self.master_port,
            contract.ENV_SOURCE_DIR: str(data_dir / contract.CHANNEL_CODE),
            contract.ENV_ENTRY_SCRIPT: self.entry_script,
            contract.ENV_DISTRIBUTED_DRIVER_DIR: str(data_dir / contract.CHANNEL_DRIVERS / contract.DRIVERS_SUBDIR),
            contract.ENV_DISTRIBUTED_CONFIG: self.distributed,
            contract.ENV_CHANNELS: channels,
            contract.ENV_HPS: hyperparameters,
            contract.ENV_CURRENT_HOST: host,
            contract.ENV_CURRENT_INSTANCE_TYPE: instance_type,
            contract.ENV_HOSTS: self.hosts,
            contract.ENV_NETWORK_INTERFACE_NAME: NETWORK_INTERFACE,
            contract.ENV_HOST_COUNT: len(self.hosts),
            contract.ENV_CURRENT_HOST_RANK: self.hosts.index(host),
            contract.ENV_NUM_CPUS: os.cpu_count() or 1,
            contract.ENV_NUM_GPUS: self.gpus,
            contract.ENV_NUM_NEURONS: 0,
            contract.ENV_RESOURCE_CONFIG: json.loads((config_dir / "resourceconfig.json").read_text(encoding="utf-8")),
            contract.ENV_INPUT_DATA_CONFIG: json.loads(
                (config_dir / "inputdataconfig.json").read_text(encoding="utf-8")
            ),
            contract.ENV_TRAINING_ENV: {
                "channel_input_dirs": {name: str(data_dir / name) for name in channels},
                "current_host": host,
                "hosts": self.hosts,
                "hyperparameters": hyperparameters,
                "job_name": self.request.training_job_name,
                "model_dir": str(job_dir / "model"),
                "output_data_dir": str(job_dir / "output" / "data"),
            },
        }
        env.update({f"{contract.ENV_CHANNEL_PREFIX}{name.upper()}": str(data_dir / name) for name in channels})
        for name, value in hyperparameters.items():
            env[f"{contract.ENV_HP_PREFIX}{name.replace('-', '_').upper()}"] = value
        return {name: contract.value_text(value) for name, value in env.items()}

    def __call__(self, job_dir: Path, host: str) -> HostCommand:
        data_dir = job_dir / "input" / "data"
        driver = data_dir / contract.CHANNEL_DRIVERS / contract.DRIVERS_SUBDIR / contract.DRIVER_PROGRAM
        return HostCommand(
            [sys.executable, str(driver)], data_dir / contract.CHANNEL_CODE, self.environment(job_dir, host)
        )


def run(
    trainer: ModelTrainer, config: TrainingCompilerConfig, input_data_config, *, logs: bool, dry_run: bool
) -> LocalJobResult | None:
    """Run the trainer's job on this machine, in the foreground, through the compiler driver.

    The job folder is ``<local_container_root>/<job name>/``: ``code/`` and ``sm_drivers/`` as
    ModelTrainer would upload them, and each host's ``opt_ml/`` (see :func:`local_process.run_job`).

    Returns:
        The result (a failed job is a result with ``status="Failed"``), or None for ``dry_run``.

    Raises:
        SourceNotFoundError, ModelTrainerArgumentError: see :func:`checks.check_source_code` and
            :func:`checks.check_distributed`.
        SourceLinkError: see :func:`checks.source_files`.
        ChannelNotFoundError: an input that is not a local path.
        EstimatorArgumentError: the job folder exists; a local ``CheckpointConfig.s3_uri`` with a
            ``local_path`` outside ``/opt/ml`` (see :func:`checkpoint_location`).
    """
    entry_script = checks.check_source_code(trainer.source_code, local=True)
    code = checks.source_files(trainer.source_code)  # checked before the job folder is made
    driver = checks.check_distributed(trainer.distributed)
    checkpoints, checkpoint_folder = checkpoint_location(trainer)
    channels = input_channels(trainer.input_data_config, input_data_config)
    environment = {name: str(value) for name, value in (trainer.environment or {}).items()}
    environment.update(contract.encode_environment(config, entry_point=entry_script))
    if dry_run:
        return None
    job_name = make_job_name(trainer.base_job_name or "local-process")
    root = local_path(str(trainer.local_container_root)) / job_name
    copy_entries(code or [], root / contract.CHANNEL_CODE)  # as ModelTrainer uploads it, links resolved
    # an earlier job is never shipped as a later job's code (source_dir="." with the default root, the cwd);
    # marked now, not only by run_job's prepare_job, so a job refused there still leaves a marked folder
    mark_job_folder(root)
    shutil.copytree(driver_folder(), root / contract.CHANNEL_DRIVERS / contract.DRIVERS_SUBDIR)
    for name in (contract.CHANNEL_CODE, contract.CHANNEL_DRIVERS):
        channels[name] = (root / name).as_uri()
    request = build_request(
        job_name=job_name,
        image_uri=str(trainer.training_image) if trainer.training_image else None,
        hyperparameters=checks.hyperparameter_text(trainer.hyperparameters),
        environment=environment,
        channels=channels,
        output_path=root.parent.as_uri(),
        instance_type=checks.LOCAL_PROCESS,
        instance_count=getattr(trainer.compute, "instance_count", None) or 1,
        volume_size_gb=getattr(trainer.compute, "volume_size_in_gb", None) or 30,
        max_run_seconds=trainer.stopping_condition.max_runtime_in_seconds,
        role=None,
        metrics=[],
        checkpoint_s3_uri=checkpoints,
        checkpoint_local_path=checkpoint_folder,
    )
    hosts = _Hosts(request, entry_script, driver.model_dump())
    return local_process.run_job(request, logs=logs, host_command=hosts)
