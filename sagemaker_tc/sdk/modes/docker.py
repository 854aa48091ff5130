"""``instance_type="local"`` / ``"local_gpu"``: the training image runs with docker compose on this host."""

from __future__ import annotations

import tarfile
from typing import TYPE_CHECKING

from sagemaker_tc.sdk import local_docker
from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.local_process import local_path
from sagemaker_tc.sdk.request import make_job_name
from sagemaker_tc.sdk.source import staged_archive

if TYPE_CHECKING:
    from sagemaker_tc.sdk.estimator import _FrameworkEstimator


def region_for_local() -> str:
    """The AWS region that picks the DLC image in Docker local mode (the default region, else us-east-1)."""
    import boto3

    return boto3.session.Session().region_name or "us-east-1"


def run(estimator: _FrameworkEstimator, inputs, *, job_name: str | None) -> str:
    """Run the job with sagemaker-core's local engine; the code is unpacked under
    ``<output_path>/<job>/code`` and mounted as ``/opt/ml/code``.

    Returns:
        The ``file://`` URI of ``model.tar.gz``.

    Raises:
        ChannelNotFoundError: an input is missing or has a bad name.
        DockerNotAvailableError: no docker CLI, engine or compose (checked before any code is staged).
        UnsupportedImageError: no stock DLC for the versions (without ``image_uri``).
    """
    channels = estimator_channels(estimator, inputs, cloud=False)
    local_docker.check_docker()  # before any work: a clear error when Docker is missing
    image_uri = estimator.image_uri or estimator.training_image_uri(region_for_local())
    job_name = job_name or make_job_name(estimator.base_job_name)
    code_dir = local_path(estimator.output_path) / job_name / "code"
    with staged_archive(estimator.source, inject_launcher=estimator.compiler_enabled) as archive:
        code_dir.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(code_dir, filter="data")
    request = estimator._build_request(job_name, channels, code_dir.as_uri(), image_uri=image_uri)
    return local_docker.run_job(request)
