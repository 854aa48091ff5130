"""SDK v2's estimator members read after ``fit()`` that are not the job's handle: the job's metrics
(``training_job_analytics``), where Debugger, TensorBoard and the profiler wrote
(``latest_job_*_artifacts_path()``), and the members whose work sagemaker-tc leaves to sagemaker-core
(``register()``, ``compile_model()``), refused with the way to do it; SDK v2's other members read
as attributes (:func:`sdk_v2_member`): the job settings given (``tags``, ``subnets``, ...) as
checked, and the members not offered refused by name with what to use instead.

Each reads the job itself (DescribeTrainingJob), so an estimator made by ``attach()`` answers too.
"""

from __future__ import annotations

import functools
import posixpath
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError, MemberNotOfferedError
from sagemaker_tc.sdk.job_settings import SETTING_NAMES

# SDK v2's latest_job_*_artifacts_path(): (the DescribeTrainingJob field holding the S3 path, the folder
# SDK v2 named under <path>/<job name>/).
ARTIFACT_FOLDERS = {
    "debugger": ("DebugHookConfig", "debug-output"),
    "tensorboard": ("TensorBoardOutputConfig", "tensorboard-output"),
    "profiler": ("ProfilerConfig", "rule-output"),
}

REGISTER_HELP = (
    "register() is not offered: sagemaker-tc trains; register estimator.model_data in the SageMaker Model "
    "Registry with sagemaker-core, e.g.\n"
    "  ModelPackage.create(model_package_group_name=group, inference_specification=InferenceSpecification("
    "containers=[ModelPackageContainerDefinition(image=inference_image, model_data_url=estimator.model_data)]))\n"
    "(sagemaker.core.resources and sagemaker.core.shapes; docs/migration.md, 'After fit()')"
)
COMPILE_MODEL_HELP = (
    "compile_model() (SageMaker Neo: compiling the trained model for inference hardware) is not offered: "
    "sagemaker-tc compiles training; its sagemaker_tc.compile_model(model) is a different thing, called in "
    "your script. To compile for inference, create a Neo job with sagemaker-core's "
    "CompilationJob.create(...) on estimator.model_data (sagemaker.core.resources; docs/migration.md, "
    "'After fit()')"
)


def _latest_job(estimator: Any, what: str):
    job = estimator.latest_training_job
    if job is None:
        raise EstimatorArgumentError(
            f"cannot get the {what}: the estimator is not associated with a training job (call fit() or attach())"
        )
    return job


def artifacts_path(estimator: Any, kind: str) -> str | None:
    """SDK v2's ``latest_job_<kind>_artifacts_path()``: ``<S3 path>/<job name>/<folder>`` from the
    latest job's description (else from the request ``fit()`` sent for it: an endpoint may not echo
    every configuration), None when the job has no such configuration (as in local modes).

    Raises:
        EstimatorArgumentError: no job was started or attached.
    """
    field, folder = ARTIFACT_FOLDERS[kind]
    job = _latest_job(estimator, f"{kind} artifacts path")
    path = (job.describe().get(field) or {}).get("S3OutputPath")
    sent = getattr(estimator, "_latest_request", None)
    if not path and sent is not None and sent.training_job_name == job.name:
        path = (sent.to_api_dict().get(field) or {}).get("S3OutputPath")
    return posixpath.join(path, job.name, folder) if isinstance(path, str) and path else None


def training_job_analytics(estimator: Any):
    """SDK v2's ``estimator.training_job_analytics``: sagemaker-core's ``TrainingJobAnalytics`` for the
    latest job (its CloudWatch metrics; ``.dataframe()``).

    Raises:
        EstimatorArgumentError: no job was started or attached, or it ran locally (local jobs send
            no metrics to CloudWatch: their metric lines are in ``latest_training_job.logs()``).
    """
    job = _latest_job(estimator, "training job analytics")
    if not estimator.is_cloud:
        raise EstimatorArgumentError(
            f"training_job_analytics reads a SageMaker job's CloudWatch metrics, and {job.name!r} ran locally "
            f"({estimator.instance_type}): its metric lines are in estimator.latest_training_job.logs()"
        )
    from sagemaker.core.analytics import TrainingJobAnalytics

    return TrainingJobAnalytics(job.name, sagemaker_session=estimator.sagemaker_session)


_DESCRIBE = "estimator.latest_training_job.describe()"
PROFILER_UPDATE = (
    "a running SageMaker job's profiler changes with sagemaker-core's "
    "TrainingJob.get(estimator.latest_training_job.name).update(profiler_config=..., profiler_rule_configurations=...)"
)
# SDK v2 estimator members sagemaker-tc does not offer -> what to do instead.
NOT_OFFERED = {
    "enable_default_profiling": f"set profiler_config= when building the estimator; {PROFILER_UPDATE}",
    "disable_profiling": f"build the estimator with disable_profiler=True; {PROFILER_UPDATE}",
    "update_profiler": PROFILER_UPDATE,
    "get_vpc_config": f"the job's VPC is {_DESCRIBE}.get('VpcConfig')",
    "transformer": (
        "batch transform needs an inference image and model: create them with sagemaker-core "
        "(Model.create(...), then TransformJob.create(...)) on estimator.model_data"
    ),
    "prepare_workflow_for_training": (
        "SDK v2's Airflow export is not offered; use SageMaker Pipelines: "
        "TrainingStep(step_args=estimator.fit(...)) under a PipelineSession"
    ),
    "set_hyperparameters": "pass hyperparameters= when building the estimator; hyperparameters() reads them",
    "uploaded_code": (
        f"the code's S3 archive is the job's sagemaker_submit_directory hyperparameter: {_DESCRIBE}['HyperParameters']"
    ),
    "jobs": "only the latest job is kept: estimator.latest_training_job (attach() rebuilds an estimator from any job)",
    "get_remote_debug_config": f"the job's value is {_DESCRIBE}.get('RemoteDebugConfig')",
    "disable_remote_debug": (
        "a running SageMaker job's remote debugging changes with sagemaker-core's TrainingJob.get(name)"
        ".update(remote_debug_config=RemoteDebugConfigForUpdate(enable_remote_debug=False))"
    ),
    "enable_remote_debug()": (
        "a running SageMaker job's remote debugging changes with sagemaker-core's TrainingJob.get(name)"
        ".update(remote_debug_config=RemoteDebugConfigForUpdate(enable_remote_debug=True)); pass "
        "enable_remote_debug=True when building the estimator for a new job"
    ),
    "get_app_url": "open the job's TensorBoard or profiler report from the SageMaker console",
    "get_session_chaining_config": f"the job's value is {_DESCRIBE}.get('SessionChainingConfig')",
    "code_uri": (
        f"the code's S3 archive is the job's sagemaker_submit_directory hyperparameter: {_DESCRIBE}['HyperParameters']"
    ),
    "code_channel_name": (
        "the code reaches the job through its sagemaker_submit_directory hyperparameter, not a channel"
    ),
    "debugger_rule_configs": f"the job's rules as sent are {_DESCRIBE}.get('DebugRuleConfigurations')",
    "collection_configs": f"the job's tensor collections as sent are {_DESCRIBE}.get('DebugHookConfig')",
    "training_image_config": f"the job's value is {_DESCRIBE}['AlgorithmSpecification'].get('TrainingImageConfig')",
}


def sdk_v2_member(estimator: Any, name: str) -> Any:
    """An SDK v2 estimator attribute the estimator does not hold itself: a job setting (SDK v2 kept
    each argument as an attribute) is its checked value (None when not given; Debugger objects as
    sagemaker-core shapes), ``enable_network_isolation()`` SDK v2's method answering it as a bool;
    a member in :data:`NOT_OFFERED` is refused.

    Raises:
        MemberNotOfferedError: ``name`` is an SDK v2 member sagemaker-tc does not offer; the
            message says what to use instead.
        AttributeError: any other missing attribute.
    """
    spec = vars(estimator).get("spec")  # vars(): no recursion before __init__ set it
    settings = spec.settings if spec is not None else vars(estimator).get("settings")  # attach(): no spec
    if name == "enable_remote_debug" and settings is not None:  # a method in SDK v2: refused when called
        return functools.partial(_not_offered, type(estimator).__name__, "enable_remote_debug()")
    if name == "enable_network_isolation" and settings is not None:  # a method in SDK v2
        isolated = bool(settings.get(name))
        return lambda: isolated
    if name in SETTING_NAMES and settings is not None:
        return settings.get(name)
    cls = type(estimator).__name__
    if name in NOT_OFFERED:  # a method's entry ends in "()": its name is the attribute read above
        _not_offered(cls, name)
    raise AttributeError(f"{cls!r} object has no attribute {name!r}")


def _not_offered(cls: str, name: str, *args: Any, **kwargs: Any) -> None:
    """Raise :class:`MemberNotOfferedError` for SDK v2's ``name`` on ``cls`` (see :data:`NOT_OFFERED`)."""
    raise MemberNotOfferedError(f"{cls}.{name} (SDK v2's) is not offered by sagemaker-tc: {NOT_OFFERED[name]}")
