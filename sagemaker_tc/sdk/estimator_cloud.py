"""The estimators' methods for jobs and Pipelines that need no estimator state but its source, image
and latest job: ``wait``, ``attach``, and what a Pipelines ``TrainingStep`` reads."""

from __future__ import annotations

from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk import cloud


class CloudJobMethods:
    """Mixed into :class:`~sagemaker_tc.sdk.estimator._FrameworkEstimator`; uses its ``source``,
    ``image_uri``, ``latest_training_job`` and ``model_data``."""

    @property
    def source_code(self):
        """The code as sagemaker-core's ``SourceCode`` (Pipelines hash it to decide step caching)."""
        from sagemaker.core.training.configs import SourceCode

        if self.source.root is None:
            return SourceCode(entry_script=str(self.source.entry_file))
        return SourceCode(source_dir=str(self.source.root), entry_script=self.source.entry_point)

    @property
    def training_image(self) -> str | None:
        """The training image the cloud job uses (``image_uri``, or the stock DLC resolved at ``fit()``)."""
        return self.image_uri

    def wait(self, logs: bool = True) -> None:
        """Wait for the latest job started with ``fit(wait=False)`` (a SageMaker job, or a local
        one: ``local_process``, ``local``, ``local_gpu``); sets ``model_data``.

        Raises:
            EstimatorArgumentError: no job was started.
            TrainingJobFailedError: the job failed, or was stopped at its ``max_run`` (carries its
                FailureReason); a job stopped with ``latest_training_job.stop()`` raises nothing.
        """
        if self.latest_training_job is None:
            raise EstimatorArgumentError("no training job to wait for: call fit(..., wait=False) first")
        self.model_data = self.latest_training_job.wait(logs=logs)

    @classmethod
    def attach(cls, training_job_name: str, sagemaker_session: Any = None) -> cloud.CloudJob:
        """Attach to an existing SageMaker training job by name: returns its handle
        (``status``, ``model_data``, ``wait()``), not an estimator (see :func:`cloud.attach`)."""
        return cloud.attach(training_job_name, sagemaker_session)
