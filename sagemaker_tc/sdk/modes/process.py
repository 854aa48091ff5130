"""``instance_type="local_process"``: the job runs on this host through the real toolkit, no Docker."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING

from sagemaker_tc.sdk import local_process
from sagemaker_tc.sdk.arguments import check_cache_apart_from_channels
from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.local_job import LocalJob
from sagemaker_tc.sdk.request import make_job_name
from sagemaker_tc.sdk.source import staged_archive

if TYPE_CHECKING:
    from sagemaker_tc.sdk.estimator import _FrameworkEstimator


def run(estimator: _FrameworkEstimator, inputs, *, wait: bool, logs: bool, job_name: str | None) -> LocalJob:
    """Start the job: in the foreground with ``wait`` (its log streamed to stdout with ``logs``;
    returns once it ended), else in a background thread (returns at once). A failed or stopped job
    raises nothing here: ``job.wait()`` says how it ended.

    Raises:
        ChannelNotFoundError: an input is missing or has a bad name (before the job folder exists).
        EstimatorArgumentError: the job folder already exists; ``SM_TC_STOP_GRACE_S`` is not a number >= 0;
            a local compile cache overlapping a channel's folder.
        OptMlUnavailableError: the job names ``/opt/ml`` and this machine allows no mount namespace.
    """
    channels = estimator_channels(estimator, inputs, cloud=False)
    cache = estimator.compiler_config.cache if estimator.compiler_enabled and estimator.compiler_config else None
    check_cache_apart_from_channels(cache, channels)
    job_name = job_name or make_job_name(estimator.base_job_name)
    staging = ExitStack()  # the source archive lives until the job ends (the toolkit unpacks it at start)
    try:
        archive = staging.enter_context(staged_archive(estimator.source, inject_launcher=estimator.compiler_enabled))
        request = estimator._build_request(job_name, channels, str(archive))
        job = LocalJob(local_process.prepare_job(request), cleanup=staging.close)
    except BaseException:
        staging.close()
        raise
    if wait:
        return job.run(sys.stdout if logs else None)
    return job.start()
