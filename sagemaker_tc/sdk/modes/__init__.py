"""How ``fit()`` runs a job, one module per mode, and :func:`run`, which picks the mode.

- :mod:`.process`: ``local_process``, this host with no Docker (:mod:`sagemaker_tc.sdk.local.process`);
- :mod:`.docker`: ``local`` / ``local_gpu``, sagemaker-core's Docker engine (:mod:`sagemaker_tc.sdk.local.docker`);
- :mod:`.training_job`: a SageMaker training job (``ml.*``) through sagemaker-core (:mod:`sagemaker_tc.sdk.cloud`);
- :mod:`.pipeline`: under a ``PipelineSession``, the same request handed to a Pipelines step.

Each takes values, never the estimator: the checked spec (:class:`~sagemaker_tc.sdk.spec.EstimatorSpec`),
from which :func:`.request.request_for` builds the request (every field but where the code is). A
mode stages the source, fills in the request's submit directory
(:func:`~sagemaker_tc.sdk.request.with_submit_directory`) and runs it; ``fit()`` records what
:func:`run` returns. No module here imports the estimator module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.cloud import SageMakerSession
from sagemaker_tc.sdk.instances import InstanceKind
from sagemaker_tc.sdk.modes import docker, pipeline, process, training_job
from sagemaker_tc.sdk.modes.request import request_for

if TYPE_CHECKING:
    from sagemaker_tc.sdk.request import TrainingJobRequest
    from sagemaker_tc.sdk.spec import EstimatorSpec


@dataclass(frozen=True)
class Run:
    """What one ``fit()`` started.

    Attributes:
        job: the job's handle (a local job or a SageMaker job); None for a Pipelines step.
        job_name: the job's name.
        request: a SageMaker job's request as sent (None for local jobs and Pipelines steps).
        output_path: a SageMaker job's (or step's) resolved output path; None locally.
    """

    job: Any
    job_name: str
    request: TrainingJobRequest | None = None
    output_path: Any = None


def run(
    spec: EstimatorSpec,
    inputs: Any,
    *,
    job_name: str | None,
    wait: bool,
    logs: bool,
    sagemaker_session: SageMakerSession | None = None,
    experiment_config: Any = None,
) -> Run:
    """Run ``spec`` once: locally (this host or Docker), as a SageMaker job, or, under a
    ``PipelineSession``, as the request a Pipelines step takes (nothing runs). Waits only for a
    local job run in the foreground (``wait``); the caller waits for a SageMaker job.

    Args:
        sagemaker_session: the estimator's ``sagemaker_session`` (cloud jobs; None: a default one).
        experiment_config: sagemaker-core's ``ExperimentConfig`` (cloud jobs and steps).

    Raises:
        what the chosen mode raises (see its ``start``/``prepare``).
    """
    if not spec.is_cloud:
        start = docker.start if spec.kind is InstanceKind.LOCAL_DOCKER else process.start
        job = start(spec, inputs, job_name=job_name, wait=wait, logs=logs)
        return Run(job=job, job_name=job.job_name)
    channels = estimator_channels(spec, inputs, cloud=True)
    job = training_job.CloudArguments.of(spec, sagemaker_session)
    target = training_job.prepare(channels, job, job_name=job_name)
    request = request_for(
        spec,
        target.job_name,
        target.channels,
        image_uri=target.image_uri,
        output_path=target.output_path,
        region=target.region,
        experiment_config=experiment_config,
    )
    if target.in_pipeline:  # building a pipeline definition: the step reads the request from session.context
        pipeline.hand_over(request, job, target)
        return Run(job=None, job_name=target.job_name, output_path=target.output_path)
    started = training_job.start(request, job, target)
    return Run(job=started, job_name=target.job_name, request=request, output_path=target.output_path)
