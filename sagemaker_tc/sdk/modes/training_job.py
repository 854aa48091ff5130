"""``ml.*`` instance types: a SageMaker training job, created through sagemaker-core.

:func:`prepare` does every check and look-up a job and a pipeline step share (channels, role,
session, region, image, job name, bucket) before anything is uploaded; :func:`start` uploads the
source and creates the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable
from sagemaker.core.workflow.pipeline_context import PipelineSession

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk import cloud
from sagemaker_tc.sdk.arguments import check_role
from sagemaker_tc.sdk.channels import check_file_system_vpc, estimator_channels, is_pipeline_channel
from sagemaker_tc.sdk.hyperparameters import is_pipeline_variable
from sagemaker_tc.sdk.request import TrainingJobRequest, make_job_name
from sagemaker_tc.sdk.source import archive_digest, staged_archive

if TYPE_CHECKING:
    from sagemaker_tc.sdk.estimator import _FrameworkEstimator


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

    session: Any
    in_pipeline: bool
    region: str
    image_uri: str
    job_name: str
    bucket: str
    output_path: str
    channels: dict[str, Any]
    code_prefix: str = ""
    code_kms_key: str | None = None


def prepare(estimator: _FrameworkEstimator, inputs, *, job_name: str | None) -> CloudTarget:
    """Check and resolve everything a cloud job needs, uploading nothing.

    Raises:
        ChannelNotFoundError: an input is not an ``s3://`` URI or has a bad name; a file-system
            channel without ``subnets``.
        EstimatorArgumentError: no role or not a role ARN; a bad session; a pipeline variable
            (instance type, input, hyperparameter, output path) outside a ``PipelineSession``.
        UnsupportedImageError: no stock DLC image for the versions (without ``image_uri``).
    """
    channels = estimator_channels(estimator, inputs, cloud=True)
    check_file_system_vpc(channels, estimator.settings.get("subnets"))
    check_role(estimator.role)
    session = cloud.resolve_session(estimator.sagemaker_session)
    in_pipeline = isinstance(session, PipelineSession)
    if isinstance(estimator.instance_type, PipelineVariable) and not in_pipeline:
        raise EstimatorArgumentError(
            "instance_type is a pipeline parameter: build the step under a PipelineSession "
            "(sagemaker_session=PipelineSession()), or pass a plain instance type string"
        )
    if not in_pipeline:
        _refuse_pipeline_variables(estimator, channels)
    region = session.boto_region_name
    image_uri = estimator.image_uri or estimator.training_image_uri(region)
    job_name = job_name or make_job_name(estimator.base_job_name)
    bucket, output_path, code_prefix, code_kms_key = _where_things_go(estimator, session)
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


def _refuse_pipeline_variables(estimator: _FrameworkEstimator, channels: dict[str, Any]) -> None:
    """Outside a pipeline: refuse the pipeline variables among the inputs, hyperparameters and output path."""
    variables = [f"input channel {name}" for name, channel in channels.items() if is_pipeline_channel(channel)]
    variables += [
        f"hyperparameter {name}" for name, value in estimator.hyperparameters().items() if is_pipeline_variable(value)
    ]
    variables += ["output_path"] if is_pipeline_variable(estimator.output_path) else []
    if variables:
        raise EstimatorArgumentError(
            f"{', '.join(variables)}: pipeline variables; build the step under a PipelineSession "
            "(sagemaker_session=PipelineSession()), or pass plain values"
        )


def _where_things_go(estimator: _FrameworkEstimator, session) -> tuple[str, Any, str, str | None]:
    """``(code bucket, output path, code key prefix, code KMS key)``, as SDK v2 chose them.

    The output goes to ``output_path``, else the session's default bucket (which asks STS for the
    account) under its ``default_bucket_prefix``, where the code goes too; the code goes to the output
    path's bucket, or ``code_location``. The code is encrypted with ``output_kms_key`` unless it goes to
    another bucket than the output (or the output path is a pipeline variable: the default bucket).
    """
    output_path, code_prefix = estimator.output_path, ""
    kms_key = estimator.settings.get("output_kms_key")
    default_prefix = (getattr(session, "default_bucket_prefix", None) or "").strip("/")
    if is_pipeline_variable(output_path):
        bucket, code_prefix, kms_key = session.default_bucket(), default_prefix, None
    elif output_path:
        bucket = cloud.bucket_of(output_path)
    else:
        bucket, code_prefix = session.default_bucket(), default_prefix
        output_path = f"s3://{bucket}/{code_prefix}/" if code_prefix else f"s3://{bucket}/"
    if estimator.code_location:  # SDK v2: <code_location>/<job name>/source/sourcedir.tar.gz
        output_bucket = bucket
        bucket, _, code_prefix = estimator.code_location.removeprefix("s3://").partition("/")
        kms_key = estimator.settings.get("output_kms_key") if bucket == output_bucket else None
    return bucket, output_path, code_prefix.strip("/"), kms_key


def upload_and_build(estimator: _FrameworkEstimator, target: CloudTarget, *, content_named: bool) -> TrainingJobRequest:
    """Upload ``sourcedir.tar.gz`` and build the job's request.

    Args:
        content_named: upload under ``<base_job_name>/code/<sha256 of the archive>`` (pipeline
            definitions: the same code gives the same URI), else under ``<job name>/source`` (SDK v2's
            layout); both under ``code_location``'s prefix when it is given.
    """
    with staged_archive(estimator.source, inject_launcher=estimator.compiler_enabled) as archive:
        if content_named:
            key_prefix = f"{estimator.base_job_name}/code/{archive_digest(archive)}"
        else:
            key_prefix = f"{target.job_name}/source"
        key_prefix = "/".join(part for part in (target.code_prefix, key_prefix) if part)
        submit_directory = cloud.upload_source(
            target.session, archive, bucket=target.bucket, key_prefix=key_prefix, kms_key=target.code_kms_key
        )
    return estimator._build_request(
        target.job_name,
        target.channels,
        submit_directory,
        image_uri=target.image_uri,
        output_path=target.output_path,
        region=target.region,
    )


def start(estimator: _FrameworkEstimator, target: CloudTarget) -> cloud.CloudJob:
    """Upload the source and create the training job; returns its handle (the job runs on).

    Raises:
        botocore.exceptions.ClientError: S3 or SageMaker refused the upload or the request.
    """
    request = upload_and_build(estimator, target, content_named=False)
    return cloud.create_job(request, target.session)
