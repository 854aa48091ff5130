"""The compiler config checked against where the job runs, for both front ends (the estimators and
``ModelTrainer``): the config's own checks, ``backend="xla"`` only where an XLA device is, and a
local ``cache`` folder only where the job can see it."""

from __future__ import annotations

import os
from typing import Any

from sagemaker_tc.config import TrainingCompilerConfig, checked_config
from sagemaker_tc.errors import ConfigError, EstimatorArgumentError
from sagemaker_tc.paths import unwritable_reason
from sagemaker_tc.sdk.instances import CLOUD_KINDS, InstanceKind
from sagemaker_tc.sdk.source import check_user_home
from sagemaker_tc.uris import looks_like_s3


def check_compiler_config(config: Any) -> TrainingCompilerConfig | None:
    """Return ``config`` if it is None or a :class:`~sagemaker_tc.config.TrainingCompilerConfig` that
    passes its own validators (:func:`~sagemaker_tc.config.checked_config`); SMTC's own class
    (sagemaker-core's ``sagemaker.core.training_compiler_config``) becomes ours with its ``enabled``
    and ``debug``.

    Raises:
        ConfigError: any other object, a config built around its validators
            (``model_copy(update={"backend": "bogus"})``), or SMTC's with a pipeline variable.
    """
    return checked_config(config, argument="compiler_config")


def check_backend(
    config: TrainingCompilerConfig | None, kind: InstanceKind, instance_type: str, *, default_image: bool = False
) -> None:
    """``backend="xla"`` only where an XLA device exists (not on a GPU) and torch_xla is installed.

    PyTorch/XLA deprecated XLA:CUDA in 2.8 and removed it in 2.9 (pytorch/xla PRs #9597, #9598,
    #9603, #9618), so a GPU job compiles with Inductor; ``xla`` runs on PJRT devices (TPU, and the
    CPU: CPU instance types and ``local``/``local_process`` on a CPU machine).

    ``default_image``: the job would run in the AWS PyTorch / Hugging Face training image, which has
    no torch_xla.

    Raises:
        ConfigError: ``backend="xla"`` on a GPU instance type or ``local_gpu``, or in a default image.
    """
    if config is None or not config.compiles or config.backend != "xla":
        return
    if kind is InstanceKind.GPU or instance_type in ("local_gpu",):
        raise ConfigError(
            f"TrainingCompilerConfig(backend='xla') on {instance_type}, a GPU: XLA:CUDA was removed upstream in "
            "torch_xla 2.9 (deprecated in 2.8), so XLA cannot use this GPU; use backend='inductor' (the default) "
            "for GPUs, or a CPU instance type for backend='xla'"
        )
    if default_image and kind is not InstanceKind.LOCAL_PROCESS:
        raise ConfigError(
            f"TrainingCompilerConfig(backend='xla') on {instance_type} needs torch_xla in the training image, and the "
            "AWS PyTorch and Hugging Face training images have none: pass image_uri= of an image with "
            "'sagemaker-tc[xla]' (torch 2.9.0 and torch_xla 2.9.0) installed, or use instance_type='local_process'"
        )


def resolve_cache(config: TrainingCompilerConfig | None, kind: InstanceKind) -> TrainingCompilerConfig | None:
    """The config with a local ``cache`` folder made absolute against the caller's working folder
    (the job runs in another folder), and a local cache refused where the job cannot see it.

    Raises:
        EstimatorArgumentError: a local ``cache`` folder for a SageMaker job or Docker local mode; one
            that is a file, cannot be written (``/dev/null``, ``/proc/...``, read-only), or has
            whitespace around it.
    """
    if config is None or config.cache is None or looks_like_s3(config.cache):
        return config
    if kind is not InstanceKind.LOCAL_PROCESS:
        where = (
            "a SageMaker training job runs on other machines"
            if kind in CLOUD_KINDS
            else ("Docker local mode mounts only the code and the channels into the container")
        )
        raise EstimatorArgumentError(
            f"compiler_config.cache={config.cache!r} is a local folder, which this job cannot see ({where}); use "
            "an s3:// URI such as 's3://my-bucket/sagemaker-tc-cache', or instance_type='local_process'"
        )
    if config.cache != config.cache.strip():
        raise EstimatorArgumentError(
            f"compiler_config.cache={config.cache!r} starts or ends with whitespace; give the folder's path as it is"
        )
    check_user_home("compiler_config.cache", config.cache)
    folder = os.path.abspath(os.path.expanduser(config.cache))
    reason = "it is not a folder" if os.path.exists(folder) and not os.path.isdir(folder) else unwritable_reason(folder)
    if reason is not None:
        raise EstimatorArgumentError(
            f"compiler_config.cache={config.cache!r} cannot be a cache folder: {reason}; give a folder you can write "
            "to (it is created if missing), or an s3:// URI"
        )
    return config.model_copy(update={"cache": folder})
