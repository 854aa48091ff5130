"""Under a ``PipelineSession``: ``fit()`` hands its request to a SageMaker Pipelines ``TrainingStep``."""

from __future__ import annotations

from sagemaker_tc.sdk import _internals
from sagemaker_tc.sdk.modes.training_job import CloudArguments, CloudTarget, upload_source
from sagemaker_tc.sdk.request import TrainingJobRequest


def hand_over(request: TrainingJobRequest, job: CloudArguments, target: CloudTarget) -> None:
    """Upload the source (named by its content hash, so rebuilding a definition from the same code
    gives the same URI) and give the request to the step being built, creating no job.

    ``TrainingStep(step_args=estimator.fit(...))`` reads the request back from ``session.context``.
    """
    request = upload_source(request, job, target, content_named=True)
    _internals.hand_request_to_pipeline(target.session, request.to_api_dict())
