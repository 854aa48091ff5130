"""Which instance types the compiler's estimators run on, from the data table ``instance_families.json``.

SMTC accepted only p3, p3dn, g4dn, p4d and g5 and refused local mode; here every current NVIDIA GPU
family is accepted, CPU families with a warning, and Trainium/Inferentia are refused with a pointer
to the Neuron compiler.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from functools import cache
from importlib import resources
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable

from sagemaker_tc.errors import CpuInstanceWarning, JobSettingWarning, UnsupportedInstanceTypeError
from sagemaker_tc.warn import warn_user

LOCAL_PROCESS = "local_process"
# CreateTrainingJob's InstanceCount has no maximum of its own (the account's service quotas decide);
# more than this is a typo, not a training cluster.
MAX_INSTANCE_COUNT = 1000
_ML_TYPE_RE = re.compile(r"^ml\.(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9-]+)\Z")


class InstanceKind(str, Enum):
    """Where a job runs: this host, Docker on this host, or a SageMaker GPU / CPU instance."""

    LOCAL_PROCESS = "local_process"
    LOCAL_DOCKER = "local_docker"
    GPU = "gpu"
    CPU = "cpu"


@cache
def instance_families() -> dict[str, list[str]]:
    """The family table: ``{"gpu": [...], "cpu": [...], "neuron": [...]}``."""
    text = resources.files("sagemaker_tc.sdk").joinpath("instance_families.json").read_text(encoding="utf-8")
    return {key: value for key, value in json.loads(text).items() if not key.startswith("_")}


def classify_instance(instance_type: Any, instance_count: Any) -> InstanceKind:
    """Check ``instance_type``/``instance_count`` for a compiler job and say where it runs.

    Raises:
        UnsupportedInstanceTypeError: not an instance type, an unknown or Neuron family, or a count
            that is not a positive integer up to :data:`MAX_INSTANCE_COUNT`.

    A CPU family is accepted here; the estimator then checks that it has a CPU image and calls
    :func:`warn_cpu_instance`.
    """
    if not isinstance(instance_count, int) or isinstance(instance_count, bool) or instance_count < 1:
        raise UnsupportedInstanceTypeError(f"instance_count must be a positive integer, got {instance_count!r}")
    if instance_count > MAX_INSTANCE_COUNT:
        raise UnsupportedInstanceTypeError(
            f"instance_count={instance_count} is more than sagemaker-tc accepts ({MAX_INSTANCE_COUNT}); the "
            "account's SageMaker quotas limit it further: give the number of hosts the job trains on"
        )
    if instance_type == LOCAL_PROCESS:
        return InstanceKind.LOCAL_PROCESS
    if instance_type in ("local", "local_gpu"):
        return InstanceKind.LOCAL_DOCKER
    match = _ML_TYPE_RE.match(instance_type) if isinstance(instance_type, str) else None
    if match is None:
        raise UnsupportedInstanceTypeError(
            f"instance_type={instance_type!r} is not an instance type: use 'local_process' (this host, no Docker), "
            "'local'/'local_gpu' (Docker) or an 'ml.<family>.<size>' type such as 'ml.g5.2xlarge'"
        )
    family = match.group("family")
    families = instance_families()
    if family in families["neuron"]:
        raise UnsupportedInstanceTypeError(
            f"{instance_type} is an AWS Trainium/Inferentia instance: those compile with the Neuron compiler "
            "(torch-neuronx / neuronx-cc on the Neuron DLCs), not with sagemaker-tc; pick a GPU instance or use "
            "the Neuron SDK"
        )
    if family in families["gpu"] or family in families["cpu"]:
        _warn_if_unknown_size(instance_type)
        return InstanceKind.GPU if family in families["gpu"] else InstanceKind.CPU
    known = ", ".join(families["gpu"] + families["cpu"])
    raise UnsupportedInstanceTypeError(
        f"instance family {family!r} of {instance_type} is not in sagemaker-tc's table; supported families: {known}"
    )


def _warn_if_unknown_size(instance_type: str) -> None:
    """Warn when CreateTrainingJob's instance type list (the API model botocore ships) lacks
    ``instance_type`` (``ml.g5.huge``): SageMaker refuses it, unless it is newer than this botocore."""
    import botocore
    import botocore.session

    known = botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingInstanceType").enum
    if known and instance_type not in known:
        sizes = sorted(name for name in known if name.rsplit(".", 1)[0] == instance_type.rsplit(".", 1)[0])
        warn_user(
            f"instance_type={instance_type!r} is not among CreateTrainingJob's instance types in botocore "
            f"{botocore.__version__} (sizes of its family there: {', '.join(sizes) or 'none'}); SageMaker will refuse "
            "it unless the type is newer than this botocore",
            JobSettingWarning,
        )


def warn_cpu_instance(instance_type: str) -> None:
    """Warn that a job runs on a CPU instance (accepted: compile gains on CPU are model-dependent).

    Warns:
        CpuInstanceWarning: always, attributed to the user's estimator call.
    """
    warn_user(
        f"{instance_type} is a CPU instance: TorchInductor compiles for CPU too, but the gains there are "
        "model-dependent (often compile time and no recompiles rather than faster steps); compare with "
        "TrainingCompilerConfig(backend='eager')",
        CpuInstanceWarning,
    )


CLOUD_KINDS = (InstanceKind.GPU, InstanceKind.CPU)
# local_process runs each host as a toolkit process group on this machine; it is for trying a
# multi-host job, not for scale, and each host holds a whole copy of the training script's memory.
MAX_LOCAL_PROCESS_HOSTS = 8


def check_instance(instance_type: Any, instance_count: Any) -> tuple[str, InstanceKind]:
    """Check where the job runs.

    A pipeline parameter (``ParameterString``) is checked, and later picks the image, by its
    ``default_value``.

    Returns:
        ``(instance type as checked, where the job runs)``.

    Raises:
        UnsupportedInstanceTypeError: see :func:`~sagemaker_tc.sdk.instances.classify_instance`; also a
            pipeline parameter without a default, or one that defaults to a local mode.
    """
    checked = getattr(instance_type, "default_value", instance_type)
    is_parameter = isinstance(instance_type, PipelineVariable)
    if is_parameter and not isinstance(checked, str):
        raise UnsupportedInstanceTypeError(
            "a pipeline parameter instance_type needs a default_value such as 'ml.g5.2xlarge' "
            "(it picks the training image)"
        )
    count_variable = isinstance(instance_count, PipelineVariable)
    instance_count = _count_checked_by_default(instance_count)
    kind = classify_instance(checked, instance_count)
    if kind is InstanceKind.LOCAL_PROCESS and instance_count > MAX_LOCAL_PROCESS_HOSTS:
        raise UnsupportedInstanceTypeError(
            f"instance_count={instance_count} with instance_type='local_process' would start {instance_count} "
            f"training processes on this machine; local_process runs at most {MAX_LOCAL_PROCESS_HOSTS} hosts (it is "
            "for trying a multi-host job): use ml.* instances for more"
        )
    if count_variable and kind not in CLOUD_KINDS:
        raise UnsupportedInstanceTypeError(
            f"instance_count is a pipeline variable, and instance_type {checked!r} is not a SageMaker instance type: "
            "pipelines run SageMaker training jobs (ml.* instance types)"
        )
    if is_parameter and kind not in CLOUD_KINDS:
        raise UnsupportedInstanceTypeError(
            f"a pipeline parameter instance_type must default to an ml.* instance type (pipelines run SageMaker "
            f"training jobs), got default {checked!r}"
        )
    return checked, kind


def _count_checked_by_default(instance_count: Any) -> Any:
    """A pipeline variable ``instance_count`` as its ``default_value`` (what is checked), else as given.

    Raises:
        UnsupportedInstanceTypeError: a pipeline variable without an integer default (a step's
            property has none: the host count must be checkable when the step is defined).
    """
    if not isinstance(instance_count, PipelineVariable):
        return instance_count
    default = getattr(instance_count, "default_value", None)
    if not isinstance(default, int) or isinstance(default, bool):
        name = getattr(instance_count, "name", type(instance_count).__name__)
        raise UnsupportedInstanceTypeError(
            f"instance_count is a pipeline variable ({name}) without an integer default_value: it is checked by its "
            "default when the step is defined (give ParameterInteger(name=..., default_value=1))"
        )
    return default
