"""The estimators' methods for jobs and Pipelines that need no estimator state but its source, image
and latest job: ``wait``, ``attach``, and what a Pipelines ``TrainingStep`` reads."""

from __future__ import annotations

from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk import cloud

# deploy()/create_model(): refused with the way to host model.tar.gz through sagemaker-core (docs/migration.md).
_DEPLOY_HELP = (
    "{method}() is not offered: sagemaker-tc trains; host the trained model.tar.gz (estimator.model_data) with "
    "an inference image for your versions (sagemaker.core.image_uris.retrieve(..., image_scope='inference')) "
    "through sagemaker-core, e.g.\n"
    "  Model.create(model_name=name, execution_role_arn=role, primary_container=ContainerDefinition("
    "image=inference_image, model_data_url=estimator.model_data))\n"
    "  EndpointConfig.create(endpoint_config_name=name, production_variants=[ProductionVariant("
    "variant_name='AllTraffic', model_name=name, instance_type='ml.g5.xlarge', initial_instance_count=1)])\n"
    "  Endpoint.create(endpoint_name=name, endpoint_config_name=name)\n"
    "(sagemaker.core.resources and sagemaker.core.shapes; see docs/migration.md, 'After fit()')"
)


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
        one: ``local_process``, ``local``, ``local_gpu``). ``model_data`` reads the job, so waiting
        through ``latest_training_job.wait()`` or boto3's waiter sets it too.

        Raises:
            EstimatorArgumentError: no job was started.
            TrainingJobFailedError: the job failed, or was stopped at its ``max_run`` (carries its
                FailureReason); a job stopped with ``latest_training_job.stop()`` raises nothing.
        """
        if self.latest_training_job is None:
            raise EstimatorArgumentError("no training job to wait for: call fit(..., wait=False) first")
        self.latest_training_job.wait(logs=logs)

    def logs(self) -> None:
        """Show the latest job's log on stdout and follow it until the job ends (SDK v2's ``estimator.logs()``).

        Raises:
            EstimatorArgumentError: no job was started.
            TrainingJobFailedError: the job failed, or was stopped at its ``max_run``.
        """
        if self.latest_training_job is None:
            raise EstimatorArgumentError("no training job to show the log of: call fit() first")
        self.latest_training_job.wait(logs=True)

    @property
    def model_data(self) -> str | None:
        """URI of the latest job's ``model.tar.gz``, as SDK v2's estimator read it: from the job itself
        (DescribeTrainingJob's ``ModelArtifacts.S3ModelArtifacts`` on SageMaker, the ``file://``
        artifact locally), however its end was waited for. None before ``fit()`` and while the job
        has no model yet."""
        job = self.latest_training_job
        return None if job is None else job.model_data

    @property
    def sagemaker_session(self):
        """The session given, else (as SDK v2) a default one, made when first read for a SageMaker
        job: a sagemaker-core ``Session`` with SDK v2's ``logs_for_job`` (:class:`cloud.Session`).
        None in local modes without one (they need no AWS session), and while no AWS region is
        configured (``fit()`` then refuses the job after checking its arguments).

        Raises:
            EstimatorArgumentError: the given value is neither a sagemaker-core nor a boto3 session.
        """
        if self._sagemaker_session is None and self.is_cloud:
            try:
                self._sagemaker_session = cloud.resolve_session(None)
            except ValueError:  # no region configured: fit() checks its arguments first, then says so
                return None
        return self._sagemaker_session

    @sagemaker_session.setter
    def sagemaker_session(self, value) -> None:
        self._sagemaker_session = value

    def deploy(self, *args: Any, **kwargs: Any) -> None:
        """SDK v2's ``deploy()``: refused, with the three sagemaker-core calls that host ``model_data``.

        Raises:
            EstimatorArgumentError: always; the message shows the way to deploy.
        """
        raise EstimatorArgumentError(_DEPLOY_HELP.format(method="deploy"))

    def create_model(self, *args: Any, **kwargs: Any) -> None:
        """SDK v2's ``create_model()``: refused like :meth:`deploy`, with the way to do it.

        Raises:
            EstimatorArgumentError: always; the message shows the way to deploy.
        """
        raise EstimatorArgumentError(_DEPLOY_HELP.format(method="create_model"))

    @classmethod
    def attach(cls, training_job_name: str, sagemaker_session: Any = None):
        """Attach to an existing SageMaker training job by name: an estimator of this class rebuilt
        from the job, as SDK v2 returned (:mod:`sagemaker_tc.sdk.attach`); ``latest_training_job`` is
        the job's handle (``status``, ``describe()``, ``wait()``, ``stop()``). ``fit()`` on it is refused
        (its local code is not known).

        Raises:
            EstimatorArgumentError: no such job in the session's account and region.
        """
        from sagemaker_tc.sdk.attach import attached

        return attached(cls, cloud.attach(training_job_name, sagemaker_session))
