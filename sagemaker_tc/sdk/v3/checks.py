"""Checks of a ModelTrainer's arguments with the compiler on, each raising a named error before any job starts.

:class:`sagemaker_tc.sdk.v3.trainer.ModelTrainer` runs them when it is built (before sagemaker-train's
own defaults, which call AWS) and again at ``train()`` (the trainer's fields can be reassigned).
They read ModelTrainer's fields and run the rules the estimators run where ModelTrainer has the same
argument (:mod:`sagemaker_tc.sdk.instances`, :mod:`sagemaker_tc.sdk.job_environment`,
:mod:`sagemaker_tc.sdk.value_checks`, :mod:`sagemaker_tc.sdk.folder_checks`), plus the ones its shape
adds: the compiler wraps ``SourceCode.entry_script``, so a ``SourceCode.command`` cannot be compiled,
and it brings its own driver, so only ``Torchrun`` can be combined with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable
from sagemaker.train.defaults import DEFAULT_INSTANCE_TYPE
from sagemaker.train.distributed import Torchrun
from sagemaker.train.model_trainer import Mode
from sagemaker.train.utils import safe_serialize

from sagemaker_tc import contract
from sagemaker_tc.errors import (
    EstimatorArgumentError,
    HyperparameterError,
    ModelTrainerArgumentError,
    SourceNotFoundError,
    UnsupportedInstanceTypeError,
)
from sagemaker_tc.sdk import folder_checks, instances, job_environment, value_checks
from sagemaker_tc.sdk.api_limits import check_limit
from sagemaker_tc.sdk.hyperparameters import (
    MAX_KEY_CHARS,
    check_count,
    check_hyperparameter_name,
    check_value_text,
    encode_value,
)
from sagemaker_tc.sdk.instances import InstanceKind, warn_cpu_instance
from sagemaker_tc.sdk.job_paths import check_container_folder
from sagemaker_tc.sdk.job_settings import check_tags
from sagemaker_tc.sdk.request import make_job_name
from sagemaker_tc.sdk.source_tree import SourceEntry, marked_job_folders, source_entries
from sagemaker_tc.sdk.v3.driver import TrainingCompilerDriver

logger = logging.getLogger(__name__)

# ModelTrainer's local container instance types (sagemaker-train 1.x), and ours: no Docker.
LOCAL_CONTAINER_TYPES = ("local_cpu", "local_gpu")
LOCAL_PROCESS = "local_process"
_SOURCE_CODE_EXAMPLE = "SourceCode(source_dir='code', entry_script='train.py')"


def check_source_code(source_code: Any, *, local: bool) -> str:
    """The entry script the compiler's launcher runs.

    Args:
        source_code: ``ModelTrainer.source_code``.
        local: the job runs on this machine with no Docker (``local_process``): ``source_dir`` must
            be a local folder holding the entry script.

    Raises:
        ModelTrainerArgumentError: no ``source_code``; a ``command`` (the compiler runs inside the
            Python process of ``entry_script``, and cannot wrap a shell command); ``args`` (only
            ``command`` reads them); no ``entry_script``; an entry script that is not a ``.py`` file.
        SourceNotFoundError: ``local_process`` with a ``source_dir`` that is not a local folder; an
            entry script outside ``source_dir`` (absolute, or ``../``), or not a file in a local
            ``source_dir`` (missing, or a folder).
    """
    if source_code is None:
        raise ModelTrainerArgumentError(
            f"compiler_config needs source_code with an entry_script, e.g. source_code={_SOURCE_CODE_EXAMPLE}: the "
            "compiler runs inside your training script's Python process"
        )
    if source_code.command:
        raise ModelTrainerArgumentError(
            f"SourceCode.command={source_code.command!r} cannot run with compiler_config: the compiler runs inside the "
            "Python process of SourceCode.entry_script and cannot wrap a shell command. Use entry_script='train.py' "
            "(its hyperparameters arrive as --name value arguments); to run commands before training, list packages "
            "in SourceCode.requirements, or run them from the script"
        )
    if source_code.args:
        raise ModelTrainerArgumentError(
            "SourceCode.args are only passed to SourceCode.command; with compiler_config, pass your script's "
            "arguments as hyperparameters (each becomes --name value)"
        )
    entry_script = source_code.entry_script
    if not entry_script:
        raise ModelTrainerArgumentError(
            f"compiler_config needs SourceCode.entry_script, the Python script to compile, e.g. {_SOURCE_CODE_EXAMPLE}"
        )
    if isinstance(entry_script, str) and not entry_script.endswith(".py"):
        raise ModelTrainerArgumentError(
            f"SourceCode.entry_script={entry_script!r} is not a Python script: with compiler_config the entry script "
            "must be a .py file (the compiler runs inside the Python process); shell scripts run without it"
        )
    _check_entry_script_path(entry_script)
    folder = Path(str(source_code.source_dir or ""))
    if local and (not source_code.source_dir or not folder.is_dir()):
        raise SourceNotFoundError(
            f"instance_type='local_process' runs code from a local folder: SourceCode.source_dir="
            f"{source_code.source_dir!r} is not one"
        )
    if isinstance(source_code.source_dir, str) and source_code.source_dir and folder.is_dir():
        if (folder / entry_script).is_dir():
            raise SourceNotFoundError(
                f"entry_script {entry_script!r} is a folder, not a script: give the training script's file in "
                "source_dir, e.g. 'train.py'"
            )
        if not (folder / entry_script).is_file():
            raise SourceNotFoundError(f"entry_script {entry_script!r} was not found in source_dir {str(folder)!r}")
    return entry_script


def _check_entry_script_path(entry_script: Any) -> None:
    """``entry_script`` is a path relative to ``source_dir`` that stays inside it (the estimators' rule
    for ``entry_point``): the job's code folder holds ``source_dir`` only.

    Raises:
        SourceNotFoundError: an absolute path, or one that leads out of ``source_dir`` with ``..``.
    """
    if not isinstance(entry_script, str):
        return
    normalized = os.path.normpath(entry_script)
    if os.path.isabs(entry_script) or normalized == ".." or normalized.startswith("../"):
        raise SourceNotFoundError(
            f"SourceCode.entry_script={entry_script!r} must be inside source_dir: the job's code folder holds "
            "source_dir only; give the script's path relative to source_dir, e.g. 'train.py', or move the script "
            "into source_dir"
        )


def source_files(source_code: Any) -> list[SourceEntry] | None:
    """What of ``SourceCode.source_dir`` the job ships, checked by the estimators' link rules
    (:mod:`sagemaker_tc.sdk.source_tree`), before sagemaker-train uploads it (a training job),
    mounts it (Docker local mode) or ``local_process`` copies it.

    Returns:
        The files and folders, ``SourceCode.ignore_patterns`` left out; None when ``source_dir`` is
        not a local folder (an S3 URI, a ``.tar.gz``, a pipeline variable: nothing to list).

    Raises:
        SourceLinkError: a link in ``source_dir`` resolves outside it, dangles or loops (ModelTrainer
            ships no link that leads outside ``source_dir``).
    """
    source_dir = getattr(source_code, "source_dir", None)
    if not isinstance(source_dir, str) or not source_dir or source_dir.startswith("s3://"):
        return None
    root = Path(source_dir).expanduser().resolve()
    if not root.is_dir():
        return None
    return source_entries(root, ignore_patterns=source_code.ignore_patterns or (), opt_in=None)


def leave_out_job_folders(source_code: Any, local_container_root: Any) -> list[str]:
    """Add the ``local_process`` job folders that lie in ``SourceCode.source_dir`` to its
    ``ignore_patterns``, so that sagemaker-train never uploads or mounts an earlier job (its code,
    hyperparameters, model) as the next job's code: with ``source_dir="."`` and the default
    ``local_container_root`` (the current folder) each job folder lies in the source folder.

    Returns:
        The folder names added (each job folder's name, as ``shutil.ignore_patterns`` matches it);
        empty when ``source_dir`` is not a local folder or ``local_container_root`` lies outside it.
    """
    source_dir = getattr(source_code, "source_dir", None)
    if not isinstance(source_dir, str) or not source_dir or source_dir.startswith("s3://"):
        return []
    if not isinstance(local_container_root, (str, os.PathLike)):
        return []
    source, root = Path(source_dir).expanduser().resolve(), Path(local_container_root).expanduser().resolve()
    if not root.is_relative_to(source):
        return []
    known = list(source_code.ignore_patterns or [])
    added = [name for name in marked_job_folders(root) if name not in known]
    if added:
        source_code.ignore_patterns = known + added
        logger.info("Not shipping %d earlier local_process job folder(s) in source_dir", len(added))
    return added


def check_distributed(distributed: Any) -> TrainingCompilerDriver:
    """The compiler's driver for ``distributed``: one process per host, or ``Torchrun``'s processes.

    Raises:
        ModelTrainerArgumentError: ``Torchrun(smp=...)`` (SageMaker model parallelism, like the
            estimators' ``smdistributed``, is not compatible with the compiler), ``MPI`` or another
            driver (the compiler brings its own), or a ``process_count_per_node`` below 1.
    """
    if distributed is None:
        return TrainingCompilerDriver()
    if isinstance(distributed, TrainingCompilerDriver):
        return distributed
    if not isinstance(distributed, Torchrun):
        raise ModelTrainerArgumentError(
            f"distributed={type(distributed).__name__}(...) cannot run with compiler_config: the compiler brings its "
            "own driver, which runs torchrun; use distributed=Torchrun() for multi-GPU and multi-node training"
        )
    if distributed.smp is not None:
        raise ModelTrainerArgumentError(
            "Torchrun(smp=...) (SageMaker model parallelism) is not compatible with the compiler, as SageMaker's "
            "distributed-training libraries were not with SMTC; use Torchrun() (DDP or FSDP2 in your script)"
        )
    processes = distributed.process_count_per_node
    if processes is not None and (isinstance(processes, bool) or processes < 1):
        raise ModelTrainerArgumentError(f"Torchrun(process_count_per_node={processes!r}) must be 1 or more")
    return TrainingCompilerDriver(torchrun=True, process_count_per_node=processes)


def check_compute(training_mode: Mode, compute: Any, *, warn: bool) -> tuple[str, InstanceKind]:
    """Where the job runs, checked as the estimators check ``instance_type``/``instance_count``.

    ``Mode.SAGEMAKER_TRAINING_JOB`` takes ``ml.*`` types (sagemaker-train's default is
    ``ml.m5.xlarge``, a CPU type); ``Mode.LOCAL_CONTAINER`` takes ``local_cpu``/``local_gpu``
    (Docker) or ``local_process`` (this machine, no Docker).

    Returns:
        ``(instance type as checked, where the job runs)``.

    Raises:
        UnsupportedInstanceTypeError: an instance type the mode does not run, an unknown or Neuron
            family, a bad count, more than 8 ``local_process`` hosts, or ``instance_groups``.

    Warns:
        CpuInstanceWarning: a CPU instance type (when ``warn``).
    """
    instance_type = getattr(compute, "instance_type", None) or DEFAULT_INSTANCE_TYPE
    count = getattr(compute, "instance_count", None)
    count = 1 if count is None else count  # sagemaker-train's default; 0 is refused below, not run as 1
    if getattr(compute, "instance_groups", None):
        raise UnsupportedInstanceTypeError(
            "Compute(instance_groups=...): heterogeneous clusters are not supported with the compiler (nor were "
            "they with SMTC); use instance_type and instance_count"
        )
    if training_mode == Mode.LOCAL_CONTAINER:
        if instance_type not in (*LOCAL_CONTAINER_TYPES, LOCAL_PROCESS):
            raise UnsupportedInstanceTypeError(
                f"Mode.LOCAL_CONTAINER runs on this machine: Compute(instance_type=...) must be 'local_cpu' or "
                f"'local_gpu' (Docker) or 'local_process' (no Docker), got {instance_type!r}"
            )
        docker_name = {"local_cpu": "local"}.get(instance_type, instance_type)
        return instance_type, instances.check_instance(docker_name, count)[1]
    checked, kind = instances.check_instance(instance_type, count)
    if kind not in instances.CLOUD_KINDS:
        raise UnsupportedInstanceTypeError(
            f"instance_type={checked!r} runs on this machine: use training_mode=Mode.LOCAL_CONTAINER for it, or an "
            "ml.* instance type for a SageMaker training job"
        )
    if warn and kind is InstanceKind.CPU:
        warn_cpu_instance(checked)
    return checked, kind


def check_environment(environment: Any, kind: InstanceKind, *, compiler_enabled: bool) -> None:
    """The estimators' environment rules for the plain-string variables
    (:func:`~sagemaker_tc.sdk.job_environment.check_job_environment`; pipeline variables are resolved
    by SageMaker, only their names are checked), and no ``SM_TRAINING_COMPILER_SETTINGS`` of the
    user's own.

    Args:
        environment: ``ModelTrainer.environment`` without the settings the trainer wrote itself.
        kind: where the job runs.
        compiler_enabled: warn about variables that switch the compiler off (once, when built).

    Raises:
        EstimatorArgumentError: a name or value the estimators refuse.
        ModelTrainerArgumentError: ``SM_TRAINING_COMPILER_SETTINGS`` is set (the trainer sets it
            from ``compiler_config``).
    """
    environment = dict(environment or {})
    if contract.ENV_SETTINGS in environment:
        raise ModelTrainerArgumentError(
            f"environment[{contract.ENV_SETTINGS!r}] is set by sagemaker_tc.ModelTrainer from compiler_config: "
            "remove it and put the settings in TrainingCompilerConfig"
        )
    cloud = kind in instances.CLOUD_KINDS
    plain = {name: value for name, value in environment.items() if not isinstance(value, PipelineVariable)}
    job_environment.check_job_environment(
        plain, cloud=cloud, local_process=kind is InstanceKind.LOCAL_PROCESS, compiler_enabled=compiler_enabled
    )
    job_environment.check_reserved_names(name for name in environment if name not in plain)
    if cloud and len(environment) >= job_environment.MAX_ENV_ENTRIES:
        raise EstimatorArgumentError(
            f"environment has {len(environment)} variables; SageMaker training jobs take at most "
            f"{job_environment.MAX_ENV_ENTRIES}, and sagemaker_tc.ModelTrainer adds {contract.ENV_SETTINGS}"
        )


def check_hyperparameters(hyperparameters: Any) -> None:
    """Each hyperparameter reaches the script as ``--name value`` exactly as sent, so names follow the
    estimators' rules (no ``sagemaker_*``: the driver keeps those from the script, as the toolkit
    does) and each value, as ModelTrainer sends it, fits SageMaker's 2500 characters.

    Raises:
        HyperparameterError: not a dict, more than SageMaker's 100, or a name or value those rules
            refuse (a value that is not JSON: NaN, infinity, a set, an object).

    Warns:
        HyperparameterWarning: a value the script's argument parser will read as an option.
    """
    if not hyperparameters:
        return
    if not isinstance(hyperparameters, Mapping):
        raise HyperparameterError(f"hyperparameters must be a dict of name -> value, got {type(hyperparameters)}")
    check_count(len(hyperparameters), sdk_keys=0)  # ModelTrainer's settings travel in the environment
    for name, value in hyperparameters.items():
        if not isinstance(name, str) or not name or len(name) > MAX_KEY_CHARS:
            raise HyperparameterError(f"hyperparameter name {name!r} is not accepted: a non-empty string")
        check_hyperparameter_name(name)
        if isinstance(value, PipelineVariable):
            continue
        if not isinstance(value, str):
            encode_value(name, value)  # the estimators' rule: JSON values only (no NaN, infinity, sets, objects)
        check_value_text(name, value if isinstance(value, str) else safe_serialize(value))


def check_stopping_condition(stopping_condition: Any) -> None:
    """``StoppingCondition.max_runtime_in_seconds``, checked as the estimators check ``max_run``.

    Raises:
        EstimatorArgumentError: not a positive integer, or more than SageMaker's 28 days.
    """
    max_run = getattr(stopping_condition, "max_runtime_in_seconds", None)
    if isinstance(max_run, int) or isinstance(max_run, float):
        value_checks.check_max_run(max_run)


def hyperparameter_text(hyperparameters: Mapping[str, Any] | None) -> dict[str, str]:
    """The hyperparameters as ModelTrainer sends them: strings as they are, other values as JSON."""
    return {name: safe_serialize(value) for name, value in (hyperparameters or {}).items()}


def _text(value: Any) -> str | None:
    """``value`` when it is plain text (not None, not a pipeline variable SageMaker resolves)."""
    return value if isinstance(value, str) else None


def check_names(
    base_job_name: Any, role: Any, tags: Any, output_data_config: Any, networking: Any, *, cloud: bool
) -> None:
    """The trainer's names as the estimators check theirs (and as CreateTrainingJob would): no
    trailing newline or other control character passes.

    Args:
        base_job_name, role, tags, output_data_config, networking: the ``ModelTrainer`` fields.
        cloud: a SageMaker training job (the role is checked; local modes need none).

    Raises:
        EstimatorArgumentError: a ``base_job_name`` that makes no TrainingJobName; a role that is not a
            full IAM role ARN (cloud); a tag the estimators refuse (an ``aws:`` key, a key given twice, a
            key or value outside the API's limits); a KMS key, subnet or security group id outside
            the API's limits.
    """
    if _text(base_job_name):
        make_job_name(base_job_name)
    if _text(role):
        value_checks.check_role_characters(role)  # in every mode: a job that runs locally runs on SageMaker
    if cloud and _text(role):
        value_checks.check_role(role)
    if tags:
        check_tags([_tag_dict(tag) for tag in tags])
    kms_key = _text(getattr(output_data_config, "kms_key_id", None))
    if kms_key is not None:
        check_limit("OutputDataConfig(kms_key_id)", "KmsKeyId", kms_key)
    for field, shape in (("subnets", "SubnetId"), ("security_group_ids", "SecurityGroupId")):
        for item in getattr(networking, field, None) or []:
            if _text(item) is not None:
                check_limit(f"Networking({field})", shape, item)


def _tag_dict(tag: Any) -> dict[str, Any]:
    """A ``Tag`` (or a dict) as the estimators' ``{"Key": ..., "Value": ...}``."""
    if isinstance(tag, Mapping):
        return dict(tag)
    return {"Key": tag.key, "Value": tag.value if isinstance(tag.value, str) else ""}


def check_checkpoint_config(checkpoint_config: Any, kind: InstanceKind, *, output_path: Any, source_dir: Any) -> None:
    """``CheckpointConfig`` checked as the estimators check ``checkpoint_s3_uri``/``checkpoint_local_path``
    (:func:`sagemaker_tc.sdk.folder_checks.check_checkpoints`).

    Args:
        checkpoint_config: ``ModelTrainer.checkpoint_config`` (None: nothing to check).
        kind: where the job runs.
        output_path: the job's output: ``OutputDataConfig.s3_output_path`` for a SageMaker job,
            ``local_container_root`` for ``local_process``.
        source_dir: ``SourceCode.source_dir``.

    Raises:
        EstimatorArgumentError: ``local_path`` is, holds or lies inside ``/opt/ml/input`` (the channels),
            ``/opt/ml/code``, ``/opt/ml/model`` or ``/opt/ml/output``; an ``s3_uri`` that is not a
            well-formed ``s3://`` URI (``local_process``: nor a local folder; ``ftp://``, ``gs://`` are
            refused); that is the output path; a local one that is or holds the output folder or
            ``source_dir``, or cannot be a folder.
    """
    uri = _text(getattr(checkpoint_config, "s3_uri", None))
    folder = _text(getattr(checkpoint_config, "local_path", None))
    if uri is None:  # sagemaker-train makes one under the default bucket
        if folder is not None:
            check_container_folder(folder)
        return
    source = _text(source_dir)
    local_source = source and not source.startswith("s3://") and Path(source).expanduser().is_dir()
    folder_checks.check_checkpoints(
        uri,
        folder,
        cloud=kind in instances.CLOUD_KINDS,
        kind=kind,
        output_path=_text(output_path),
        source_root=Path(source).expanduser().resolve() if local_source else None,
    )


def check_cache_apart(cache: Any, local_container_root: Any, checkpoint_config: Any, source_code: Any) -> None:
    """A ``local_process`` trainer's local ``compiler_config.cache`` apart from its job folders, as the
    estimators check theirs (:func:`sagemaker_tc.sdk.folder_checks.check_cache_apart`).

    Raises:
        EstimatorArgumentError: the cache is or holds ``local_container_root`` or ``source_dir``, or
            is, holds or lies inside ``CheckpointConfig.s3_uri``'s local folder.
    """
    source = _text(getattr(source_code, "source_dir", None))
    local_source = source and not source.startswith("s3://") and Path(source).expanduser().is_dir()
    folder_checks.check_cache_apart(
        _text(cache),
        output_path=_text(local_container_root),
        checkpoint_uri=_text(getattr(checkpoint_config, "s3_uri", None)),
        source_root=Path(source).expanduser().resolve() if local_source else None,
    )


def check_file_system_inputs(configs: list[Any], subnets: Any) -> None:
    """ModelTrainer's inputs (``InputData`` or ``Channel``) checked as the estimators' channels:
    an EFS or FSx for Lustre input needs the job's VPC (``Networking(subnets=..., security_group_ids=...)``).

    Raises:
        ChannelNotFoundError: a file-system input without subnets.
    """
    from sagemaker.core.shapes import Channel, DataSource, FileSystemDataSource

    from sagemaker_tc.sdk.channels import check_file_system_vpc

    channels = {}
    for config in configs:
        for item in config or []:
            source = item.data_source
            if isinstance(source, FileSystemDataSource):
                channels[item.channel_name] = Channel(
                    channel_name=item.channel_name, data_source=DataSource(file_system_data_source=source)
                )
            elif isinstance(item, Channel):
                channels[item.channel_name] = item
    check_file_system_vpc(channels, subnets)
