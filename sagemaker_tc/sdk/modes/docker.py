"""``instance_type="local"`` / ``"local_gpu"``: the training image runs with docker compose on this host."""

from __future__ import annotations

import sys
import tarfile
from typing import TYPE_CHECKING

from sagemaker_tc.sdk import local_docker
from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.local_docker_job import DockerJob
from sagemaker_tc.sdk.local_job import LocalJob
from sagemaker_tc.sdk.local_process import local_path
from sagemaker_tc.sdk.request import make_job_name
from sagemaker_tc.sdk.source import staged_archive

if TYPE_CHECKING:
    from sagemaker_tc.sdk.estimator import _FrameworkEstimator


def region_for_local() -> str:
    """The AWS region that picks the DLC image in Docker local mode (the default region, else us-east-1)."""
    import boto3

    return boto3.session.Session().region_name or "us-east-1"


def run(estimator: _FrameworkEstimator, inputs, *, wait: bool, logs: bool, job_name: str | None) -> LocalJob:
    """Start the job with sagemaker-core's local engine: in the foreground with ``wait`` (its log
    streamed to stdout with ``logs``; returns once it ended), else in a background thread (returns at
    once). The code is unpacked under ``<output_path>/<job>/code`` and mounted as ``/opt/ml/code``.
    A failed or stopped job raises nothing here: ``job.wait()`` says how it ended.

    Raises:
        ChannelNotFoundError: an input is missing or has a bad name.
        DockerNotAvailableError: no docker CLI, engine or compose (checked before any code is staged).
        EstimatorArgumentError: ``SM_TC_STOP_GRACE_S`` is not a number >= 0.
        UnsupportedImageError: no stock DLC for the versions (without ``image_uri``).
    """
    channels = estimator_channels(estimator, inputs, cloud=False)
    local_docker.check_docker()  # before any work: a clear error when Docker is missing
    image_uri = estimator.image_uri or estimator.training_image_uri(region_for_local())
    job_name = job_name or make_job_name(estimator.base_job_name)
    job_dir = local_path(estimator.output_path) / job_name
    code_dir = job_dir / "code"
    with staged_archive(estimator.source, inject_launcher=estimator.compiler_enabled) as archive:
        code_dir.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(code_dir, filter="data")
    request = estimator._build_request(job_name, channels, code_dir.as_uri(), image_uri=image_uri)
    job = LocalJob(DockerJob.prepare(request, job_dir))
    if wait:
        return job.run(sys.stdout if logs else None)
    return job.start()
