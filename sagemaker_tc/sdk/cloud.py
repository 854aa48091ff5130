"""SageMaker training jobs: upload the source, create the job through sagemaker-core, wait for it.

The job is created with sagemaker-core's typed ``TrainingJob.create`` from the same
:class:`~sagemaker_tc.sdk.request.TrainingJobRequest` the ``local_process`` engine runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError, TrainingJobFailedError
from sagemaker_tc.sdk.request import TrainingJobRequest

logger = logging.getLogger(__name__)


def resolve_session(sagemaker_session: Any = None):
    """A sagemaker-core ``Session``: the one given, one wrapping a given ``boto3.Session``, or a new one
    from the default AWS configuration (region, credentials, ``AWS_ENDPOINT_URL``)."""
    from sagemaker.core.helper.session_helper import Session

    if sagemaker_session is None:
        return Session()
    if isinstance(sagemaker_session, Session):
        return sagemaker_session
    if hasattr(sagemaker_session, "client") and hasattr(sagemaker_session, "region_name"):  # a boto3.Session
        return Session(boto_session=sagemaker_session)
    raise EstimatorArgumentError(
        f"sagemaker_session must be a sagemaker.core Session or a boto3.Session, got {type(sagemaker_session).__name__}"
    )


def bucket_of(s3_uri: str) -> str:
    """``s3://bucket/prefix`` -> ``bucket``."""
    return s3_uri.removeprefix("s3://").split("/", 1)[0]


def upload_source(session, archive: Path, *, bucket: str, key_prefix: str) -> str:
    """Upload ``sourcedir.tar.gz`` to ``s3://<bucket>/<key_prefix>/``; returns its URI.

    Jobs use ``<job name>/source`` (SDK v2's layout); pipeline definitions use a prefix named by the
    archive's content hash, so rebuilding a definition from the same code gives the same URI.
    """
    return session.upload_data(str(archive), bucket=bucket, key_prefix=key_prefix)


@dataclass
class CloudJob:
    """A SageMaker training job created (or attached to) by sagemaker-tc.

    Attributes:
        job_name: the job's name.
        session: the sagemaker-core session it runs under.
    """

    job_name: str
    session: Any

    def _resource(self):
        from sagemaker.core.resources import TrainingJob

        return TrainingJob.get(self.job_name, session=self.session.boto_session, region=self.session.boto_region_name)

    def describe(self) -> dict[str, Any]:
        """Status, failure reason and model artifacts, as of now."""
        job = self._resource()
        artifacts = getattr(job.model_artifacts, "s3_model_artifacts", None)
        return {
            "job_name": self.job_name,
            "status": job.training_job_status,
            "failure_reason": _assigned(job.failure_reason),
            "model_artifacts": _assigned(artifacts),
        }

    @property
    def status(self) -> str:
        """``InProgress``, ``Completed``, ``Failed``, ``Stopping`` or ``Stopped``."""
        return self.describe()["status"]

    @property
    def model_data(self) -> str | None:
        """S3 URI of ``model.tar.gz`` once the job completed, else None."""
        return self.describe()["model_artifacts"]

    def wait(self, *, logs: bool = True, poll_seconds: int = 5) -> str | None:
        """Block until the job ends; stream its CloudWatch log when ``logs``.

        Returns:
            The S3 URI of ``model.tar.gz``.

        Raises:
            TrainingJobFailedError: the job ended ``Failed`` or ``Stopped``; carries its FailureReason.
        """
        from sagemaker.core.utils.exceptions import FailedStatusError

        job = self._resource()
        try:
            job.wait(poll=poll_seconds, logs=logs)
        except FailedStatusError:
            pass
        state = self.describe()
        if state["status"] != "Completed":
            raise TrainingJobFailedError(self.job_name, state["failure_reason"] or f"status {state['status']}")
        return state["model_artifacts"]


def _assigned(value: Any) -> Any:
    from sagemaker.core.utils.utils import Unassigned

    return None if value is None or isinstance(value, Unassigned) else value


def attach(training_job_name: str, sagemaker_session: Any = None) -> CloudJob:
    """The handle of an existing training job, checked to exist.

    Raises:
        EstimatorArgumentError: no such job in the session's account and region, or it cannot be described.
    """
    from botocore.exceptions import ClientError

    job = CloudJob(job_name=training_job_name, session=resolve_session(sagemaker_session))
    try:
        job.describe()  # fail now if the job does not exist
    except ClientError as error:
        raise EstimatorArgumentError(f"cannot attach to training job {training_job_name!r}: {error}") from None
    return job


def create_job(request: TrainingJobRequest, session) -> CloudJob:
    """``CreateTrainingJob`` through sagemaker-core's ``TrainingJob.create``.

    Raises:
        EstimatorArgumentError: the request has no role (SageMaker needs one).
        botocore.exceptions.ClientError: the service refused the request.
    """
    from sagemaker.core.resources import Tag, TrainingJob

    optional = request.optional_fields()
    if "tags" in optional:  # TrainingJob.create validates its tags as the resources module's Tag
        optional["tags"] = [Tag(key=tag.key, value=tag.value) for tag in optional["tags"]]
    if not request.role_arn:
        raise EstimatorArgumentError("role is required for SageMaker training jobs (an IAM role ARN or name)")
    TrainingJob.create(
        training_job_name=request.training_job_name,
        role_arn=request.role_arn,
        algorithm_specification=request.algorithm_specification,
        hyper_parameters=request.hyper_parameters,
        environment=request.environment or None,
        input_data_config=request.input_data_config or None,
        output_data_config=request.output_data_config,
        resource_config=request.resource_config,
        stopping_condition=request.stopping_condition,
        session=session.boto_session,
        region=session.boto_region_name,
        **optional,  # CheckpointConfig, VpcConfig, Tags, ... as set
    )
    logger.info("Created training job %s", request.training_job_name)
    return CloudJob(job_name=request.training_job_name, session=session)
