"""``instance_type="local"`` / ``"local_gpu"``: the training image runs with docker compose on this host."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.local.docker import check_docker
from sagemaker_tc.sdk.local.docker_job import DockerJob
from sagemaker_tc.sdk.local.job import LocalJob
from sagemaker_tc.sdk.modes.request import request_for
from sagemaker_tc.sdk.request import TrainingJobRequest, make_job_name, with_submit_directory
from sagemaker_tc.sdk.source import SourceSpec, staged_archive
from sagemaker_tc.sdk.source_tree import mark_job_folder

if TYPE_CHECKING:
    from sagemaker_tc.sdk.spec import EstimatorSpec

__all__ = ["check_docker", "region_for_local", "run", "start"]


def region_for_local() -> str:
    """The AWS region that picks the DLC image in Docker local mode (the default region, else us-east-1)."""
    import boto3

    return boto3.session.Session().region_name or "us-east-1"


def start(spec: EstimatorSpec, inputs: Any, *, job_name: str | None, wait: bool, logs: bool) -> LocalJob:
    """Check the inputs and Docker, build the request and :func:`run` it under the spec's local ``output_path``.

    Raises:
        ChannelNotFoundError: an input is missing or has a bad name.
        DockerNotAvailableError: no docker CLI, engine or compose (checked before any code is staged).
        UnsupportedImageError: no stock DLC for the versions (without ``image_uri``).
    """
    channels = estimator_channels(spec, inputs, cloud=False)
    check_docker()  # before any work: a clear error when Docker is missing
    image_uri = spec.image_uri or spec.image_for(region_for_local())
    job_name = job_name or make_job_name(spec.base_job_name)
    output = local_path(spec.output_path)
    request = request_for(spec, job_name, channels, image_uri=image_uri, output_path=output.as_uri())
    return run(
        request, spec.source, inject_launcher=spec.compiler_enabled, job_dir=output / job_name, wait=wait, logs=logs
    )


def run(
    request: TrainingJobRequest, source: SourceSpec, *, inject_launcher: bool, job_dir: Path, wait: bool, logs: bool
) -> LocalJob:
    """Start the job with sagemaker-core's local engine: in the foreground with ``wait`` (its log
    streamed to stdout with ``logs``; returns once it ended), else in a background thread (returns at
    once). The code is unpacked under ``<job_dir>/code`` and mounted as ``/opt/ml/code``.
    A failed or stopped job raises nothing here: ``job.wait()`` says how it ended.

    Args:
        request: the job's request (:func:`.request.request_for`; its submit directory is set here); the
            caller has run :func:`check_docker` before building it.
        inject_launcher: ship the compiler's launcher with the code (the compiler is on).
        job_dir: ``<output_path>/<job name>``, which must not exist yet.

    Raises:
        EstimatorArgumentError: ``SM_TC_STOP_GRACE_S`` is not a number >= 0.
    """
    code_dir = job_dir / "code"
    with staged_archive(source, inject_launcher=inject_launcher) as archive:
        code_dir.mkdir(parents=True)
        mark_job_folder(job_dir)  # a later job with source_dir="." never ships this one
        with tarfile.open(archive) as tar:
            tar.extractall(code_dir, filter="data")
    request = with_submit_directory(request, code_dir.as_uri())
    job = LocalJob(DockerJob.prepare(request, job_dir))
    if wait:
        return job.run(sys.stdout if logs else None)
    return job.start()
