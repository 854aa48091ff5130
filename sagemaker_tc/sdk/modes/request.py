"""The CreateTrainingJob request for one run of a checked spec (:class:`~sagemaker_tc.sdk.spec.EstimatorSpec`).

Every mode builds its request here, from values: the spec, the job's name and channels, and where
the job writes (``output_path``: an ``s3://`` prefix for a SageMaker job, a ``file://`` URI for a
local one, which the local modes resolve themselves). Nothing here imports the local engine.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from sagemaker_tc import contract
from sagemaker_tc.sdk.request import TrainingJobRequest, build_request, script_mode_hyperparameters
from sagemaker_tc.sdk.settings_request import apply_settings

if TYPE_CHECKING:
    from sagemaker_tc.sdk.spec import EstimatorSpec


def request_for(
    spec: EstimatorSpec,
    job_name: str,
    channels: dict[str, Any],
    submit_directory: str = "",
    *,
    output_path: str,
    image_uri: str | None = None,
    region: str | None = None,
    experiment_config: Any = None,
) -> TrainingJobRequest:
    """The request for one run of ``spec``.

    Args:
        job_name: the job's name. channels: channel name -> URI or ``Channel`` shape.
        submit_directory: where the code is (the modes fill it in once staged:
            :func:`~sagemaker_tc.sdk.request.with_submit_directory`).
        output_path: the job's ``S3OutputPath``: the cloud job's resolved ``s3://`` prefix, or a
            local job's output folder as a ``file://`` URI.
        image_uri: the training image (None: the spec's ``image_uri``).
        region: the job's AWS region (SageMaker jobs: the Debugger rule images, ``sagemaker_region``).
        experiment_config: sagemaker-core's ``ExperimentConfig`` (None: not sent).
    """
    program = contract.LAUNCHER_PROGRAM if spec.compiler_enabled else spec.source.entry_point
    hyperparameters = spec.hyperparameters()
    hyperparameters.update(
        script_mode_hyperparameters(
            program=program, submit_directory=submit_directory, job_name=job_name, region=region
        )
    )
    request = build_request(
        job_name=job_name,
        image_uri=image_uri or spec.image_uri,
        hyperparameters=hyperparameters,
        environment=spec.environment,
        channels=channels,
        output_path=output_path,
        instance_type=spec.instance_type,
        instance_count=spec.instance_count,
        volume_size_gb=spec.volume_size,
        max_run_seconds=spec.max_run,
        role=spec.role,
        metrics=spec.metric_shapes(),
        checkpoint_s3_uri=spec.checkpoint_s3_uri,
        checkpoint_local_path=spec.checkpoint_local_path,
    )
    request = apply_settings(request, spec.settings, cloud=spec.is_cloud, region=region)
    if experiment_config is not None:
        request = dataclasses.replace(request, experiment_config=experiment_config)
    return request
