"""``instance_type="local_process"``: the job runs on this host through the real toolkit, no Docker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagemaker_tc.sdk import local_process
from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.request import make_job_name
from sagemaker_tc.sdk.source import staged_archive

if TYPE_CHECKING:
    from sagemaker_tc.sdk.estimator import _FrameworkEstimator


def run(estimator: _FrameworkEstimator, inputs, *, logs: bool, job_name: str | None) -> local_process.LocalJobResult:
    """Run the job in the foreground; a failed job is a result with ``status="Failed"``.

    Raises:
        ChannelNotFoundError: an input is missing or has a bad name (before the job folder exists).
        EstimatorArgumentError: the job folder already exists.
    """
    channels = estimator_channels(estimator, inputs, cloud=False)
    job_name = job_name or make_job_name(estimator.base_job_name)
    with staged_archive(estimator.source, inject_launcher=estimator.compiler_enabled) as archive:
        request = estimator._build_request(job_name, channels, str(archive))
        return local_process.run_job(request, logs=logs)
