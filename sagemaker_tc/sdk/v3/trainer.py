"""``ModelTrainer`` with ``compiler_config``: SDK v3's trainer, with the training compiler.

sagemaker-train's ``ModelTrainer`` is the v3 successor of the estimators, as ours are of SMTC's.
This subclass adds one field, ``compiler_config``, as SMTC added one argument to the estimator;
everything else is sagemaker-train's own, and ``train()`` runs where sagemaker-train runs it (a
SageMaker training job, a Pipelines step under a ``PipelineSession``, Docker local mode), plus
``Compute(instance_type="local_process")`` with ``Mode.LOCAL_CONTAINER``: this machine, no Docker.

With the compiler on, the trainer (when built, and again at ``train()``):

- checks its arguments (:mod:`sagemaker_tc.sdk.v3.checks`), before sagemaker-train's own defaults,
  which call AWS;
- sets ``distributed`` to :class:`~sagemaker_tc.sdk.v3.driver.TrainingCompilerDriver` (wrapping a
  ``Torchrun`` the user gave): ``sm_train.sh`` then runs the compiler's launcher on the entry script;
- adds ``SM_TRAINING_COMPILER_SETTINGS`` to ``environment`` (the settings travel in the environment:
  no hyperparameter is added, so the script's arguments are the user's own);
- adds the compiler's metric definitions (``compiler:compile_seconds``, ...) at ``train()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import PrivateAttr, ValidationError
from sagemaker.core.shapes import MetricDefinition
from sagemaker.train.model_trainer import Mode
from sagemaker.train.model_trainer import ModelTrainer as _SdkModelTrainer

from sagemaker_tc import contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import (
    EstimatorArgumentError,
    MaxRuntimeExceededError,
    ModelTrainerArgumentError,
    SagemakerTCError,
    TrainingJobFailedError,
)
from sagemaker_tc.sdk import _internals, compiler_rules, instances, job_status, value_checks
from sagemaker_tc.sdk.images import MIN_PYTORCH, check_training_image
from sagemaker_tc.sdk.instances import InstanceKind
from sagemaker_tc.sdk.job_status import LocalJobResult
from sagemaker_tc.sdk.v3 import checks

_SECRET_ARGUMENTS = ("environment", "hyperparameters")


def _describe(error: ValidationError) -> str:
    """pydantic's error list as one line per argument: what was given, and each form it accepts (a
    union type such as ``str | PipelineVariable`` gives one error per form)."""
    by_argument: dict[str, list[dict[str, Any]]] = {}
    for item in error.errors():
        by_argument.setdefault(str(item["loc"][0]) if item["loc"] else "<arguments>", []).append(item)
    lines = []
    for argument, items in by_argument.items():
        given = items[0].get("input")
        accepted = "; or ".join(dict.fromkeys(item["msg"] for item in items))
        # environment and hyperparameters (or any mapping) may hold secrets: the type only, never a value.
        secret = argument in _SECRET_ARGUMENTS or isinstance(given, Mapping)
        shown = type(given).__name__ if secret else f"{type(given).__name__} {given!r}"
        lines.append(f"{argument}: got {shown}, accepted: {accepted}{_HINTS.get(argument, '')}")
    return "; ".join(lines)


# What the SDK v2 habit behind a wrong-typed argument is, and the SDK v3 form.
_HINTS = {"tags": " (SDK v2's {'Key': ..., 'Value': ...} dicts are sagemaker.core.shapes.Tag(key=..., value=...) here)"}


class ModelTrainer(_SdkModelTrainer):
    """sagemaker-train's ``ModelTrainer`` plus ``compiler_config``.

    Args (besides sagemaker-train's):
        compiler_config: a :class:`~sagemaker_tc.config.TrainingCompilerConfig`; None (the default)
            or ``TrainingCompilerConfig(enabled=False)`` leaves the trainer as sagemaker-train's.

    Raises (when built, and at ``train()``; all ``ValueError`` subclasses from :mod:`sagemaker_tc.errors`):
        ConfigError: ``compiler_config`` is not a ``sagemaker_tc.TrainingCompilerConfig``, or its
            settings do not fit SageMaker's 512-character environment values.
        ModelTrainerArgumentError: see :func:`~sagemaker_tc.sdk.v3.checks.check_source_code` and
            :func:`~sagemaker_tc.sdk.v3.checks.check_distributed`; ``algorithm_name`` instead of
            ``training_image``; an argument of the wrong type (sagemaker-train's own validation,
            one line per argument; also with the compiler off).
        UnsupportedImageError: a ``training_image`` that is an AWS Deep Learning Container without
            PyTorch >= 2.7 (an SMTC image, a TensorFlow image, PyTorch 1.x), or one whose tag's torch
            (and transformers) matches no tested stack of the support matrix (:mod:`sagemaker_tc.sdk.support`).
        UnsupportedInstanceTypeError: see :func:`~sagemaker_tc.sdk.v3.checks.check_compute`.
        EstimatorArgumentError: an environment variable (a reserved name included) or local
            ``cache`` the estimators refuse; a ``StoppingCondition`` over SageMaker's 28 days.
        HyperparameterError: a hyperparameter name or value the estimators refuse.
        SourceNotFoundError: ``local_process`` without a local ``source_dir`` holding the entry script.
        SourceLinkError: a link in a local ``source_dir`` resolves outside it, dangles or loops (see
            :func:`~sagemaker_tc.sdk.v3.checks.source_files`); also with the compiler off under
            ``local_process``.
    """

    compiler_config: Any = None
    _local_job: LocalJobResult | None = PrivateAttr(default=None)
    _settings_written: str | None = PrivateAttr(default=None)  # the SM_TRAINING_COMPILER_SETTINGS this trainer set

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            # pydantic wraps a ValueError raised while the model is built; ours are raised as they are.
            named = [
                item["ctx"]["error"]
                for item in error.errors()
                if isinstance(item.get("ctx", {}).get("error"), SagemakerTCError)
            ]
            if named:
                raise named[0] from None
            raise ModelTrainerArgumentError(f"ModelTrainer arguments not accepted: {_describe(error)}") from None

    def model_post_init(self, context: Any, /) -> None:
        from_file = isinstance(self.hyperparameters, str)
        self._apply_compiler(warn=True)  # before sagemaker-train's defaults (role, bucket: AWS calls)
        super().model_post_init(context)
        if (self.compiler_enabled and from_file) or (not self.compiler_enabled and self._runs_local_process):
            checks.check_hyperparameters(self.hyperparameters)  # a hyperparameters file is loaded by now

    @property
    def compiler_enabled(self) -> bool:
        """True when the job runs through the compiler's driver (an enabled ``compiler_config``)."""
        return bool(self.compiler_config)

    @property
    def _runs_local_process(self) -> bool:
        return self.training_mode == Mode.LOCAL_CONTAINER and getattr(self.compute, "instance_type", None) == (
            checks.LOCAL_PROCESS
        )

    @property
    def latest_local_job(self) -> LocalJobResult | None:
        """The last ``local_process`` job (status, job folder, ``model.tar.gz`` and ``output.tar.gz`` URIs)."""
        return self._local_job

    def _apply_compiler(self, *, warn: bool) -> InstanceKind | None:
        """Check the trainer's arguments for the compiler and install its driver and settings.

        Returns:
            Where the job runs; None when the compiler is off.
        """
        config = compiler_rules.check_compiler_config(self.compiler_config)
        if config is None or not config.enabled:
            return None
        entry_script = checks.check_source_code(self.source_code, local=self._runs_local_process)
        checks.source_files(self.source_code)  # what sagemaker-train uploads or mounts, or local_process copies
        checks.leave_out_job_folders(self.source_code, self.local_container_root)
        driver = checks.check_distributed(self.distributed)
        if self.training_image is None:
            raise ModelTrainerArgumentError(
                f"compiler_config needs training_image (a PyTorch >= {MIN_PYTORCH[0]}.{MIN_PYTORCH[1]} image, "
                "e.g. the PyTorch training DLC); "
                "algorithm_name jobs run the algorithm's own code"
            )
        check_training_image(self.training_image)
        instance_type, kind = checks.check_compute(self.training_mode, self.compute, warn=warn)
        checks.check_stopping_condition(self.stopping_condition)
        self._check_job_fields(kind)
        if warn and not isinstance(self.hyperparameters, str):  # when built; a file's once sagemaker-train loads it
            checks.check_hyperparameters(self.hyperparameters)
        config = compiler_rules.resolve_cache(config, kind)
        compiler_rules.check_backend(config, kind, instance_type)
        environment = dict(self.environment or {})
        if environment.get(contract.ENV_SETTINGS) == self._settings_written:
            environment.pop(contract.ENV_SETTINGS, None)  # ours, from an earlier check: written anew below
        checks.check_environment(environment, kind, compiler_enabled=warn)  # warned once, when the job is built
        environment.update(contract.encode_environment(config, entry_point=entry_script))
        self._settings_written = environment[contract.ENV_SETTINGS]
        if config is not self.compiler_config:
            self.compiler_config = config
        if self.distributed is not driver:
            self.distributed = driver
        self.environment = environment
        return kind

    def _check_job_fields(self, kind: InstanceKind) -> None:
        """Names, tags, the checkpoint config and a local cache, as the estimators check theirs (see
        :func:`checks.check_names`, :func:`checks.check_checkpoint_config` and
        :func:`checks.check_cache_apart`)."""
        cloud = kind in instances.CLOUD_KINDS
        checks.check_names(
            self.base_job_name, self.role, self.tags, self.output_data_config, self.networking, cloud=cloud
        )
        output_path = (
            self.local_container_root
            if kind is InstanceKind.LOCAL_PROCESS
            else getattr(self.output_data_config, "s3_output_path", None)
        )
        checks.check_checkpoint_config(
            self.checkpoint_config,
            kind,
            output_path=output_path,
            source_dir=getattr(self.source_code, "source_dir", None),
        )
        if kind is InstanceKind.LOCAL_PROCESS and self.compiler_enabled:  # a local cache runs only there
            checks.check_cache_apart(self.compiler_config.cache, output_path, self.checkpoint_config, self.source_code)

    def _add_metric_definitions(self) -> None:
        """The compiler's metric definitions after the user's (a user definition of the same name wins)."""
        current = list(_internals.model_trainer_metric_definitions(self) or [])
        names = {definition.name for definition in current}
        extra = [MetricDefinition(name=item["Name"], regex=item["Regex"]) for item in contract.metric_definitions()]
        self.with_metric_definitions(current + [item for item in extra if item.name not in names])

    def train(self, input_data_config=None, wait: bool = True, logs: bool = True, dry_run: bool = False):
        """sagemaker-train's ``train()``, after the compiler's checks; ``local_process`` runs here.

        Args and the return value are sagemaker-train's (``_StepArguments`` under a
        ``PipelineSession``). With ``Compute(instance_type="local_process")`` the job runs in the
        foreground on this machine through the real compiler driver (see
        :mod:`sagemaker_tc.sdk.v3.local`); ``latest_local_job`` holds the result.

        Raises:
            Any error of the class docstring (the fields may have changed since construction).
            ChannelNotFoundError: ``local_process`` input that is not a local path; an EFS/FSx input of
                a SageMaker job without ``Networking(subnets=...)``.
            DockerNotAvailableError: ``local_cpu``/``local_gpu`` without a Docker engine or compose.
            EstimatorArgumentError: ``local_process`` with ``wait=False``; ``wait``, ``logs`` or
                ``dry_run`` that is not a bool (``wait="no"`` is truthy: it would block), checked first.
            ModelTrainerArgumentError: ``input_data_config`` that is not a list (``"s3://..."``).
            TrainingJobFailedError: a ``local_process`` job failed (carries its failure reason).
        """
        for name, flag in (("wait", wait), ("logs", logs), ("dry_run", dry_run)):
            if not (flag is None and name != "dry_run"):  # sagemaker-train types wait and logs Optional[bool]
                value_checks.check_flag(name, flag)
        if input_data_config is not None and (
            isinstance(input_data_config, (str, bytes)) or not isinstance(input_data_config, (list, tuple))
        ):
            raise ModelTrainerArgumentError(
                f"input_data_config must be a list of InputData or Channel objects, got "
                f"{type(input_data_config).__name__}: for example [InputData(channel_name='train', "
                "data_source='s3://bucket/train')]"
            )
        kind = self._apply_compiler(warn=False)
        if self.compiler_enabled or self._runs_local_process:
            checks.check_hyperparameters(self.hyperparameters)
        if self._runs_local_process:
            if kind is None:  # the compiler is off: local_process is still ours
                self._check_job_fields(InstanceKind.LOCAL_PROCESS)
            return self._train_local_process(input_data_config, wait=wait, logs=logs, dry_run=dry_run)
        if kind in instances.CLOUD_KINDS:
            checks.check_file_system_inputs(
                [self.input_data_config, input_data_config], getattr(self.networking, "subnets", None)
            )
        if kind is not None:
            self._add_metric_definitions()
            if kind is InstanceKind.LOCAL_DOCKER and not dry_run:
                from sagemaker_tc.sdk.v3 import local

                local.check_docker()
        return super().train(input_data_config=input_data_config, wait=wait, logs=logs, dry_run=dry_run)

    def _train_local_process(self, input_data_config, *, wait: bool, logs: bool, dry_run: bool) -> None:
        from sagemaker_tc.sdk.v3 import local

        if not wait:
            raise EstimatorArgumentError("instance_type='local_process' runs in the foreground: use wait=True")
        config = self.compiler_config if self.compiler_enabled else TrainingCompilerConfig(enabled=False)
        result = local.run(self, config, input_data_config, logs=logs, dry_run=dry_run)
        if result is None:
            return None
        self._local_job = result
        if (result.status, result.secondary_status) == (job_status.STOPPED, job_status.MAX_RUNTIME_EXCEEDED):
            raise MaxRuntimeExceededError(result.job_name, result.failure_reason or "unknown")
        if result.status != "Completed":
            raise TrainingJobFailedError(result.job_name, result.failure_reason or "unknown")
        return None
