"""SageMaker training jobs: upload the source, create the job through sagemaker-core, wait for it.

The job is created with sagemaker-core's typed ``TrainingJob.create`` from the same
:class:`~sagemaker_tc.sdk.request.TrainingJobRequest` the ``local_process`` engine runs.
"""

from __future__ import annotations

import functools
import logging
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from sagemaker_tc.errors import EstimatorArgumentError, MemberNotOfferedError
from sagemaker_tc.sdk import after_fit, job_status
from sagemaker_tc.sdk.request import TrainingJobRequest, check_job_name

logger = logging.getLogger(__name__)

SageMakerSession: TypeAlias = Any
"""A SageMaker Python SDK session as a user passes one: sagemaker-core's ``Session`` (or its
``PipelineSession``, ``LocalSession``), SDK v2's, or a boto3 ``Session`` (:func:`resolve_session`
takes each). Typed loosely: the SDK side imports none of them until it needs AWS."""
# Where SageMaker training jobs write their log (one stream per host: "<job name>/algo-N-<epoch seconds>").
LOG_GROUP = "/aws/sagemaker/TrainingJobs"


def logs_for_job(
    session: SageMakerSession, job_name: str, wait: bool = False, poll: int = 10, log_type: str = "All", **_
) -> None:
    """Show a training job's CloudWatch log on stdout, as SDK v2's ``Session.logs_for_job``: with
    ``wait``, follow it until the job ends (raises ``TrainingJobFailedError`` if it failed); else
    print what there is now. ``log_type`` is accepted for SDK v2's calls (training jobs have one
    kind of log). ``session``: the sagemaker-core ``Session`` whose clients read the job."""
    job = CloudJob(job_name=job_name, session=session)
    if wait:
        job.wait(logs=True, poll_seconds=poll)
    else:  # the user asked to see the log: it goes to stdout, as SDK v2 shows it
        sys.stdout.write(job.logs())
        sys.stdout.flush()


def describe_training_job(session: SageMakerSession, job_name: str) -> dict[str, Any]:
    """SDK v2's ``Session.describe_training_job``: DescribeTrainingJob's answer for ``job_name``."""
    return session.sagemaker_client.describe_training_job(TrainingJobName=job_name)


def wait_for_job(session: SageMakerSession, job: str, poll: int = 5) -> dict[str, Any]:
    """SDK v2's ``Session.wait_for_job``: block until the training job ``job`` ends, without its log;
    returns its description.

    Raises:
        TrainingJobFailedError: the job failed, or was stopped at its ``max_run`` (SDK v2 raised
            its ``UnexpectedStatusException`` there).
    """
    CloudJob(job_name=job, session=session).wait(logs=False, poll_seconds=poll)
    return describe_training_job(session, job)


# SDK v2's Session methods notebooks call after fit(), which sagemaker-core's Session has not.
SDK_V2_SESSION_METHODS = {
    "logs_for_job": logs_for_job,
    "describe_training_job": describe_training_job,
    "wait_for_job": wait_for_job,
}


@functools.cache
def _session_class():
    """The session class estimators default to, made on first use (sagemaker-core's session is imported lazily)."""
    from sagemaker.core.helper.session_helper import Session as CoreSession

    class Session(CoreSession):
        """A sagemaker-core ``Session`` with SDK v2's ``logs_for_job``, ``describe_training_job`` and
        ``wait_for_job``, the session estimators default to (SDK v2 notebooks call
        ``estimator.sagemaker_session.logs_for_job(...)``, ``.upload_data(...)``, ``.default_bucket()``,
        ``.sagemaker_client``)."""

        logs_for_job = logs_for_job
        describe_training_job = describe_training_job
        wait_for_job = wait_for_job

    return Session


def resolve_session(sagemaker_session: SageMakerSession | None = None):
    """A sagemaker-core ``Session``: the one given, one wrapping a given ``boto3.Session``, or a new one
    from the default AWS configuration (region, credentials, ``AWS_ENDPOINT_URL``); each has SDK v2's
    ``logs_for_job``, ``describe_training_job`` and ``wait_for_job`` (a given session without them
    gets them as attributes, nothing else changed).

    Raises:
        EstimatorArgumentError: ``sagemaker_session`` is neither of those, or (none given) no AWS
            region is configured."""
    from sagemaker.core.helper.session_helper import Session

    if sagemaker_session is None:
        _check_region_configured()
        return _session_class()()
    if isinstance(sagemaker_session, Session):
        for name, method in SDK_V2_SESSION_METHODS.items():  # the user's own session (a PipelineSession too)
            if not hasattr(sagemaker_session, name):
                setattr(sagemaker_session, name, types.MethodType(method, sagemaker_session))
        return sagemaker_session
    if hasattr(sagemaker_session, "client") and hasattr(sagemaker_session, "region_name"):  # a boto3.Session
        return _session_class()(boto_session=sagemaker_session)
    raise EstimatorArgumentError(
        f"sagemaker_session must be a sagemaker.core Session or a boto3.Session, got {type(sagemaker_session).__name__}"
    )


NO_REGION = (
    "no AWS region is configured, and SageMaker training jobs run in one: set AWS_DEFAULT_REGION, run "
    "'aws configure', or pass sagemaker_session=Session(boto_session=boto3.Session(region_name='us-west-2'))"
)


def _check_region_configured() -> None:
    """Refuse, with what to do, what sagemaker-core's ``Session()`` refuses with a bare ValueError.

    Raises:
        EstimatorArgumentError: the default AWS configuration names no region (or an empty one).
    """
    import boto3

    if not (boto3.DEFAULT_SESSION or boto3.Session()).region_name:  # None, or AWS_DEFAULT_REGION=""
        raise EstimatorArgumentError(NO_REGION)


def bucket_of(s3_uri: str) -> str:
    """``s3://bucket/prefix`` -> ``bucket``."""
    return s3_uri.removeprefix("s3://").split("/", 1)[0]


def upload_source(
    sagemaker_session: SageMakerSession, archive: Path, *, bucket: str, key_prefix: str, kms_key: str | None = None
) -> str:
    """Upload ``sourcedir.tar.gz`` to ``s3://<bucket>/<key_prefix>/``; returns its URI.

    Jobs use ``<job name>/source`` (SDK v2's layout); pipeline definitions use a prefix named by the
    archive's content hash, so rebuilding a definition from the same code gives the same URI. The
    object is encrypted with SSE-KMS (``kms_key``, else the AWS managed key), as SDK v2 uploaded it.
    """
    extra_args = {"ServerSideEncryption": "aws:kms", **({"SSEKMSKeyId": kms_key} if kms_key else {})}
    return sagemaker_session.upload_data(str(archive), bucket=bucket, key_prefix=key_prefix, extra_args=extra_args)


@dataclass
class CloudJob:
    """A SageMaker training job created (or attached to) by sagemaker-tc.

    Its methods are the ``local_process`` job's (:class:`~sagemaker_tc.sdk.local.job.LocalJob`), with
    the same meaning: ``wait(logs=...)``, ``stop()``, ``describe()``, ``logs()``.

    Attributes:
        job_name: the job's name.
        session: the sagemaker-core session it runs under.
    """

    job_name: str
    session: SageMakerSession

    @property
    def name(self) -> str:
        """The job's name (SDK v2's ``latest_training_job.name``)."""
        return self.job_name

    def _resource(self):
        from sagemaker.core.resources import TrainingJob

        return TrainingJob.get(self.job_name, session=self.session.boto_session, region=self.session.boto_region_name)

    def describe(self) -> dict[str, Any]:
        """DescribeTrainingJob's answer, as of now (``TrainingJobStatus``, ``SecondaryStatus``,
        ``FailureReason``, ``ModelArtifacts``, ...)."""
        described = self.session.sagemaker_client.describe_training_job(TrainingJobName=self.job_name)
        described.pop("ResponseMetadata", None)
        return described

    @property
    def status(self) -> str:
        """``InProgress``, ``Completed``, ``Failed``, ``Stopping`` or ``Stopped``."""
        return self.describe()["TrainingJobStatus"]

    @property
    def model_data(self) -> str | None:
        """S3 URI of ``model.tar.gz`` once the job ended with one, else None."""
        return self.describe().get("ModelArtifacts", {}).get("S3ModelArtifacts")

    @property
    def sagemaker_session(self) -> SageMakerSession:
        """SDK v2's name for :attr:`session`."""
        return self.session

    def update_profiler(self, *args: Any, **kwargs: Any) -> None:
        """SDK v2's: refused (:class:`~sagemaker_tc.errors.MemberNotOfferedError`), with the sagemaker-core call."""
        raise MemberNotOfferedError(
            "latest_training_job.update_profiler() (SDK v2's) is not offered by sagemaker-tc: "
            + after_fit.PROFILER_UPDATE
        )

    @classmethod
    def start_new(cls, *args: Any, **kwargs: Any) -> None:
        """SDK v2's: refused (:class:`~sagemaker_tc.errors.MemberNotOfferedError`): ``estimator.fit()`` starts jobs."""
        raise MemberNotOfferedError(
            "latest_training_job.start_new() (SDK v2's) is not offered by sagemaker-tc: estimator.fit(wait=False) "
            "starts a new job"
        )

    def rule_job_summary(self) -> list[dict[str, Any]]:
        """SDK v2's: the job's Debugger and profiler rule evaluations as DescribeTrainingJob lists
        them (``DebugRuleEvaluationStatuses`` then ``ProfilerRuleEvaluationStatuses``; empty without rules)."""
        return job_status.rule_summary(self.describe())

    def stop(self) -> None:
        """``StopTrainingJob`` through sagemaker-core: SageMaker sends SIGTERM to the job's processes,
        waits 120 seconds, then stops them; the job goes ``Stopping``, then ``Stopped``, keeping its
        model and checkpoints. Returns at once; :meth:`wait` for the end. A job that already ended is
        left as it is (SageMaker refuses to stop it; logged).

        Raises:
            botocore.exceptions.ClientError: the service refused the request (for a job still running).
        """
        from botocore.exceptions import ClientError

        try:
            self._resource().stop()
        except ClientError as error:
            status = self.describe()["TrainingJobStatus"]
            if error.response.get("Error", {}).get("Code") != "ValidationException" or status not in job_status.ENDED:
                raise
            logger.info("Training job %s already ended (%s): nothing to stop", self.job_name, status)

    def logs(self) -> str:
        """The job's log so far: its CloudWatch streams (``/aws/sagemaker/TrainingJobs``,
        ``<job name>/algo-N-...``) interleaved by event timestamp as SDK v2 printed them
        (sagemaker-core's ``multi_stream_iter``), every line starting with the stream's host
        (``algo-1 | ``) as ``local_process`` jobs print them. Empty while the log group does not
        exist yet."""
        from sagemaker.core.logs import multi_stream_iter

        client = self.session.boto_session.client("logs", region_name=self.session.boto_region_name)
        pages = client.get_paginator("describe_log_streams").paginate(
            logGroupName=LOG_GROUP, logStreamNamePrefix=f"{self.job_name}/"
        )
        try:
            names = [stream["logStreamName"] for page in pages for stream in page["logStreams"]]
        except client.exceptions.ResourceNotFoundException:  # no job has logged in this account yet
            return ""
        hosts = [name.removeprefix(f"{self.job_name}/").rsplit("-", 1)[0] for name in names]
        lines = [f"{hosts[index]} | {event['message']}" for index, event in multi_stream_iter(client, LOG_GROUP, names)]
        return "".join(line if line.endswith("\n") else f"{line}\n" for line in lines)

    def wait(self, logs: bool | str = True, *, poll_seconds: int = 5) -> str | None:
        """Block until the job ends; stream its CloudWatch log when ``logs`` (True, or SDK v2's
        ``"All"``, ``"Training"``, ``"Rules"``; False, None or ``"None"`` for no log).

        Returns:
            The S3 URI of ``model.tar.gz``.

        Raises:
            EstimatorArgumentError: a ``logs`` value ``fit()`` would refuse (before any AWS call).
            TrainingJobFailedError: the job ended ``Failed``, or ``Stopped`` at its ``max_run``
                (``MaxRuntimeExceeded``); carries its FailureReason. A job stopped with :meth:`stop`
                raises nothing.
        """
        from sagemaker.core.utils.exceptions import FailedStatusError

        logs = job_status.check_logs(logs, call="wait")
        job = self._resource()
        try:
            job.wait(poll=poll_seconds, logs=logs)
        except FailedStatusError:
            pass
        state = self.describe()
        job_status.check_outcome(
            self.job_name, state["TrainingJobStatus"], state.get("SecondaryStatus"), state.get("FailureReason")
        )
        return state.get("ModelArtifacts", {}).get("S3ModelArtifacts")


def attach(training_job_name: str, sagemaker_session: SageMakerSession | None = None) -> CloudJob:
    """The handle of an existing training job, checked to exist.

    Raises:
        EstimatorArgumentError: a name that is no TrainingJobName (``""``, not a string, a control
            character; checked before any AWS call); no session given and no AWS region configured;
            no such job in the session's account and region, or it cannot be described.
    """
    from botocore.exceptions import ClientError

    try:
        check_job_name(training_job_name)
    except EstimatorArgumentError:
        raise EstimatorArgumentError(
            f"training_job_name {training_job_name!r} is not a training job's name: SageMaker's job names are 1-63 "
            "letters, digits and '-', starting with a letter or digit (see the SageMaker console's Training jobs)"
        ) from None
    try:
        session = resolve_session(sagemaker_session)
    except EstimatorArgumentError as error:
        raise EstimatorArgumentError(
            f"cannot attach to training job {training_job_name!r}: {error} (attach() reads SageMaker training "
            "jobs; a local job's files are in its output_path, under the job's name)"
        ) from None
    job = CloudJob(job_name=training_job_name, session=session)
    try:
        job.describe()  # fail now if the job does not exist
    except ClientError as error:
        raise EstimatorArgumentError(f"cannot attach to training job {training_job_name!r}: {error}") from None
    return job


def create_job(request: TrainingJobRequest, sagemaker_session: SageMakerSession) -> CloudJob:
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
        session=sagemaker_session.boto_session,
        region=sagemaker_session.boto_region_name,
        **optional,  # CheckpointConfig, VpcConfig, Tags, ... as set
    )
    logger.info("Created training job %s", request.training_job_name)
    return CloudJob(job_name=request.training_job_name, session=sagemaker_session)
