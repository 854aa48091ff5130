"""``HuggingFace`` and ``PyTorch`` estimators with ``compiler_config``, on sagemaker-core 2.x.

Argument names are SageMaker Python SDK v2's, so an SMTC job changes only its imports. All checks
run in ``__init__`` (:mod:`sagemaker_tc.sdk.arguments`) and at the start of ``fit()``, before any job
starts. The request is built in :mod:`sagemaker_tc.sdk.request`; each way of running it (this host,
Docker, a SageMaker job, a Pipelines step) is a module of :mod:`sagemaker_tc.sdk.modes`.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from sagemaker.core.workflow.pipeline_context import runnable_by_pipeline

from sagemaker_tc import contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import EstimatorArgumentError, HyperparameterError
from sagemaker_tc.sdk import after_fit, arguments, cloud, compiler_checks, config_defaults
from sagemaker_tc.sdk.api_limits import check_limit, limit_maximum, limit_problem
from sagemaker_tc.sdk.arguments import (
    CLOUD_KINDS,
    DEFAULT_MAX_RUN_SECONDS,
    DEFAULT_OUTPUT_PATH,
    check_cache_apart_from_channels,
)
from sagemaker_tc.sdk.channels import estimator_channels
from sagemaker_tc.sdk.distribution import distribution_hyperparameters
from sagemaker_tc.sdk.hyperparameters import encode_hyperparameters, is_pipeline_variable
from sagemaker_tc.sdk.images import check_processor, check_tested_stack, check_training_image, training_image
from sagemaker_tc.sdk.instances import InstanceKind, warn_cpu_instance
from sagemaker_tc.sdk.job_environment import check_environment_limits, check_job_variables
from sagemaker_tc.sdk.job_paths import is_synced_locally, local_path
from sagemaker_tc.sdk.job_settings import SETTING_NAMES, check_job_settings
from sagemaker_tc.sdk.local.job import LocalJob
from sagemaker_tc.sdk.modes import docker, pipeline, process, training_job
from sagemaker_tc.sdk.request import (
    TrainingJobRequest,
    build_request,
    check_job_name,
    job_hyperparameters,
    make_job_name,
    metric_definitions,
    script_mode_hyperparameters,
)
from sagemaker_tc.sdk.settings_request import apply_settings
from sagemaker_tc.sdk.signature import (
    HUGGINGFACE_ORDER,
    PYTORCH_ORDER,
    bind_positional,
    check_unsupported,
    drop_unasked,
)
from sagemaker_tc.sdk.source import resolve_source

__all__ = ["COMPILER_METRIC_DEFINITIONS", "DEFAULT_MAX_RUN_SECONDS", "DEFAULT_OUTPUT_PATH", "HuggingFace", "PyTorch"]

logger = logging.getLogger(__name__)

# Metric lines the runtime prints (contract.METRIC_NAMES); added to metric_definitions when the
# compiler is on, so SageMaker charts them like any other training metric.
COMPILER_METRIC_DEFINITIONS = contract.metric_definitions()

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


class _FrameworkEstimator:
    """Shared by :class:`HuggingFace` and :class:`PyTorch`; use those.

    Every argument is checked here, before any job starts (:mod:`sagemaker_tc.sdk.arguments`); an
    argument the estimator does not take (SDK v2's ``disable_profiler``, a typo) is refused together
    with every other one, with what to do (:mod:`sagemaker_tc.sdk.signature`).

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
            compiler on and no ``image_uri`` (a job on a stock DLC), versions below PyTorch 2.7 or
            versions that match no tested stack of the support matrix (:mod:`sagemaker_tc.sdk.support`);
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
        arguments.check_types(
            source_dir=source_dir,
            output_path=None if is_pipeline_variable(output_path) else output_path,
            base_job_name=base_job_name,
            role=role,
            py_version=py_version,
            image_uri=image_uri,
            checkpoint_s3_uri=checkpoint_s3_uri,
            checkpoint_local_path=checkpoint_local_path,
            **self._versions(),
        )
        self._checked_instance_type, self._kind = arguments.check_instance(instance_type, instance_count)
        role, environment, given_settings = config_defaults.apply(  # the SageMaker config file's defaults
            config_defaults.load(sagemaker_session),
            cloud=self.is_cloud,
            instance_type=self._checked_instance_type,
            role=role,
            environment=environment,
            settings=given_settings,
        )
        self.instance_type, self.instance_count = instance_type, instance_count
        outside = arguments.check_flag("allow_symlinks_outside_source_dir", allow_symlinks_outside_source_dir)
        self.source = resolve_source(entry_point, source_dir, allow_outside_links=outside)
        self.entry_point, self.source_dir = entry_point, source_dir
        self.role, self.py_version, self.image_uri = role, py_version, image_uri
        if image_uri is None:  # one story for CPU jobs: an image exists (a warning), or a refusal now
            check_processor(self._framework, type(self).__name__, self._checked_instance_type, self._kind)
        if self._kind is InstanceKind.CPU:
            warn_cpu_instance(self._checked_instance_type)
        self.compiler_config = arguments.resolve_cache(arguments.check_compiler_config(compiler_config), self._kind)
        arguments.check_backend(
            self.compiler_config, self._kind, self._checked_instance_type, default_image=image_uri is None
        )
        if image_uri is None and self.compiler_enabled and self._kind is not InstanceKind.LOCAL_PROCESS:
            self._check_tested_stack()  # a job on a stock DLC: its versions must be a tested stack
        elif self.compiler_enabled and self._kind is not InstanceKind.LOCAL_PROCESS:  # as ModelTrainer does
            check_training_image(image_uri, argument="image_uri", tested_stack=False)
        arguments.check_entry_point_language(self.source, entry_point, self.compiler_enabled)
        self._distribution_hyperparameters = distribution_hyperparameters(distribution)
        self.distribution = distribution
        if self.compiler_enabled:  # SDK v2's validate() warned too
            compiler_checks.warn_hosts_without_distribution(instance_count, bool(self._distribution_hyperparameters))
        self._user_hyperparameters = encode_hyperparameters(hyperparameters)
        variables = [name for name, value in self._user_hyperparameters.items() if is_pipeline_variable(value)]
        if variables and not self.is_cloud:
            raise HyperparameterError(
                f"hyperparameters {', '.join(variables)}: pipeline variables; pipelines run SageMaker "
                "training jobs (ml.* instance types)"
            )
        self.environment = self._checked_environment(environment)
        if self._kind is InstanceKind.LOCAL_PROCESS:
            arguments.check_local_process_path(self.environment, os.environ.get("PATH"))
            check_environment_limits(self.environment)
        check_job_variables(
            self.environment,
            compiler_enabled=self.compiler_enabled,
            local_process=self._kind is InstanceKind.LOCAL_PROCESS,
        )
        self._check_job_settings(output_path, base_job_name, metric_definitions, max_run, volume_size)
        arguments.check_checkpoints(
            checkpoint_s3_uri,
            checkpoint_local_path,
            cloud=self.is_cloud,
            kind=self._kind,
            output_path=self.output_path,
            source_root=self.source.root,
        )
        self.settings = check_job_settings(
            given_settings,
            cloud=self.is_cloud,
            max_run=self._checked_max_run,
            # local_process syncs checkpoints with a local folder (sdk/local/checkpoints.py): not "SageMaker only"
            checkpoint_s3_uri=None
            if self._kind is InstanceKind.LOCAL_PROCESS and is_synced_locally(checkpoint_s3_uri)
            else checkpoint_s3_uri,
            compiler_enabled=self.compiler_enabled,
        )
        self.code_location = self.settings.get("code_location")
        self.checkpoint_s3_uri, self.checkpoint_local_path = checkpoint_s3_uri, checkpoint_local_path
        cache = self.compiler_config.cache if self.compiler_config else None
        arguments.check_cache_apart(
            cache, output_path=self.output_path, checkpoint_uri=checkpoint_s3_uri, source_root=self.source.root
        )
        never_packed = arguments.own_folders(self.output_path, cache, checkpoint_s3_uri, cloud=self.is_cloud)
        self.source = dataclasses.replace(self.source, excluded=never_packed)
        # SDK v2 defaulted it to a session; here it is made when first read (cloud jobs; local modes need none)
        self._sagemaker_session = sagemaker_session
        self.latest_training_job: LocalJob | cloud.CloudJob | None = None

    def _checked_environment(self, environment: Any) -> dict[str, Any]:
        """``environment`` checked (:func:`~sagemaker_tc.sdk.arguments.check_environment`); a pipeline
        variable value (SDK v2 took one) is checked by its ``default_value`` (``""`` without one) and
        carried as a reference into the step.

        Raises:
            EstimatorArgumentError: what ``check_environment`` refuses; a pipeline variable in a local mode.
        """
        variables = {}
        if isinstance(environment, Mapping):
            variables = {name: value for name, value in environment.items() if is_pipeline_variable(value)}
        if variables and not self.is_cloud:
            raise EstimatorArgumentError(
                f"environment {', '.join(map(str, variables))}: pipeline variables; pipelines run SageMaker training "
                "jobs (ml.* instance types)"
            )
        if not variables:
            return arguments.check_environment(environment, cloud=self.is_cloud)
        defaults = {
            name: (getattr(variables[name], "default_value", None) or "") if name in variables else value
            for name, value in environment.items()
        }
        checked = arguments.check_environment({name: str(value) for name, value in defaults.items()}, cloud=True)
        return {name: variables.get(name, value) for name, value in checked.items()}

    def _check_job_settings(self, output_path, base_job_name, metrics, max_run, volume_size) -> None:
        """Check and keep where the job writes, its name, its metrics and its limits."""
        if is_pipeline_variable(output_path):  # SDK v2 took one: checked by its default, sent as a reference
            if not self.is_cloud:
                raise EstimatorArgumentError(
                    "output_path is a pipeline variable: pipelines run SageMaker training jobs (ml.* instance types)"
                )
            arguments.check_output_path(getattr(output_path, "default_value", None), cloud=True)
            self.output_path = output_path
        else:
            self.output_path = arguments.check_output_path(output_path, cloud=self.is_cloud)
        self.base_job_name = base_job_name or self._default_base_job_name
        make_job_name(self.base_job_name)  # fail now on a bad base name
        self._metrics = metrics
        self._metric_shapes()  # fail now on bad regexes
        self._checked_max_run = arguments.check_max_run(max_run)  # a pipeline variable: its default
        self.max_run = max_run if is_pipeline_variable(max_run) else self._checked_max_run
        if is_pipeline_variable(max_run) and not self.is_cloud:
            raise EstimatorArgumentError(
                "max_run is a pipeline variable: pipelines run SageMaker training jobs (ml.* instance types)"
            )
        self.volume_size = arguments.check_volume_size(volume_size)
        if self.is_cloud:  # CreateTrainingJob's VolumeSizeInGB is at least 1 (local modes only record it)
            check_limit("volume_size", "VolumeSizeInGB", self.volume_size)

    @classmethod
    def _accepted_arguments(cls) -> list[str]:
        """The estimator's argument names: the entry point, its framework's versions, the shared ones,
        then SDK v2's job settings."""
        names: list[str] = ["entry_point", *cls._version_arguments]
        for parameter in inspect.signature(_FrameworkEstimator.__init__).parameters.values():
            named = parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            if named and parameter.name != "self" and parameter.name not in names:
                names.append(parameter.name)
        return names + list(SETTING_NAMES)

    def _versions(self) -> dict[str, str | None]:
        """The framework's version arguments by name (each framework class defines them)."""
        return {}

    def _check_tested_stack(self) -> None:
        """Refuse versions whose stock DLC matches no tested stack (each framework class names its versions)."""
        raise NotImplementedError(f"{type(self).__name__} names no framework versions")

    @property
    def is_cloud(self) -> bool:
        """True when ``fit()`` creates a SageMaker training job (an ``ml.*`` instance type)."""
        return self._kind in CLOUD_KINDS

    def _image_uri(self, region: str) -> str:
        """The stock DLC training image for this estimator's versions (each framework class defines it)."""
        raise NotImplementedError(f"{type(self).__name__} names no framework image")

    def training_image_uri(self, region: str) -> str:
        """The training image in ``region``: ``image_uri``, else the stock DLC for the versions.

        Raises:
            UnsupportedImageError: no stock DLC image for the versions, Python and instance type.
        """
        return self.image_uri or self._image_uri(region)

    def _validate_compiler(self) -> None:
        """What ``TrainingCompilerConfig.validate(self)`` runs (:func:`sagemaker_tc.sdk.compiler_checks.validate`)."""
        compiler_checks.validate(self)

    @property
    def compiler_enabled(self) -> bool:
        """True when the job runs through the compiler's launcher (a config that is enabled)."""
        return bool(self.compiler_config)

    def _metric_shapes(self):
        """The metric definitions as sent: the user's, then the compiler's (when on) that the user's
        do not name.

        Raises:
            EstimatorArgumentError: a malformed entry, or (SageMaker jobs) more than CreateTrainingJob
                takes in all.
        """
        definitions = list(self._metrics or [])
        added = []
        if self.compiler_enabled:
            names = {item.get("Name") for item in definitions if isinstance(item, Mapping)}
            added = [item for item in COMPILER_METRIC_DEFINITIONS if item["Name"] not in names]
        shapes = metric_definitions(definitions + added)
        if self.is_cloud and limit_problem("MetricDefinitionList", shapes) is not None:
            limit = limit_maximum("MetricDefinitionList")
            raise EstimatorArgumentError(
                f"metric_definitions: {len(definitions)} given + {len(added)} the compiler adds = {len(shapes)}, "
                f"and CreateTrainingJob takes at most {limit}; keep at most {limit - len(added)} of yours "
                "(the compiler's are not added for names you define yourself)"
            )
        return shapes

    def hyperparameters(self) -> dict[str, str]:
        """The job's hyperparameters as sent: the user's plus SMTC's compiler keys, all JSON-encoded.

        The script-mode keys (``sagemaker_program``, ``sagemaker_submit_directory``) are added per job.
        An attached estimator returns its job's, without those keys.
        """
        if self._attached_hyperparameters is not None:
            return dict(self._attached_hyperparameters)
        return job_hyperparameters(
            self._user_hyperparameters,
            self._distribution_hyperparameters,
            self.compiler_config,
            self.source.entry_point,
        )

    def _build_request(
        self,
        job_name: str,
        channels: dict[str, str],
        submit_directory: str = "",
        *,
        image_uri: str | None = None,
        output_path: str | None = None,
        region: str | None = None,
    ) -> TrainingJobRequest:
        """The CreateTrainingJob request for one run (``output_path``: the cloud job's resolved ``s3://`` path).

        The run modes (:mod:`sagemaker_tc.sdk.modes`) take it and fill in ``submit_directory`` where
        they staged the code (:func:`~sagemaker_tc.sdk.request.with_submit_directory`).
        """
        program = contract.LAUNCHER_PROGRAM if self.compiler_enabled else self.source.entry_point
        hyperparameters = self.hyperparameters()
        hyperparameters.update(
            script_mode_hyperparameters(
                program=program, submit_directory=submit_directory, job_name=job_name, region=region
            )
        )
        request = build_request(
            job_name=job_name,
            image_uri=image_uri or self.image_uri,
            hyperparameters=hyperparameters,
            environment=self.environment,
            channels=channels,
            output_path=output_path or local_path(self.output_path).as_uri(),
            instance_type=self.instance_type,
            instance_count=self.instance_count,
            volume_size_gb=self.volume_size,
            max_run_seconds=self.max_run,
            role=self.role,
            metrics=self._metric_shapes(),
            checkpoint_s3_uri=self.checkpoint_s3_uri,
            checkpoint_local_path=self.checkpoint_local_path,
        )
        request = apply_settings(request, self.settings, cloud=self.is_cloud, region=region)
        if getattr(self, "_experiment_config", None) is not None:
            request = dataclasses.replace(request, experiment_config=self._experiment_config)
        return request

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
        arguments.check_flag("wait", wait)  # "no" is truthy: it would block
        if job_name is not None:  # SageMaker's rule in every mode: local job folders are named by it too
            check_job_name(job_name)
        logs = arguments.check_logs(logs)
        self._experiment_config = arguments.check_experiment_config(experiment_config, cloud=self.is_cloud)
        if self.is_cloud:
            return self._fit_cloud(inputs, wait=wait, logs=logs, job_name=job_name)
        run = self._run_in_docker if self._kind is InstanceKind.LOCAL_DOCKER else self._run_in_process
        self.latest_training_job = run(inputs, wait=wait, logs=logs, job_name=job_name)
        self._current_job_name = self.latest_training_job.job_name
        if wait:
            self.latest_training_job.wait(logs=False)
        return None

    def _run_in_process(self, inputs, *, wait: bool, logs: bool, job_name: str | None) -> LocalJob:
        """``local_process``: check the inputs, build the request, hand it to :mod:`~sagemaker_tc.sdk.modes.process`.

        Raises:
            ChannelNotFoundError: an input is missing or has a bad name (before the job folder exists).
            EstimatorArgumentError: a local compile cache overlapping a channel's folder; see
                :func:`~sagemaker_tc.sdk.modes.process.run`.
        """
        channels = estimator_channels(self, inputs, cloud=False)
        cache = self.compiler_config.cache if self.compiler_enabled and self.compiler_config else None
        check_cache_apart_from_channels(cache, channels)
        job_name = job_name or make_job_name(self.base_job_name)
        request = self._build_request(job_name, channels)
        return process.run(request, self.source, inject_launcher=self.compiler_enabled, wait=wait, logs=logs)

    def _run_in_docker(self, inputs, *, wait: bool, logs: bool, job_name: str | None) -> LocalJob:
        """``local`` / ``local_gpu``: check the inputs and Docker, build the request, hand it to
        :mod:`~sagemaker_tc.sdk.modes.docker`.

        Raises:
            ChannelNotFoundError: an input is missing or has a bad name.
            DockerNotAvailableError: no docker CLI, engine or compose (checked before any code is staged).
            UnsupportedImageError: no stock DLC for the versions (without ``image_uri``).
        """
        channels = estimator_channels(self, inputs, cloud=False)
        docker.check_docker()  # before any work: a clear error when Docker is missing
        image_uri = self.image_uri or self.training_image_uri(docker.region_for_local())
        job_name = job_name or make_job_name(self.base_job_name)
        request = self._build_request(job_name, channels, image_uri=image_uri)
        job_dir = local_path(self.output_path) / job_name
        return docker.run(
            request, self.source, inject_launcher=self.compiler_enabled, job_dir=job_dir, wait=wait, logs=logs
        )

    def _fit_cloud(self, inputs, *, wait: bool, logs: bool, job_name: str | None) -> None:
        """A SageMaker job (or, under a ``PipelineSession``, a pipeline step): the mode
        (:mod:`~sagemaker_tc.sdk.modes.training_job`) resolves where it runs, the estimator builds the
        request, the mode uploads the code and starts the job (or hands the request to the step)."""
        channels = estimator_channels(self, inputs, cloud=True)
        # the path an earlier fit() filled in is still "none given": the default is resolved again
        given_output = None if self.output_path == self._filled_output_path else self.output_path
        job = training_job.CloudArguments(
            role=self.role,
            session=self.sagemaker_session,
            instance_type=self.instance_type,
            instance_count=self.instance_count,
            max_run=self.max_run,
            environment=self.environment,
            hyperparameters=self.hyperparameters(),
            output_path=given_output,
            base_job_name=self.base_job_name,
            code_location=self.code_location,
            settings=self.settings,
            image_for_region=self.training_image_uri,
            source=self.source,
            inject_launcher=self.compiler_enabled,
        )
        target = training_job.prepare(channels, job, job_name=job_name)
        request = self._build_request(
            target.job_name,
            target.channels,
            image_uri=target.image_uri,
            output_path=target.output_path,
            region=target.region,
        )
        self._current_job_name = target.job_name
        if given_output is None:  # SDK v2 filled output_path with the default bucket's path it used
            self.output_path = self._filled_output_path = target.output_path
        if target.in_pipeline:
            # Building a pipeline definition: the step reads the request back from session.context.
            pipeline.hand_over(request, job, target)
            return
        self.latest_training_job = training_job.start(request, job, target)
        self._latest_request = request
        if wait:
            self.latest_training_job.wait(logs=logs)

    # SageMaker Pipelines (sagemaker-core's retrieve_caller_name) recognise a training job producer by a
    # ``train`` method and a ``training_image`` attribute; TrainingStep then reads the request fit() built.
    train = fit

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
        self.latest_training_job.wait(logs=arguments.check_logs(logs, call="wait"))

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

    def _versions(self) -> dict[str, str | None]:
        return {"transformers_version": self.transformers_version, "pytorch_version": self.pytorch_version}

    def _check_tested_stack(self) -> None:
        check_tested_stack(
            framework="huggingface",
            estimator=type(self).__name__,
            pytorch_argument="pytorch_version",
            pytorch_version=self.pytorch_version,
            transformers_version=self.transformers_version,
        )

    def _image_uri(self, region: str) -> str:
        return training_image(
            framework="huggingface",
            region=region,
            instance_type=self._checked_instance_type,
            py_version=self.py_version,
            pytorch_version=self.pytorch_version,
            transformers_version=self.transformers_version,
        )


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

    def _versions(self) -> dict[str, str | None]:
        return {"framework_version": self.framework_version}

    def _check_tested_stack(self) -> None:
        check_tested_stack(
            framework="pytorch",
            estimator=type(self).__name__,
            pytorch_argument="framework_version",
            pytorch_version=self.framework_version,
        )

    def _image_uri(self, region: str) -> str:
        return training_image(
            framework="pytorch",
            region=region,
            instance_type=self._checked_instance_type,
            py_version=self.py_version,
            pytorch_version=self.framework_version,
        )
