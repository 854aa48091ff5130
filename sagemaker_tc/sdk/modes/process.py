"""``instance_type="local_process"``: the job runs on this host through the real toolkit, no Docker."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.folder_checks import check_cache_apart_from_channels
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.local import process as local_process
from sagemaker_tc.sdk.local.job import LocalJob
from sagemaker_tc.sdk.modes.request import request_for
from sagemaker_tc.sdk.request import TrainingJobRequest, make_job_name, with_submit_directory
from sagemaker_tc.sdk.source import SourceSpec, staged_archive

if TYPE_CHECKING:
    from sagemaker_tc.sdk.spec import EstimatorSpec


def start(spec: EstimatorSpec, inputs: Any, *, job_name: str | None, wait: bool, logs: bool) -> LocalJob:
    """Check the inputs, build the request (output under the spec's local ``output_path``) and :func:`run` it.

    Raises:
        ChannelNotFoundError: an input is missing or has a bad name (before the job folder exists).
        EstimatorArgumentError: a local compile cache overlapping a channel's folder; see :func:`run`.
    """
    channels = estimator_channels(spec, inputs, cloud=False)
    check_cache_apart_from_channels(spec.local_cache, channels)
    job_name = job_name or make_job_name(spec.base_job_name)
    request = request_for(spec, job_name, channels, output_path=local_path(spec.output_path).as_uri())
    return run(request, spec.source, inject_launcher=spec.compiler_enabled, wait=wait, logs=logs)


def run(request: TrainingJobRequest, source: SourceSpec, *, inject_launcher: bool, wait: bool, logs: bool) -> LocalJob:
    """Stage ``source`` as ``sourcedir.tar.gz`` (the toolkit unpacks it at start), point the request
    at it and start the job: in the foreground with ``wait`` (its log streamed to stdout with
    ``logs``; returns once it ended), else in a background thread (returns at once). A failed or
    stopped job raises nothing here: ``job.wait()`` says how it ended.

    Args:
        request: the job's request (:func:`.request.request_for`; its submit directory is set here).
        inject_launcher: ship the compiler's launcher with the code (the compiler is on).

    Raises:
        EstimatorArgumentError: the job folder already exists; ``SM_TC_STOP_GRACE_S`` is not a number >= 0.
        OptMlUnavailableError: the job names ``/opt/ml`` and this machine allows no mount namespace.
    """
    staging = ExitStack()  # the source archive lives until the job ends (the toolkit unpacks it at start)
    try:
        archive = staging.enter_context(staged_archive(source, inject_launcher=inject_launcher))
        request = with_submit_directory(request, str(archive))
        job = LocalJob(local_process.prepare_job(request), cleanup=staging.close)
    except BaseException:
        staging.close()
        raise
    if wait:
        return job.run(sys.stdout if logs else None)
    return job.start()
