"""``HuggingFace.attach(job_name)`` / ``PyTorch.attach(job_name)``: an estimator of the class asked for,
rebuilt from DescribeTrainingJob, as SDK v2's ``attach`` returned one.

What SDK v2 notebooks read from an attached estimator is set from the job: ``latest_training_job``,
``model_data``, ``hyperparameters()``, ``role``, ``instance_type``, ``instance_count``,
``output_path``, ``image_uri``, ``max_run``, ``volume_size``, ``compiler_config``,
``sagemaker_session``; ``wait()``, ``logs()`` follow the job. Its local code is not known (the job ran
an archive in S3), so ``fit()`` on it is refused with what to do.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sagemaker_tc import contract
from sagemaker_tc.sdk import arguments
from sagemaker_tc.sdk.job_settings import JobSettings

if TYPE_CHECKING:
    from sagemaker_tc.sdk.cloud import CloudJob

# The per-job keys fit() adds (script mode); hyperparameters() leaves them out, as for a built estimator.
_PER_JOB_KEYS = (
    contract.HP_PROGRAM,
    contract.HP_SUBMIT_DIRECTORY,
    contract.HP_JOB_NAME,
    contract.HP_LOG_LEVEL,
    contract.HP_REGION,
)


def _compiler_config(hyperparameters: dict[str, str]):
    settings = contract.decode(hyperparameters)
    return None if settings is None else settings.config


def attached(cls: type, job: CloudJob) -> Any:
    """An estimator of ``cls`` for the existing training job ``job``, from its description.

    Raises:
        ConfigError: the job's compiler keys are malformed (not written by sagemaker-tc or SMTC).
    """
    described = job.describe()
    resources = described.get("ResourceConfig", {})
    algorithm = described.get("AlgorithmSpecification", {})
    hyperparameters = dict(described.get("HyperParameters", {}))
    estimator = cls.__new__(cls)
    estimator._attached_job = job.job_name
    estimator._sagemaker_session = job.session
    estimator.instance_type = resources.get("InstanceType")
    estimator.instance_count = resources.get("InstanceCount", 1)
    estimator._checked_instance_type, estimator._kind = arguments.check_instance(
        estimator.instance_type, estimator.instance_count
    )
    estimator.role = described.get("RoleArn")
    estimator.image_uri = algorithm.get("TrainingImage")
    estimator.output_path = described.get("OutputDataConfig", {}).get("S3OutputPath")
    estimator.max_run = described.get("StoppingCondition", {}).get("MaxRuntimeInSeconds")
    estimator.volume_size = resources.get("VolumeSizeInGB")
    estimator.base_job_name = job.job_name
    estimator.environment = dict(described.get("Environment", {}))
    estimator.compiler_config = _compiler_config(hyperparameters)
    estimator.py_version = None
    for name in cls._version_arguments:
        setattr(estimator, name, None)
    estimator.entry_point = json.loads(hyperparameters.get(contract.HP_PROGRAM, "null"))
    estimator.source_dir = json.loads(hyperparameters.get(contract.HP_SUBMIT_DIRECTORY, "null"))
    estimator._attached_hyperparameters = {k: v for k, v in hyperparameters.items() if k not in _PER_JOB_KEYS}
    estimator.settings = JobSettings()
    estimator.code_location = None
    estimator.checkpoint_s3_uri = described.get("CheckpointConfig", {}).get("S3Uri")
    estimator.checkpoint_local_path = described.get("CheckpointConfig", {}).get("LocalPath")
    estimator.distribution = None
    estimator.latest_training_job = job
    return estimator
