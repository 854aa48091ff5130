"""``HuggingFace`` and ``PyTorch`` estimators with ``compiler_config``, on sagemaker-core 2.x.

Argument names are SageMaker Python SDK v2's, so an SMTC job changes only its imports. The estimator
reads its own signature and keeps a checked, frozen :class:`~sagemaker_tc.sdk.spec.EstimatorSpec`
(every check runs when it is built, before any job starts; ``fit()`` checks its own arguments);
``fit()`` hands the spec to :func:`sagemaker_tc.sdk.modes.run`, which builds the request and runs it
(this host, Docker, a SageMaker job, a Pipelines step).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from sagemaker.core.workflow.pipeline_context import runnable_by_pipeline

from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk import arguments, cloud, compiler_checks, job_status, modes, value_checks
from sagemaker_tc.sdk.compat import SdkV2Surfaces
from sagemaker_tc.sdk.instances import CLOUD_KINDS
from sagemaker_tc.sdk.job_paths import DEFAULT_OUTPUT_PATH
from sagemaker_tc.sdk.job_settings import SETTING_NAMES
from sagemaker_tc.sdk.request import TrainingJobRequest, check_job_name
from sagemaker_tc.sdk.signature import (
    HUGGINGFACE_ORDER,
    PYTORCH_ORDER,
    bind_positional,
    check_unsupported,
    drop_unasked,
)
from sagemaker_tc.sdk.spec import (
    COMPILER_METRIC_DEFINITIONS,
    EstimatorSpec,
    SpecAttribute,
    check_tested_versions,
)
from sagemaker_tc.sdk.value_checks import DEFAULT_MAX_RUN_SECONDS

__all__ = ["COMPILER_METRIC_DEFINITIONS", "DEFAULT_MAX_RUN_SECONDS", "DEFAULT_OUTPUT_PATH", "HuggingFace", "PyTorch"]


class _FrameworkEstimator(SdkV2Surfaces):
    """Shared by :class:`HuggingFace` and :class:`PyTorch`; use those.

    Every argument is checked here, before any job starts (:class:`~sagemaker_tc.sdk.spec.EstimatorSpec`);
    one it does not take (SDK v2's ``disable_profiler``, a typo) is refused with every other one, with
    what to do (:mod:`sagemaker_tc.sdk.signature`).

    SDK v2's job settings (``tags``, ``subnets``, ``volume_kms_key``, ``use_spot_instances``, ...:
    :data:`~sagemaker_tc.sdk.job_settings.SETTING_NAMES`) are checked against CreateTrainingJob's
    limits and reach the request as SDK v2 sends them (:mod:`sagemaker_tc.sdk.settings_request`);
    in local modes the cloud-only ones are logged once and not applied.

    The SageMaker configuration file's defaults fill what is not given, as SDK v2 applied them
    (:mod:`sagemaker_tc.sdk.config_defaults`): on SageMaker the role, VPC, KMS keys, network
    isolation, inter-container encryption, environment and (appended) tags; locally the environment.

    ``allow_symlinks_outside_source_dir=True`` ships what symbolic links in ``source_dir`` point to
    even outside it; by default such a link is a ``SourceLinkError`` (:mod:`sagemaker_tc.sdk.source_tree`).

    Raises (when built; all ``ValueError`` subclasses from :mod:`sagemaker_tc.errors`):
        EstimatorArgumentError: an argument it does not take (all listed at once), of the wrong
            type, or out of range (``max_run``/``volume_size`` must be integers, seconds/GB), a local
            ``output_path`` that is a file, a malformed ``s3://`` URI, an environment variable
            outside CreateTrainingJob's name rule (or, for SageMaker and ``local_process``, its
            512-character limits), a local compile ``cache`` the job cannot see.
        SourceNotFoundError, SourceLinkError: the code to ship is missing, or a link in it is refused.
        HyperparameterError: a name or value the SageMaker toolkit would not pass to the script as given.
        UnsupportedInstanceTypeError: an unknown instance type, or more than 8 ``local_process`` hosts.
        UnsupportedImageError: a CPU instance type for a framework with GPU-only images; with the
            compiler on and no ``image_uri``, versions below PyTorch 2.7 (every mode) or, for a job on
            a stock DLC, versions that match no tested stack (:mod:`sagemaker_tc.sdk.support`);
            with the compiler on, an ``image_uri`` that is an AWS DLC of PyTorch < 2.7 (SMTC's
            ``*-trcomp-training`` images among them) or not of PyTorch.
        ConfigError: ``compiler_config`` is not a ``sagemaker_tc.TrainingCompilerConfig`` (SMTC's
            ``sagemaker.core.training_compiler_config.TrainingCompilerConfig`` is taken as one).
    """

    _default_base_job_name = "training"
    _attached_job: str | None = None  # the job's name, for an estimator made by attach()
    _attached_hyperparameters: dict[str, str] | None = None
    _current_job_name: str | None = None  # SDK v2's: the name of the latest job fit() started
    _latest_request: TrainingJobRequest | None = None  # the latest SageMaker job's request as fit() sent it
    _filled_output_path: str | None = None  # the default output_path fit() filled in (none was given)
    _version_arguments: tuple[str, ...] = ()  # the framework's version arguments (each class names them)
    _framework = "pytorch"  # the image table the training image comes from

    _kind = SpecAttribute("kind")
    _checked_instance_type = SpecAttribute("checked_instance_type")

    def __init__(
        self,
        entry_point: str,
        *,
        source_dir: str | None = None,
        role: str | None = None,
        instance_type: str | None = None,
        instance_count: int = 1,
        py_version: str | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        environment: Mapping[str, str] | None = None,
        distribution: Mapping[str, Any] | None = None,
        compiler_config: TrainingCompilerConfig | None = None,
        output_path: str | None = None,
        base_job_name: str | None = None,
        image_uri: str | None = None,
        metric_definitions: Sequence[Mapping[str, str]] | None = None,
        sagemaker_session: cloud.SageMakerSession | None = None,
        max_run: int = DEFAULT_MAX_RUN_SECONDS,
        volume_size: int = 30,
        checkpoint_s3_uri: str | None = None,
        checkpoint_local_path: str | None = None,
        allow_symlinks_outside_source_dir: bool = False,
        **unsupported: Any,
    ) -> None:
        given_settings = {name: unsupported.pop(name) for name in list(unsupported) if name in SETTING_NAMES}
        drop_unasked(unsupported)  # SDK v2's defaults spelled out (dependencies=[], git_config=None) ask for nothing
        check_unsupported(type(self).__name__, unsupported, self._accepted_arguments())
        self.dependencies, self.git_config, self.instance_groups = [], None, None  # SDK v2's attributes
        given = {name: value for name, value in locals().items() if name in self._named_arguments()}
        del given["sagemaker_session"]  # its sagemaker_config gives the config file's defaults; kept by the estimator
        self.spec = EstimatorSpec.check(
            estimator=type(self).__name__,
            framework=self._framework,
            versions=self._versions(),
            default_base_job_name=self._default_base_job_name,
            sagemaker_config=getattr(sagemaker_session, "sagemaker_config", None),
            given_settings=given_settings,
            **given,
        )
        # SDK v2 defaulted it to a session; here it is made when first read (cloud jobs; local modes need none)
        self._sagemaker_session = sagemaker_session
        self.latest_training_job: Any = None  # a local job (sdk/local/job.py) or a cloud.CloudJob

    @staticmethod
    def _named_arguments() -> list[str]:
        """:meth:`__init__`'s named arguments, in order."""
        parameters = inspect.signature(_FrameworkEstimator.__init__).parameters.values()
        named = [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        return [parameter.name for parameter in named if parameter.name != "self"]

    @classmethod
    def _accepted_arguments(cls) -> list[str]:
        """The estimator's argument names: the entry point, its framework's versions, the shared ones,
        then SDK v2's job settings."""
        names: list[str] = ["entry_point", *cls._version_arguments]
        names += [name for name in cls._named_arguments() if name not in names]
        return names + list(SETTING_NAMES)

    def _versions(self) -> dict[str, str | None]:
        """The framework's version arguments by name, as the attributes now hold them."""
        return {name: getattr(self, name, None) for name in self._version_arguments}

    def _check_tested_stack(self) -> None:
        """Refuse versions whose stock DLC matches no tested stack (:func:`.spec.check_tested_versions`)."""
        check_tested_versions(type(self).__name__, self._framework, self._versions())

    @property
    def is_cloud(self) -> bool:
        """True when ``fit()`` creates a SageMaker training job (an ``ml.*`` instance type)."""
        return self._kind in CLOUD_KINDS

    def training_image_uri(self, region: str | None = None) -> str:
        """The image in ``region`` (default: the session's, the AWS default, else us-east-1): ``image_uri`` or the DLC.

        Raises:
            UnsupportedImageError: no stock DLC image for the versions, Python and instance type.
        """
        if self.image_uri:  # an estimator made by attach() has its job's image
            return self.image_uri
        region = region or getattr(self._sagemaker_session, "boto_region_name", None) or modes.docker.region_for_local()
        return dataclasses.replace(self.spec, versions=self._versions()).image_for(region)

    def _validate_compiler(self) -> None:
        """What ``TrainingCompilerConfig.validate(self)`` runs (:func:`sagemaker_tc.sdk.compiler_checks.validate`)."""
        compiler_checks.validate(self)

    @property
    def compiler_enabled(self) -> bool:
        """True when the job runs through the compiler's launcher (a config that is enabled)."""
        return bool(self.compiler_config)

    def hyperparameters(self) -> dict[str, str]:
        """The job's hyperparameters as sent: the user's plus SMTC's compiler keys, all JSON-encoded.

        The script-mode keys (``sagemaker_program``, ``sagemaker_submit_directory``) are added per job.
        An attached estimator returns its job's, without those keys.
        """
        if self._attached_hyperparameters is not None:
            return dict(self._attached_hyperparameters)
        return self.spec.hyperparameters()

    @runnable_by_pipeline
    def fit(
        self,
        inputs: Any = None,
        wait: bool = True,
        logs: bool | str = True,
        job_name: str | None = None,
        experiment_config: Mapping[str, str] | None = None,
    ) -> Any:
        """Run the training job.

        Args:
            inputs: channel name -> data (a bare string is the ``training`` channel, as in SDK v2);
                each becomes ``SM_CHANNEL_<NAME>`` in the job. ``local_process``: a local folder/file
                or ``file://`` URI. SageMaker training jobs: an ``s3://`` URI. Any channel may be a
                ``sagemaker_tc.TrainingInput`` or ``FileSystemInput`` (or SDK v2's own), whose
                fields reach ``InputDataConfig``.
            wait: block until the job ends; False returns at once (local modes: the job runs in a
                background thread), and ``latest_training_job`` has ``wait()``, ``stop()``,
                ``describe()`` and ``logs()``.
            logs: stream the job's log to stdout (while waiting): True or SDK v2's ``"All"``,
                ``"Training"``, ``"Rules"``; False, None or ``"None"`` for no log.
            job_name: the job's name; default ``<base_job_name>-<timestamp>``.
            experiment_config: SDK v2's ``{"ExperimentName", "TrialName",
                "TrialComponentDisplayName", "RunName"}`` (any of them), sent as the request's
                ``ExperimentConfig`` (SageMaker jobs and pipeline steps; local modes log and ignore it).

        After a waited job completes, ``model_data`` is the URI of ``model.tar.gz`` (``file://``
        locally, ``s3://`` on SageMaker); ``latest_training_job`` is the job.

        Under a ``PipelineSession`` nothing runs: ``fit()`` returns the step arguments for
        ``TrainingStep(name=..., step_args=estimator.fit(...))`` (the source is uploaded when the
        pipeline definition is built).

        Raises:
            ChannelNotFoundError: an input is missing, has the wrong scheme, or a channel name is invalid.
            EstimatorArgumentError: no ``role`` for a cloud job; a ``job_name`` outside SageMaker's
                TrainingJobName rule (checked in every mode); ``wait`` that is not a bool.
            SourceLinkError: a symbolic link added to ``source_dir`` since construction breaks the rules.
            UnsupportedImageError: no stock DLC image for the versions (cloud jobs without ``image_uri``).
            TrainingJobFailedError: the job failed, or was stopped at its ``max_run``; the message
                carries the job's failure reason (``output/failure``, which starts with the script's
                exception and message). A job stopped with ``latest_training_job.stop()`` raises nothing.
        """
        if self._attached_job is not None:
            raise EstimatorArgumentError(
                f"this estimator was attached to training job {self._attached_job!r}, whose code is in S3: "
                "to train again, build the estimator with your entry_point and source_dir and call fit()"
            )
        value_checks.check_flag("wait", wait)  # "no" is truthy: it would block
        if job_name is not None:  # SageMaker's rule in every mode: local job folders are named by it too
            check_job_name(job_name)
        logs = job_status.check_logs(logs)
        experiment = arguments.check_experiment_config(experiment_config, cloud=self.is_cloud)
        spec = dataclasses.replace(self.spec, versions=self._versions())  # as the attributes now hold them
        if self.is_cloud and self.output_path == self._filled_output_path:
            spec = dataclasses.replace(spec, output_path=None)  # the path an earlier fit() filled in: none given
        sagemaker_session = self.sagemaker_session if self.is_cloud else None
        run = modes.run(
            spec,
            inputs,
            job_name=job_name,
            wait=wait,
            logs=logs,
            sagemaker_session=sagemaker_session,
            experiment_config=experiment,
        )
        self._current_job_name = run.job_name
        if self.is_cloud and spec.output_path is None:  # SDK v2 filled output_path with the default bucket's path
            self.output_path = self._filled_output_path = run.output_path
        if run.job is not None:  # None: a Pipelines step, nothing runs now
            self.latest_training_job, self._latest_request = run.job, run.request or self._latest_request
            if wait:
                self.latest_training_job.wait(logs=logs if self.is_cloud else False)
        return None

    # SageMaker Pipelines (sagemaker-core's retrieve_caller_name) recognise a training job producer by a
    # ``train`` method and a ``training_image`` attribute; TrainingStep then reads the request fit() built.
    train = fit

    def wait(self, logs: bool | str = True) -> None:
        """Wait for the latest job started with ``fit(wait=False)`` (a SageMaker job, or a local
        one: ``local_process``, ``local``, ``local_gpu``). ``model_data`` reads the job, so waiting
        through ``latest_training_job.wait()`` or boto3's waiter sets it too. ``logs`` takes what
        ``fit(logs=...)`` takes (SDK v2's ``"All"``, ``"None"``, ...).

        Raises:
            EstimatorArgumentError: no job was started; a ``logs`` value ``fit()`` would refuse.
            TrainingJobFailedError: the job failed, or was stopped at its ``max_run`` (carries its
                FailureReason); a job stopped with ``latest_training_job.stop()`` raises nothing.
        """
        if self.latest_training_job is None:
            raise EstimatorArgumentError("no training job to wait for: call fit(..., wait=False) first")
        self.latest_training_job.wait(logs=job_status.check_logs(logs, call="wait"))

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

    @classmethod
    def attach(cls, training_job_name: str, sagemaker_session: cloud.SageMakerSession | None = None):
        """Attach to an existing SageMaker training job by name: an estimator of this class rebuilt
        from the job, as SDK v2 returned (:mod:`sagemaker_tc.sdk.attach`); ``latest_training_job`` is
        the job's handle (``status``, ``describe()``, ``wait()``, ``stop()``). ``fit()`` on it is refused
        (its local code is not known).

        Raises:
            EstimatorArgumentError: no such job in the session's account and region.
        """
        from sagemaker_tc.sdk.attach import attached

        return attached(cls, cloud.attach(training_job_name, sagemaker_session))


# SDK v2's attributes, read from (and assigned into) the checked spec
for _name in (
    *("entry_point", "source_dir", "source", "role", "py_version", "image_uri", "compiler_config", "instance_type"),
    *("instance_count", "distribution", "environment", "output_path", "base_job_name", "max_run", "volume_size"),
    *("checkpoint_s3_uri", "checkpoint_local_path", "settings", "code_location"),
):
    setattr(_FrameworkEstimator, _name, SpecAttribute(_name, name=_name))
_FrameworkEstimator.metric_definitions = SpecAttribute("metrics", name="metric_definitions")


class HuggingFace(_FrameworkEstimator):
    """Hugging Face estimator with the training compiler, SMTC's ``sagemaker.huggingface.HuggingFace``'s successor.

    A ``transformers.Trainer`` script is compiled with no change to the script when
    ``compiler_config=TrainingCompilerConfig()`` is given.

    Args (besides the shared ones, see :meth:`fit`):
        transformers_version, pytorch_version, py_version: the DLC versions (used to pick the
            training image on SageMaker; ``local_process`` runs this host's Python).

    Positional arguments follow SDK v2's order (:data:`~sagemaker_tc.sdk.signature.HUGGINGFACE_ORDER`);
    a single one is the entry point.
    """

    _default_base_job_name = "huggingface-pytorch-training"
    _framework = "huggingface"
    _version_arguments = ("transformers_version", "pytorch_version")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs = bind_positional(type(self).__name__, HUGGINGFACE_ORDER, args, kwargs)
        self.transformers_version = kwargs.pop("transformers_version", None)
        self.pytorch_version = kwargs.pop("pytorch_version", None)
        super().__init__(**kwargs)


class PyTorch(_FrameworkEstimator):
    """PyTorch estimator with the training compiler, SMTC's ``sagemaker.pytorch.PyTorch``'s successor.

    A plain PyTorch loop turns compilation on with one call, ``sagemaker_tc.compile_model(model)``.

    Args (besides the shared ones, see :meth:`fit`):
        framework_version, py_version: the DLC versions (used to pick the training image on
            SageMaker; ``local_process`` runs this host's Python).

    Positional arguments follow SDK v2's order (:data:`~sagemaker_tc.sdk.signature.PYTORCH_ORDER`).
    """

    _default_base_job_name = "pytorch-training"
    _version_arguments = ("framework_version",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs = bind_positional(type(self).__name__, PYTORCH_ORDER, args, kwargs)
        self.framework_version = kwargs.pop("framework_version", None)
        super().__init__(**kwargs)
