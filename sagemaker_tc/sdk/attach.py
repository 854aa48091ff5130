"""``HuggingFace.attach(job_name)`` / ``PyTorch.attach(job_name)``: an estimator of the class asked for,
rebuilt from DescribeTrainingJob, as SDK v2's ``attach`` returned one.

What SDK v2 notebooks read from an attached estimator is set from the job: ``latest_training_job``,
``model_data``, ``hyperparameters()``, ``role``, ``instance_type``, ``instance_count``,
``output_path``, ``image_uri``, ``max_run``, ``volume_size``, ``compiler_config``,
``sagemaker_session``, ``entry_point`` (the user's script, also when the compiler's launcher ran
it), ``py_version`` and the framework versions (from the image's tag, as SDK v2 read them);
``wait()``, ``logs()`` follow the job. Its local code is not known (the job ran an archive in S3),
so ``fit()`` on it is refused with what to do.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from sagemaker_tc import contract
from sagemaker_tc.sdk import instances
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


# A Hugging Face DLC tag after sagemaker-core's framework_name_from_image: "<torch>-transformers<version>-gpu-py312"
_HUGGINGFACE_TAG_RE = re.compile(r"^(.*)-transformers(.*)-(cpu|gpu)-(py2|py3\d*)$")


def _compiler_settings(hyperparameters: dict[str, str]):
    return contract.decode(hyperparameters)


def _entry_point(hyperparameters: dict[str, str], settings) -> Any:
    """The user's script: the toolkit's program, unless that is the compiler's launcher, which runs
    the script its settings hyperparameter names."""
    program = json.loads(hyperparameters.get(contract.HP_PROGRAM, "null"))
    if program == contract.LAUNCHER_PROGRAM and settings is not None and settings.entry_point:
        return settings.entry_point
    return program


def image_versions(cls: type, image_uri: Any) -> dict[str, str | None]:
    """``py_version`` and the class's version arguments read from a DLC image's tag, as SDK v2's
    ``attach`` read them (sagemaker-core's ``framework_name_from_image`` / ``framework_version_from_tag``);
    None for each one an image of another form does not tell."""
    from sagemaker.core.fw_utils import framework_name_from_image, framework_version_from_tag

    versions: dict[str, str | None] = {"py_version": None, **dict.fromkeys(cls._version_arguments)}
    if not isinstance(image_uri, str):
        return versions
    _, py_version, tag, _ = framework_name_from_image(image_uri)
    if tag is None:
        return versions
    huggingface = _HUGGINGFACE_TAG_RE.match(tag)
    torch = huggingface.group(1) if huggingface else framework_version_from_tag(tag)
    versions["py_version"] = py_version
    if "framework_version" in versions:
        versions["framework_version"] = torch
    if "pytorch_version" in versions:
        versions["pytorch_version"] = torch
    if "transformers_version" in versions and huggingface:
        versions["transformers_version"] = huggingface.group(2)
    return versions


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
    estimator._checked_instance_type, estimator._kind = instances.check_instance(
        estimator.instance_type, estimator.instance_count
    )
    estimator.role = described.get("RoleArn")
    estimator.image_uri = algorithm.get("TrainingImage")
    estimator.output_path = described.get("OutputDataConfig", {}).get("S3OutputPath")
    estimator.max_run = described.get("StoppingCondition", {}).get("MaxRuntimeInSeconds")
    estimator.volume_size = resources.get("VolumeSizeInGB")
    estimator.base_job_name = job.job_name
    estimator.environment = dict(described.get("Environment", {}))
    settings = _compiler_settings(hyperparameters)
    estimator.compiler_config = None if settings is None else settings.config
    for name, value in image_versions(cls, estimator.image_uri).items():
        setattr(estimator, name, value)
    estimator.entry_point = _entry_point(hyperparameters, settings)
    estimator._current_job_name = job.job_name
    estimator.source_dir = json.loads(hyperparameters.get(contract.HP_SUBMIT_DIRECTORY, "null"))
    estimator._attached_hyperparameters = {k: v for k, v in hyperparameters.items() if k not in _PER_JOB_KEYS}
    estimator.settings = JobSettings()
    estimator.code_location = None
    estimator.checkpoint_s3_uri = described.get("CheckpointConfig", {}).get("S3Uri")
    estimator.checkpoint_local_path = described.get("CheckpointConfig", {}).get("LocalPath")
    estimator.distribution = None
    estimator.dependencies, estimator.git_config, estimator.instance_groups = [], None, None
    estimator.latest_training_job = job
    return estimator
