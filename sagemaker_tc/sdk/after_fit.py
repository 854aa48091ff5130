"""SDK v2's estimator members read after ``fit()`` that are not the job's handle: the job's metrics
(``training_job_analytics``), where Debugger, TensorBoard and the profiler wrote
(``latest_job_*_artifacts_path()``), and the members whose work sagemaker-tc leaves to sagemaker-core
(``register()``, ``compile_model()``), refused with the way to do it.

Each reads the job itself (DescribeTrainingJob), so an estimator made by ``attach()`` answers too.
"""

from __future__ import annotations

import posixpath
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError

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
