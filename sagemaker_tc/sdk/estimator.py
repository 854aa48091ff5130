"""``HuggingFace`` and ``PyTorch`` estimators with ``compiler_config``, on sagemaker-core 2.x.

Argument names are SageMaker Python SDK v2's, so an SMTC job changes only its imports. All checks
run in ``__init__`` and at the start of ``fit()``, before any job starts.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sagemaker_tc import contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import (
    ChannelNotFoundError,
    ConfigError,
    EstimatorArgumentError,
    TrainingJobFailedError,
    UnsupportedInstanceTypeError,
)
from sagemaker_tc.sdk import local_process
from sagemaker_tc.sdk.hyperparameters import encode_hyperparameters
from sagemaker_tc.sdk.request import TrainingJobRequest, build_request, make_job_name, metric_definitions
from sagemaker_tc.sdk.source import build_source_archive, resolve_source

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_PATH = "sagemaker-tc-output"
DEFAULT_MAX_RUN_SECONDS = 24 * 60 * 60  # SageMaker's default MaxRuntimeInSeconds (1 day)
# Channel names: CreateTrainingJob's ChannelName pattern [A-Za-z0-9\.\-_]+, at most 64 chars.
_CHANNEL_NAME_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
_INSTANCE_TYPE_RE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")

# Metric lines the runtime prints (sagemaker_tc.compiler.report); added to metric_definitions when
# the compiler is on, so SageMaker charts them like any other training metric.
COMPILER_METRIC_DEFINITIONS = [
    {"Name": f"compiler:{name}", "Regex": rf"\[sagemaker-tc\] {name}=([0-9.eE+-]+)"}
    for name in ("compile_seconds", "steady_step_seconds", "samples_per_second", "recompiles", "graph_breaks")
]


def _check_instance(instance_type: Any, instance_count: Any) -> None:
    if not isinstance(instance_count, int) or isinstance(instance_count, bool) or instance_count < 1:
        raise UnsupportedInstanceTypeError(f"instance_count must be a positive integer, got {instance_count!r}")
    if instance_type == local_process.INSTANCE_TYPE:
        if instance_count != 1:
            raise UnsupportedInstanceTypeError(
                f"instance_type='local_process' runs one host in this release; got instance_count={instance_count}"
            )
        return
    if instance_type in ("local", "local_gpu") or (
        isinstance(instance_type, str) and _INSTANCE_TYPE_RE.match(instance_type)
    ):
        raise UnsupportedInstanceTypeError(
            f"instance_type={instance_type!r} is not available in this release of sagemaker-tc (Docker local mode "
            "and SageMaker training jobs come next); use instance_type='local_process' to run on this host"
        )
    raise UnsupportedInstanceTypeError(
        f"instance_type={instance_type!r} is not an instance type: use 'local_process' (this host, no Docker), "
        "'local'/'local_gpu' (Docker) or an 'ml.<family>.<size>' type such as 'ml.g5.2xlarge'"
    )


def _check_environment(environment: Any) -> dict[str, str]:
    if environment is None:
        return {}
    if not isinstance(environment, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        raise EstimatorArgumentError(f"environment must be a dict of str -> str, got {environment!r}")
    return dict(environment)


def _check_compiler_config(config: Any) -> TrainingCompilerConfig | None:
    if config is None or isinstance(config, TrainingCompilerConfig):
        return config
    raise ConfigError(
        f"compiler_config must be a sagemaker_tc.TrainingCompilerConfig, got {type(config).__module__}."
        f"{type(config).__qualname__}"
    )


def _check_distribution(distribution: Any) -> None:
    if distribution in (None, {}):
        return
    raise EstimatorArgumentError(
        f"distribution={distribution!r} is not supported in this release of sagemaker-tc; "
        "omit it to train with one process"
    )


def _channels(inputs: str | Mapping[str, str] | None) -> dict[str, str]:
    """Check ``fit()`` inputs and return channel name -> ``file://`` URI."""
    if inputs is None:
        return {}
    if isinstance(inputs, (str, Path)):
        inputs = {"training": str(inputs)}  # SDK v2: a bare string is the "training" channel
    if not isinstance(inputs, Mapping):
        raise ChannelNotFoundError(f"inputs must be a dict of channel name -> path, got {type(inputs).__name__}")
    channels = {}
    for name, uri in inputs.items():
        if not isinstance(name, str) or not _CHANNEL_NAME_RE.match(name) or name in (".", ".."):
            raise ChannelNotFoundError(
                f"channel name {name!r} is not accepted: 1-64 characters of letters, digits, '.', '-', '_' "
                "(not '.' or '..')"
            )
        clash = next((other for other in channels if other.upper() == name.upper()), None)
        if clash is not None:
            raise ChannelNotFoundError(
                f"channel names {clash!r} and {name!r} both become SM_CHANNEL_{name.upper()}: rename one"
            )
        if not isinstance(uri, (str, Path)):
            raise ChannelNotFoundError(f"channel {name!r}: expected a path or file:// URI, got {uri!r}")
        path = local_process.local_path(str(uri))
        if not path.exists():
            raise ChannelNotFoundError(f"channel {name!r}: {str(uri)!r} does not exist")
        channels[name] = path.as_uri()
    return channels


class _FrameworkEstimator:
    """Shared by :class:`HuggingFace` and :class:`PyTorch`; use those."""

    _default_base_job_name = "training"

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
        sagemaker_session: Any = None,
        max_run: int = DEFAULT_MAX_RUN_SECONDS,
        volume_size: int = 30,
    ) -> None:
        self.source = resolve_source(entry_point, source_dir)
        self.entry_point = entry_point
        self.source_dir = source_dir
        _check_instance(instance_type, instance_count)
        self.instance_type = instance_type
        self.instance_count = instance_count
        self.role = role
        self.py_version = py_version
        self.compiler_config = _check_compiler_config(compiler_config)
        _check_distribution(distribution)
        self.distribution = distribution
        self._user_hyperparameters = encode_hyperparameters(hyperparameters)
        self.environment = _check_environment(environment)
        if self.compiler_enabled and not self.source.entry_point.endswith(".py"):
            raise EstimatorArgumentError(
                f"entry_point {entry_point!r} is not a Python script: with compiler_config enabled the entry point "
                "must be a .py file (the compiler runs inside the Python process); shell entry points run without it"
            )
        self.output_path = output_path or DEFAULT_OUTPUT_PATH
        local_process.local_path(self.output_path)  # local_process writes locally: refuse s3:// now
        self.base_job_name = base_job_name or self._default_base_job_name
        make_job_name(self.base_job_name)  # fail now on a bad base name
        self.image_uri = image_uri
        self._metrics = metric_definitions
        self._metric_shapes()  # fail now on bad regexes
        self.sagemaker_session = sagemaker_session  # kept for SDK compatibility; local_process needs no session
        if not isinstance(max_run, int) or max_run < 1:
            raise EstimatorArgumentError(f"max_run must be a positive number of seconds, got {max_run!r}")
        self.max_run = max_run
        self.volume_size = volume_size
        self.model_data: str | None = None
        self.latest_training_job: local_process.LocalJobResult | None = None

    @property
    def compiler_enabled(self) -> bool:
        """True when the job runs through the compiler's launcher (a config that is enabled)."""
        return bool(self.compiler_config)

    def _metric_shapes(self):
        definitions = list(self._metrics or [])
        if self.compiler_enabled:
            names = {item.get("Name") for item in definitions if isinstance(item, Mapping)}
            definitions += [item for item in COMPILER_METRIC_DEFINITIONS if item["Name"] not in names]
        return metric_definitions(definitions)

    def hyperparameters(self) -> dict[str, str]:
        """The job's hyperparameters as sent: the user's plus SMTC's compiler keys, all JSON-encoded.

        The script-mode keys (``sagemaker_program``, ``sagemaker_submit_directory``) are added per job.
        """
        encoded = dict(self._user_hyperparameters)
        if self.compiler_config is not None:
            encoded.update(
                encode_hyperparameters(
                    contract.encode(self.compiler_config, entry_point=self.source.entry_point), allow_reserved=True
                )
            )
        return encoded

    def _build_request(self, job_name: str, channels: dict[str, str], submit_directory: str) -> TrainingJobRequest:
        program = contract.LAUNCHER_PROGRAM if self.compiler_enabled else self.source.entry_point
        script_mode = {
            contract.HP_PROGRAM: program,
            contract.HP_SUBMIT_DIRECTORY: submit_directory,
            contract.HP_JOB_NAME: job_name,
            contract.HP_LOG_LEVEL: logging.INFO,
        }
        hyperparameters = self.hyperparameters()
        hyperparameters.update(encode_hyperparameters(script_mode, allow_reserved=True))
        output = local_process.local_path(self.output_path).as_uri()
        return build_request(
            job_name=job_name,
            image_uri=self.image_uri,
            hyperparameters=hyperparameters,
            environment=self.environment,
            channels=channels,
            output_path=output,
            instance_type=self.instance_type,
            instance_count=self.instance_count,
            volume_size_gb=self.volume_size,
            max_run_seconds=self.max_run,
            role=self.role,
            metrics=self._metric_shapes(),
        )

    def fit(
        self,
        inputs: str | Mapping[str, str] | None = None,
        wait: bool = True,
        logs: bool = True,
        job_name: str | None = None,
    ) -> None:
        """Run the training job and wait for it.

        Args:
            inputs: channel name -> local folder/file or ``file://`` URI (a bare string is the
                ``training`` channel, as in SDK v2). Each becomes ``SM_CHANNEL_<NAME>`` in the job.
            wait: must be True for ``local_process`` (it runs in the foreground).
            logs: stream the job's log to stdout.
            job_name: the job's name; default ``<base_job_name>-<timestamp>``.

        After it returns, ``model_data`` is the ``file://`` URI of ``model.tar.gz``.

        Raises:
            ChannelNotFoundError: an input path does not exist or a channel name is invalid.
            EstimatorArgumentError: ``wait=False`` with ``local_process``.
            TrainingJobFailedError: the job failed; the message carries the job's failure reason
                (the toolkit's ``output/failure``, which includes the script's exception message).
        """
        if not wait:
            raise EstimatorArgumentError("instance_type='local_process' runs in the foreground: use wait=True")
        channels = _channels(inputs)
        job_name = job_name or make_job_name(self.base_job_name)
        with tempfile.TemporaryDirectory(prefix="sagemaker-tc-source-") as staging:
            archive = build_source_archive(self.source, Path(staging), inject_launcher=self.compiler_enabled)
            request = self._build_request(job_name, channels, str(archive))
            result = local_process.run_job(request, logs=logs)
        self.latest_training_job = result
        self.model_data = result.model_artifacts
        if result.status != "Completed":
            raise TrainingJobFailedError(result.job_name, result.failure_reason or "unknown")


class HuggingFace(_FrameworkEstimator):
    """Hugging Face estimator with the training compiler, SMTC's ``sagemaker.huggingface.HuggingFace``'s successor.

    A ``transformers.Trainer`` script is compiled with no change to the script when
    ``compiler_config=TrainingCompilerConfig()`` is given.

    Args (besides the shared ones, see :meth:`fit`):
        transformers_version, pytorch_version, py_version: the DLC versions (used to pick the
            training image on SageMaker; ``local_process`` runs this host's Python).
    """

    _default_base_job_name = "huggingface-pytorch-training"

    def __init__(
        self,
        entry_point: str,
        *,
        transformers_version: str | None = None,
        pytorch_version: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.transformers_version = transformers_version
        self.pytorch_version = pytorch_version
        super().__init__(entry_point, **kwargs)


class PyTorch(_FrameworkEstimator):
    """PyTorch estimator with the training compiler, SMTC's ``sagemaker.pytorch.PyTorch``'s successor.

    A plain PyTorch loop turns compilation on with one call, ``sagemaker_tc.compile_model(model)``.

    Args (besides the shared ones, see :meth:`fit`):
        framework_version, py_version: the DLC versions (used to pick the training image on
            SageMaker; ``local_process`` runs this host's Python).
    """

    _default_base_job_name = "pytorch-training"

    def __init__(self, entry_point: str, *, framework_version: str | None = None, **kwargs: Any) -> None:
        self.framework_version = framework_version
        super().__init__(entry_point, **kwargs)
