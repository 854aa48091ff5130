"""SDK v2 estimator members that are not training, shared by the estimators (:class:`SdkV2Surfaces`).

``deploy()``, ``create_model()``, ``register()`` and ``compile_model()`` are refused with the
sagemaker-core calls that do them; the job's analytics and artifact paths read the job
(:mod:`sagemaker_tc.sdk.after_fit`); ``source_code`` and ``training_image`` are what SageMaker
Pipelines (sagemaker-core's ``retrieve_caller_name``) looks for on a training job producer.
"""

from __future__ import annotations

from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk import after_fit

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


class SdkV2Surfaces:
    """The members above, for a class with SDK v2's estimator attributes (``source``, ``image_uri``,
    ``latest_training_job``)."""

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

    def __getattr__(self, name: str) -> Any:
        """SDK v2's members the estimator does not hold itself (:func:`~sagemaker_tc.sdk.after_fit.sdk_v2_member`).

        Raises:
            MemberNotOfferedError: an SDK v2 member not offered (an ``AttributeError`` too).
            AttributeError: any other missing attribute.
        """
        return after_fit.sdk_v2_member(self, name)

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

    def register(self, *args: Any, **kwargs: Any) -> None:
        """SDK v2's ``register()`` (the Model Registry): refused, with the sagemaker-core call that does it.

        Raises:
            EstimatorArgumentError: always; the message shows the way to register ``model_data``.
        """
        raise EstimatorArgumentError(after_fit.REGISTER_HELP)

    def compile_model(self, *args: Any, **kwargs: Any) -> None:
        """SDK v2's ``compile_model()`` (SageMaker Neo, for inference): refused, with the way to do it.

        Raises:
            EstimatorArgumentError: always; the message says what to use instead.
        """
        raise EstimatorArgumentError(after_fit.COMPILE_MODEL_HELP)

    @property
    def training_job_analytics(self):
        """SDK v2's: sagemaker-core's ``TrainingJobAnalytics`` for the latest SageMaker job (its
        CloudWatch metrics, ``.dataframe()``); see :func:`~sagemaker_tc.sdk.after_fit.training_job_analytics`.

        Raises:
            EstimatorArgumentError: no job yet, or a local one (no CloudWatch metrics).
        """
        return after_fit.training_job_analytics(self)

    def latest_job_debugger_artifacts_path(self) -> str | None:
        """SDK v2's: ``<DebugHookConfig S3 path>/<job name>/debug-output`` of the latest job, or None.

        Raises:
            EstimatorArgumentError: no job was started or attached.
        """
        return after_fit.artifacts_path(self, "debugger")

    def latest_job_tensorboard_artifacts_path(self) -> str | None:
        """SDK v2's: ``<TensorBoardOutputConfig S3 path>/<job name>/tensorboard-output``, or None.

        Raises:
            EstimatorArgumentError: no job was started or attached.
        """
        return after_fit.artifacts_path(self, "tensorboard")

    def latest_job_profiler_artifacts_path(self) -> str | None:
        """SDK v2's: ``<ProfilerConfig S3 path>/<job name>/rule-output`` of the latest job, or None.

        Raises:
            EstimatorArgumentError: no job was started or attached.
        """
        return after_fit.artifacts_path(self, "profiler")
