"""The estimators' arguments as one checked, frozen value: :class:`EstimatorSpec`.

``HuggingFace(...)`` and ``PyTorch(...)`` read their own signature (positionals, SDK v2's names)
and hand every argument to :meth:`EstimatorSpec.check`, which runs every check before any job
starts (:mod:`sagemaker_tc.sdk.arguments` and its neighbours) and returns the value the run modes
(:mod:`sagemaker_tc.sdk.modes`) take. Nothing here calls back into the estimator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from sagemaker_tc import contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import EstimatorArgumentError, HyperparameterError
from sagemaker_tc.sdk import (
    arguments,
    compiler_checks,
    compiler_rules,
    config_defaults,
    folder_checks,
    instances,
    job_environment,
    value_checks,
)
from sagemaker_tc.sdk.api_limits import check_limit, limit_maximum, limit_problem, warn_limit
from sagemaker_tc.sdk.distribution import distribution_hyperparameters
from sagemaker_tc.sdk.hyperparameters import encode_hyperparameters, is_pipeline_variable
from sagemaker_tc.sdk.images import (
    check_processor,
    check_pytorch_floor,
    check_tested_stack,
    check_training_image,
    training_image,
)
from sagemaker_tc.sdk.instances import CLOUD_KINDS, InstanceKind, warn_cpu_instance
from sagemaker_tc.sdk.job_environment import check_job_variables
from sagemaker_tc.sdk.job_paths import is_synced_locally
from sagemaker_tc.sdk.job_settings import JobSettings, check_job_settings
from sagemaker_tc.sdk.request import job_hyperparameters, make_job_name, metric_definitions
from sagemaker_tc.sdk.source import SourceSpec, resolve_source

__all__ = ["COMPILER_METRIC_DEFINITIONS", "EstimatorSpec", "SpecAttribute", "check_tested_versions", "stock_image"]

# Metric lines the runtime prints (contract.METRIC_NAMES); added to metric_definitions when the
# compiler is on, so SageMaker charts them like any other training metric.
COMPILER_METRIC_DEFINITIONS = contract.metric_definitions()


@dataclasses.dataclass(frozen=True)
class EstimatorSpec:
    """An estimator's arguments, checked; what ``fit()`` runs.

    Attributes:
        estimator, framework: the class's name (``"HuggingFace"``) and its image table (``"huggingface"``).
        versions: the framework's version arguments by name (``{"framework_version": "2.8"}``).
        kind, checked_instance_type: where the job runs, and the instance type it was checked by (a
            pipeline parameter's ``default_value``).
        instance_type, instance_count, max_run, output_path: as given (pipeline variables kept as
            references for a Pipelines step); ``checked_max_run`` is ``max_run`` in seconds.
        source: the code to ship, with the folders sagemaker-tc writes left out.
        compiler_config: the checked config (a local cache made absolute), or None.
        user_hyperparameters, distribution_hyperparameters: JSON-encoded, as sent.
        environment: the checked environment (the config file's defaults filled in).
        volume_size: GB. settings: SDK v2's job settings, checked. metrics: the user's definitions.
    """

    estimator: str
    framework: str
    versions: Mapping[str, str | None]
    kind: InstanceKind
    checked_instance_type: str
    instance_type: Any
    instance_count: Any
    entry_point: str
    source_dir: str | None
    source: SourceSpec
    role: str | None
    py_version: str | None
    image_uri: str | None
    compiler_config: TrainingCompilerConfig | None
    distribution: Mapping[str, Any] | None
    distribution_hyperparameters: dict[str, str]
    user_hyperparameters: dict[str, Any]
    environment: dict[str, Any]
    output_path: Any
    base_job_name: str
    metrics: Sequence[Mapping[str, str]] | None
    max_run: Any
    checked_max_run: int
    volume_size: int
    checkpoint_s3_uri: str | None
    checkpoint_local_path: str | None
    settings: JobSettings
    code_location: str | None

    @property
    def is_cloud(self) -> bool:
        """True when ``fit()`` creates a SageMaker training job (an ``ml.*`` instance type)."""
        return self.kind in CLOUD_KINDS

    @property
    def compiler_enabled(self) -> bool:
        """True when the job runs through the compiler's launcher (a config that is enabled)."""
        return bool(self.compiler_config)

    @property
    def local_cache(self) -> str | None:
        """The compiler's cache when the compiler is on (None: off or no cache)."""
        return self.compiler_config.cache if self.compiler_enabled and self.compiler_config else None

    def hyperparameters(self) -> dict[str, str]:
        """The job's hyperparameters as sent: the user's plus SMTC's compiler keys, all JSON-encoded."""
        return job_hyperparameters(
            self.user_hyperparameters, self.distribution_hyperparameters, self.compiler_config, self.source.entry_point
        )

    def image_for(self, region: str) -> str:
        """The training image in ``region``: ``image_uri``, else the stock DLC for the versions.

        Raises:
            UnsupportedImageError: no stock DLC image for the versions, Python and instance type.
        """
        if self.image_uri:
            return self.image_uri
        return stock_image(
            self.framework,
            self.versions,
            region=region,
            instance_type=self.checked_instance_type,
            py_version=self.py_version,
        )

    def metric_shapes(self):
        """The metric definitions as sent: the user's, then the compiler's (when on) that the user's
        do not name.

        Raises:
            EstimatorArgumentError: a malformed entry, or (SageMaker jobs) more than CreateTrainingJob
                takes in all.
        """
        return _metric_shapes(self.metrics, compiler_enabled=self.compiler_enabled, cloud=self.is_cloud)

    @classmethod
    def check(
        cls,
        *,
        estimator: str,
        framework: str,
        versions: Mapping[str, str | None],
        default_base_job_name: str,
        sagemaker_config: dict[str, Any] | None,
        given_settings: dict[str, Any],
        **given: Any,
    ) -> EstimatorSpec:
        """Check every argument of an estimator (``given``: ``_FrameworkEstimator.__init__``'s named
        arguments, as passed) in the order the estimators always checked them; raises what the
        estimator's docstring lists, before any job starts."""
        arguments.check_pipeline_variables({**given, **given_settings})
        arguments.check_types(
            source_dir=given["source_dir"],
            output_path=None if is_pipeline_variable(given["output_path"]) else given["output_path"],
            **{name: given[name] for name in ("base_job_name", "role", "py_version", "image_uri")},
            checkpoint_s3_uri=given["checkpoint_s3_uri"],
            checkpoint_local_path=given["checkpoint_local_path"],
            **versions,
        )
        checked_type, kind = instances.check_instance(given["instance_type"], given["instance_count"])
        cloud = kind in CLOUD_KINDS
        role, environment, settings = config_defaults.apply(  # the SageMaker config file's defaults
            config_defaults.load(sagemaker_config),
            cloud=cloud,
            instance_type=checked_type,
            role=given["role"],
            environment=given["environment"],
            settings=given_settings,
        )
        outside = value_checks.check_flag(
            "allow_symlinks_outside_source_dir", given["allow_symlinks_outside_source_dir"]
        )
        source = resolve_source(given["entry_point"], given["source_dir"], allow_outside_links=outside)
        config = _checked_compiler(estimator, framework, versions, checked_type, kind, given)
        arguments.check_entry_point_language(source, given["entry_point"], bool(config))
        distributed = distribution_hyperparameters(given["distribution"])
        if config:  # SDK v2's validate() warned too
            compiler_checks.warn_hosts_without_distribution(given["instance_count"], bool(distributed))
        user_hyperparameters = _checked_hyperparameters(given["hyperparameters"], cloud=cloud)
        environment = _checked_environment(environment, kind, compiler_enabled=bool(config))
        limits = _checked_limits(
            given, cloud=cloud, compiler_enabled=bool(config), default_base_job_name=default_base_job_name
        )
        spec = cls(
            estimator=estimator,
            framework=framework,
            versions=dict(versions),
            kind=kind,
            checked_instance_type=checked_type,
            instance_type=given["instance_type"],
            instance_count=given["instance_count"],
            entry_point=given["entry_point"],
            source_dir=given["source_dir"],
            source=source,
            role=role,
            py_version=given["py_version"],
            image_uri=given["image_uri"],
            compiler_config=config,
            distribution=given["distribution"],
            distribution_hyperparameters=distributed,
            user_hyperparameters=user_hyperparameters,
            environment=environment,
            metrics=given["metric_definitions"],
            checkpoint_s3_uri=given["checkpoint_s3_uri"],
            checkpoint_local_path=given["checkpoint_local_path"],
            settings=JobSettings(),
            code_location=None,
            **limits,
        )
        return _with_places(spec, settings)

    def check_tested_stack(self) -> None:
        """Refuse versions whose stock DLC matches no tested stack.

        Raises:
            UnsupportedImageError: see :func:`~sagemaker_tc.sdk.images.check_tested_stack`.
        """
        check_tested_versions(self.estimator, self.framework, self.versions)


def _metric_shapes(metrics: Sequence[Mapping[str, str]] | None, *, compiler_enabled: bool, cloud: bool):
    """:meth:`EstimatorSpec.metric_shapes` for these values."""
    definitions = list(metrics or [])
    added = []
    if compiler_enabled:
        names = {item.get("Name") for item in definitions if isinstance(item, Mapping)}
        added = [item for item in COMPILER_METRIC_DEFINITIONS if item["Name"] not in names]
    shapes = metric_definitions(definitions + added)
    if cloud and limit_problem("MetricDefinitionList", shapes) is not None:
        limit = limit_maximum("MetricDefinitionList")
        raise EstimatorArgumentError(
            f"metric_definitions: {len(definitions)} given + {len(added)} the compiler adds = {len(shapes)}, "
            f"and CreateTrainingJob takes at most {limit}; keep at most {limit - len(added)} of yours "
            "(the compiler's are not added for names you define yourself)"
        )
    return shapes


def check_tested_versions(estimator: str, framework: str, versions: Mapping[str, str | None]) -> None:
    """:func:`~sagemaker_tc.sdk.images.check_tested_stack` for an estimator's version arguments."""
    argument = _torch_argument(versions)
    check_tested_stack(
        framework=framework,
        estimator=estimator,
        pytorch_argument=argument,
        pytorch_version=versions.get(argument),
        **({"transformers_version": versions["transformers_version"]} if "transformers_version" in versions else {}),
    )


def _torch_argument(versions: Mapping[str, str | None]) -> str:
    """The name of the torch version argument: ``framework_version`` (PyTorch) or ``pytorch_version``."""
    return "framework_version" if "framework_version" in versions else "pytorch_version"


def _checked_compiler(
    estimator: str, framework: str, versions: Mapping[str, str | None], checked_type: str, kind, given: Mapping
) -> TrainingCompilerConfig | None:
    """The image for CPU jobs, the compiler config (a local cache made absolute), its backend and,
    with the compiler on outside ``local_process``, the tested stack or the given image (in
    ``local_process``, only the torch floor: the job runs this machine's torch)."""
    image_uri = given["image_uri"]
    if image_uri is None:  # one story for CPU jobs: an image exists (a warning), or a refusal now
        check_processor(framework, estimator, checked_type, kind)
    if kind is InstanceKind.CPU:
        warn_cpu_instance(checked_type)
    config = compiler_rules.resolve_cache(compiler_rules.check_compiler_config(given["compiler_config"]), kind)
    compiler_rules.check_backend(config, kind, checked_type, default_image=image_uri is None)
    if image_uri is None and config and kind is not InstanceKind.LOCAL_PROCESS:
        check_tested_versions(estimator, framework, versions)  # a job on a stock DLC: its versions must be tested
    elif config and kind is not InstanceKind.LOCAL_PROCESS:  # as ModelTrainer does
        check_training_image(image_uri, argument="image_uri", tested_stack=False)
    elif config and image_uri is None:  # local_process runs this machine's torch, but never SMTC's (<= 1.13)
        argument = _torch_argument(versions)
        check_pytorch_floor(versions.get(argument), argument)
    return config


def _checked_hyperparameters(hyperparameters: Any, *, cloud: bool) -> dict[str, Any]:
    """The user's hyperparameters, JSON-encoded; pipeline variables only for SageMaker jobs.

    Raises:
        HyperparameterError: see :func:`~sagemaker_tc.sdk.hyperparameters.encode_hyperparameters`;
            a pipeline variable in a local mode.
    """
    encoded = encode_hyperparameters(hyperparameters)
    variables = [name for name, value in encoded.items() if is_pipeline_variable(value)]
    if variables and not cloud:
        raise HyperparameterError(
            f"hyperparameters {', '.join(variables)}: pipeline variables; pipelines run SageMaker "
            "training jobs (ml.* instance types)"
        )
    return encoded


def _checked_environment(environment: Any, kind: InstanceKind, *, compiler_enabled: bool) -> dict[str, Any]:
    """``environment`` checked (:func:`~sagemaker_tc.sdk.job_environment.check_job_environment`); a pipeline
    variable value (SDK v2 took one) is checked by its ``default_value`` (``""`` without one) and
    carried as a reference into the step. ``local_process`` keeps this machine's ``PATH`` and the
    API's lengths; names the job sets are refused or warned about.

    Raises:
        EstimatorArgumentError: what ``check_job_environment`` refuses; a pipeline variable in a local mode.
    """
    cloud = kind in CLOUD_KINDS
    variables = {}
    if isinstance(environment, Mapping):
        variables = {name: value for name, value in environment.items() if is_pipeline_variable(value)}
    if variables and not cloud:
        raise EstimatorArgumentError(
            f"environment {', '.join(map(str, variables))}: pipeline variables; pipelines run SageMaker training jobs "
            "(ml.* instance types)"
        )
    if not variables:
        local_process = kind is InstanceKind.LOCAL_PROCESS
        return job_environment.check_job_environment(
            environment, cloud=cloud, local_process=local_process, compiler_enabled=compiler_enabled
        )
    defaults = {
        name: (getattr(variables[name], "default_value", None) or "") if name in variables else value
        for name, value in environment.items()
    }
    plain = job_environment.check_environment({name: str(value) for name, value in defaults.items()}, cloud=True)
    checked = {name: variables.get(name, value) for name, value in plain.items()}
    check_job_variables(checked, compiler_enabled=compiler_enabled, local_process=False)  # a cloud job
    return checked


def _checked_limits(
    given: Mapping[str, Any], *, cloud: bool, compiler_enabled: bool, default_base_job_name: str
) -> dict[str, Any]:
    """Where the job writes, its name, its metrics and its limits, checked: the spec's ``output_path``,
    ``base_job_name``, ``max_run``, ``checked_max_run`` and ``volume_size``."""
    output_path = given["output_path"]
    if is_pipeline_variable(output_path):  # SDK v2 took one: checked by its default, sent as a reference
        if not cloud:
            raise EstimatorArgumentError(
                "output_path is a pipeline variable: pipelines run SageMaker training jobs (ml.* instance types)"
            )
        arguments.check_output_path(getattr(output_path, "default_value", None), cloud=True)
    else:
        output_path = arguments.check_output_path(output_path, cloud=cloud)
    base_job_name = given["base_job_name"] or default_base_job_name
    make_job_name(base_job_name)  # fail now on a bad base name
    _metric_shapes(given["metric_definitions"], compiler_enabled=compiler_enabled, cloud=cloud)  # fail now
    max_run = given["max_run"]
    checked_max_run = value_checks.check_max_run(max_run)  # a pipeline variable: its default
    if is_pipeline_variable(max_run) and not cloud:
        raise EstimatorArgumentError(
            "max_run is a pipeline variable: pipelines run SageMaker training jobs (ml.* instance types)"
        )
    volume_size = arguments.check_volume_size(given["volume_size"])
    if cloud:  # CreateTrainingJob's VolumeSizeInGB is at least 1 (local modes only record it, with a warning)
        check_limit("volume_size", "VolumeSizeInGB", volume_size)
    else:
        warn_limit("volume_size", "VolumeSizeInGB", volume_size)
    return {
        "output_path": output_path,
        "base_job_name": base_job_name,
        "max_run": max_run if is_pipeline_variable(max_run) else checked_max_run,
        "checked_max_run": checked_max_run,
        "volume_size": volume_size,
    }


def _with_places(spec: EstimatorSpec, given_settings: dict[str, Any]) -> EstimatorSpec:
    """The checkpoints and SDK v2's job settings checked, the cache kept apart from the job's other
    folders, and the folders sagemaker-tc writes left out of the code."""
    local_process = spec.kind is InstanceKind.LOCAL_PROCESS
    uri = spec.checkpoint_s3_uri
    folder_checks.check_checkpoints(
        uri,
        spec.checkpoint_local_path,
        cloud=spec.is_cloud,
        kind=spec.kind,
        output_path=spec.output_path,
        source_root=spec.source.root,
    )
    settings = check_job_settings(
        given_settings,
        cloud=spec.is_cloud,
        max_run=spec.checked_max_run,
        # local_process syncs checkpoints with a local folder (sdk/job_paths.py): not "SageMaker only"
        checkpoint_s3_uri=None if local_process and is_synced_locally(uri) else uri,
        compiler_enabled=spec.compiler_enabled,
    )
    cache = spec.compiler_config.cache if spec.compiler_config else None
    folder_checks.check_cache_apart(
        cache, output_path=spec.output_path, checkpoint_uri=uri, source_root=spec.source.root
    )
    never_packed = folder_checks.own_folders(spec.output_path, cache, uri, cloud=spec.is_cloud)
    return dataclasses.replace(
        spec,
        settings=settings,
        code_location=settings.get("code_location"),
        source=dataclasses.replace(spec.source, excluded=never_packed),
    )


def stock_image(
    framework: str, versions: Mapping[str, str | None], *, region: str, instance_type: str, py_version: str | None
) -> str:
    """The stock DLC training image for an estimator's version arguments in ``region``.

    Raises:
        UnsupportedImageError: no stock DLC image for the versions, Python and instance type.
    """
    return training_image(
        framework=framework,
        region=region,
        instance_type=instance_type,
        py_version=py_version,
        pytorch_version=versions.get("framework_version") or versions.get("pytorch_version"),
        transformers_version=versions.get("transformers_version"),
    )


class SpecAttribute:
    """An estimator attribute that reads a field of its :class:`EstimatorSpec` (kept as ``spec``);
    assigning it (as SDK v2's notebooks do, ``estimator.instance_count = 2``) replaces the spec with
    that field changed, unchecked as in SDK v2. An estimator made by ``attach()`` has no spec: the
    attribute is then a plain one."""

    def __init__(self, field: str | None = None, *, name: str | None = None) -> None:
        self.field, self.name = field, name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.field = name, self.field or name

    def __get__(self, estimator: Any, owner: type | None = None) -> Any:
        if estimator is None:
            return self
        spec = estimator.__dict__.get("spec")
        if spec is not None:
            return getattr(spec, self.field)
        try:
            return estimator.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None

    def __set__(self, estimator: Any, value: Any) -> None:
        spec = estimator.__dict__.get("spec")
        if spec is None:
            estimator.__dict__[self.name] = value
        else:
            estimator.__dict__["spec"] = dataclasses.replace(spec, **{self.field: value})
