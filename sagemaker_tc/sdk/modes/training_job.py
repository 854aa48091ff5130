"""``ml.*`` instance types: a SageMaker training job, created through sagemaker-core.

:func:`prepare` does every check and look-up a job and a pipeline step share (role, session,
region, image, job name, bucket) before anything is uploaded, from the checked spec's values
(:class:`CloudArguments`); :func:`sagemaker_tc.sdk.modes.run` then builds the request and either
:func:`start` uploads the source and creates the job, or the Pipelines step takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable
from sagemaker.core.workflow.pipeline_context import PipelineSession

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk import cloud
from sagemaker_tc.sdk.channels import check_file_system_vpc, is_pipeline_channel
from sagemaker_tc.sdk.hyperparameters import is_pipeline_variable
from sagemaker_tc.sdk.job_settings import JobSettings
from sagemaker_tc.sdk.request import TrainingJobRequest, make_job_name, with_submit_directory
from sagemaker_tc.sdk.source import SourceSpec, archive_digest, staged_archive
from sagemaker_tc.sdk.value_checks import check_role

if TYPE_CHECKING:
    from sagemaker_tc.sdk.spec import EstimatorSpec


@dataclass(frozen=True)
class CloudArguments:
    """The values a cloud job (or pipeline step) reads, all checked when the estimator was built.

    Attributes:
        role: the IAM role (checked here: a cloud job needs one).
        session: the estimator's ``sagemaker_session`` (None: a default one is made).
        instance_type: the instance type (a pipeline variable only under a ``PipelineSession``).
        hyperparameters: the job's hyperparameters as sent (pipeline variables are refused outside a pipeline).
        output_path: the estimator's ``output_path`` (None: the session's default bucket).
        base_job_name: the job name's base (and, in pipelines, the code's key prefix).
        code_location: SDK v2's ``code_location`` (None: the output path's bucket).
        settings: SDK v2's job settings (``subnets``, ``output_kms_key`` are read here).
        image_for_region: region -> the training image (``image_uri``, else the stock DLC).
        source: the code to ship.
        inject_launcher: ship the compiler's launcher with the code (the compiler is on).
        instance_count, max_run, environment: as given (pipeline variables only under a ``PipelineSession``).
    """

    role: str | None
    session: cloud.SageMakerSession
    instance_type: Any
    hyperparameters: dict[str, Any]
    output_path: Any
    base_job_name: str
    code_location: str | None
    settings: JobSettings
    image_for_region: Callable[[str], str]
    source: SourceSpec
    inject_launcher: bool
    instance_count: Any = 1
    max_run: Any = None
    environment: dict[str, Any] | None = None

    @classmethod
    def of(cls, spec: EstimatorSpec, session: cloud.SageMakerSession | None) -> CloudArguments:
        """The values of ``spec`` a cloud job reads (``session``: the estimator's, None: a default one)."""
        return cls(
            role=spec.role,
            session=session,
            instance_type=spec.instance_type,
            instance_count=spec.instance_count,
            max_run=spec.max_run,
            environment=spec.environment,
            hyperparameters=spec.hyperparameters(),
            output_path=spec.output_path,
            base_job_name=spec.base_job_name,
            code_location=spec.code_location,
            settings=spec.settings,
            image_for_region=spec.image_for,
            source=spec.source,
            inject_launcher=spec.compiler_enabled,
        )


@dataclass(frozen=True)
class CloudTarget:
    """Where and how a cloud job (or pipeline step) runs, resolved before any upload.

    Attributes:
        session: the sagemaker-core session (a ``PipelineSession`` when building a pipeline).
        in_pipeline: building a pipeline definition: no job is created.
        region: the session's AWS region.
        image_uri: the training image (``image_uri`` or the stock DLC).
        job_name: the job's name.
        bucket: where the source goes (``code_location``'s bucket, else the output path's, else the
            session's default one).
        output_path: ``s3://`` prefix of the job's artifacts.
        channels: channel name -> ``s3://`` URI or ``Channel`` shape.
        code_prefix: ``code_location``'s key prefix, else the session's ``default_bucket_prefix``
            when the output goes to the default bucket, under which the source goes ('' without one).
        code_kms_key: the KMS key the source is encrypted with (SSE-KMS; None: the AWS managed key),
            as SDK v2: ``output_kms_key``, unless ``code_location`` is in another bucket than the output.
    """

    session: cloud.SageMakerSession
    in_pipeline: bool
    region: str
    image_uri: str
    job_name: str
    bucket: str
    output_path: str
    channels: dict[str, Any]
    code_prefix: str = ""
    code_kms_key: str | None = None


def prepare(channels: dict[str, Any], job: CloudArguments, *, job_name: str | None) -> CloudTarget:
    """Check and resolve everything a cloud job needs, uploading nothing.

    Args:
        channels: the checked ``fit()`` inputs (channel name -> ``s3://`` URI or ``Channel`` shape).

    Raises:
        ChannelNotFoundError: a file-system channel without ``subnets``.
        EstimatorArgumentError: no role or not a role ARN; a bad session; a pipeline variable
            (instance type, input, hyperparameter, output path, instance count, max_run) outside a
            ``PipelineSession``.
        UnsupportedImageError: no stock DLC image for the versions (without ``image_uri``).
    """
    check_file_system_vpc(channels, job.settings.get("subnets"))
    check_role(job.role)
    session = cloud.resolve_session(job.session)
    in_pipeline = isinstance(session, PipelineSession)
    if isinstance(job.instance_type, PipelineVariable) and not in_pipeline:
        raise EstimatorArgumentError(
            "instance_type is a pipeline parameter: build the step under a PipelineSession "
            "(sagemaker_session=PipelineSession()), or pass a plain instance type string"
        )
    if not in_pipeline:
        _refuse_pipeline_variables(job, channels)
    region = session.boto_region_name
    image_uri = job.image_for_region(region)
    job_name = job_name or make_job_name(job.base_job_name)
    bucket, output_path, code_prefix, code_kms_key = _where_things_go(job, session)
    return CloudTarget(
        session=session,
        in_pipeline=in_pipeline,
        region=region,
        image_uri=image_uri,
        job_name=job_name,
        bucket=bucket,
        output_path=output_path,
        channels=channels,
        code_prefix=code_prefix,
        code_kms_key=code_kms_key,
    )


def _refuse_pipeline_variables(job: CloudArguments, channels: dict[str, Any]) -> None:
    """Outside a pipeline: refuse the pipeline variables among the inputs, hyperparameters and output path."""
    variables = [f"input channel {name}" for name, channel in channels.items() if is_pipeline_channel(channel)]
    variables += [
        f"hyperparameter {name}" for name, value in job.hyperparameters.items() if is_pipeline_variable(value)
    ]
    variables += ["output_path"] if is_pipeline_variable(job.output_path) else []
    variables += [name for name in ("instance_count", "max_run") if is_pipeline_variable(getattr(job, name))]
    variables += [
        f"environment {name}" for name, value in (job.environment or {}).items() if is_pipeline_variable(value)
    ]
    if variables:
        raise EstimatorArgumentError(
            f"{', '.join(variables)}: pipeline variables; build the step under a PipelineSession "
            "(sagemaker_session=PipelineSession()), or pass plain values"
        )


def _where_things_go(
    job: CloudArguments, sagemaker_session: cloud.SageMakerSession
) -> tuple[str, Any, str, str | None]:
    """``(code bucket, output path, code key prefix, code KMS key)``, as SDK v2 chose them.

    The output goes to ``output_path``, else the session's default bucket (which asks STS for the
    account) under its ``default_bucket_prefix``, where the code goes too; the code goes to the output
    path's bucket, or ``code_location``. The code is encrypted with ``output_kms_key`` unless it goes to
    another bucket than the output (or the output path is a pipeline variable: the default bucket).
    """
    output_path, code_prefix = job.output_path, ""
    kms_key = job.settings.get("output_kms_key")
    default_prefix = (getattr(sagemaker_session, "default_bucket_prefix", None) or "").strip("/")
    if is_pipeline_variable(output_path):
        bucket, code_prefix, kms_key = sagemaker_session.default_bucket(), default_prefix, None
    elif output_path:
        bucket = cloud.bucket_of(output_path)
    else:
        bucket, code_prefix = sagemaker_session.default_bucket(), default_prefix
        output_path = f"s3://{bucket}/{code_prefix}/" if code_prefix else f"s3://{bucket}/"
    if job.code_location:  # SDK v2: <code_location>/<job name>/source/sourcedir.tar.gz
        output_bucket = bucket
        bucket, _, code_prefix = job.code_location.removeprefix("s3://").partition("/")
        kms_key = job.settings.get("output_kms_key") if bucket == output_bucket else None
    return bucket, output_path, code_prefix.strip("/"), kms_key


def upload_source(
    request: TrainingJobRequest, job: CloudArguments, target: CloudTarget, *, content_named: bool
) -> TrainingJobRequest:
    """Upload ``sourcedir.tar.gz``; returns ``request`` pointed at it.

    Args:
        request: the job's request, built from ``target``.
        content_named: upload under ``<base_job_name>/code/<sha256 of the archive>`` (pipeline
            definitions: the same code gives the same URI), else under ``<job name>/source`` (SDK v2's
            layout); both under ``code_location``'s prefix when it is given.
    """
    with staged_archive(job.source, inject_launcher=job.inject_launcher) as archive:
        if content_named:
            key_prefix = f"{job.base_job_name}/code/{archive_digest(archive)}"
        else:
            key_prefix = f"{target.job_name}/source"
        key_prefix = "/".join(part for part in (target.code_prefix, key_prefix) if part)
        submit_directory = cloud.upload_source(
            target.session, archive, bucket=target.bucket, key_prefix=key_prefix, kms_key=target.code_kms_key
        )
    return with_submit_directory(request, submit_directory)


def start(request: TrainingJobRequest, job: CloudArguments, target: CloudTarget) -> cloud.CloudJob:
    """Upload the source and create the training job; returns its handle (the job runs on).

    Raises:
        botocore.exceptions.ClientError: S3 or SageMaker refused the upload or the request.
    """
    request = upload_source(request, job, target, content_named=False)
    return cloud.create_job(request, target.session)
