"""``HuggingFace`` and ``PyTorch`` estimators with ``compiler_config``, on sagemaker-core 2.x.

Argument names are SageMaker Python SDK v2's, so an SMTC job changes only its imports. All checks
run in ``__init__`` and at the start of ``fit()``, before any job starts.
"""

from __future__ import annotations

import logging
import re
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sagemaker.core.helper.pipeline_variable import PipelineVariable
from sagemaker.core.workflow.pipeline_context import PipelineSession, runnable_by_pipeline

from sagemaker_tc import _internals, contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import (
    ChannelNotFoundError,
    ConfigError,
    EstimatorArgumentError,
    TrainingJobFailedError,
    UnsupportedInstanceTypeError,
)
from sagemaker_tc.sdk import cloud, local_docker, local_process
from sagemaker_tc.sdk.distribution import distribution_hyperparameters
from sagemaker_tc.sdk.hyperparameters import encode_hyperparameters
from sagemaker_tc.sdk.images import training_image
from sagemaker_tc.sdk.instances import InstanceKind, classify_instance
from sagemaker_tc.sdk.request import (
    TrainingJobRequest,
    build_request,
    check_job_name,
    make_job_name,
    metric_definitions,
)
from sagemaker_tc.sdk.source import archive_digest, build_source_archive, resolve_source

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_PATH = "sagemaker-tc-output"
DEFAULT_MAX_RUN_SECONDS = 24 * 60 * 60  # SageMaker's default MaxRuntimeInSeconds (1 day)
# Channel names: CreateTrainingJob's ChannelName pattern [A-Za-z0-9\.\-_]+, at most 64 chars.
_CHANNEL_NAME_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
# CreateTrainingJob RoleArn: arn:aws[-partition]:iam::<account>:role/<path/name>, 20-2048 chars.
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[\w+=,.@/-]+$")

# Metric lines the runtime prints (contract.METRIC_NAMES); added to metric_definitions when the
# compiler is on, so SageMaker charts them like any other training metric.
COMPILER_METRIC_DEFINITIONS = contract.metric_definitions()


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


def _channels(inputs: str | Mapping[str, str] | None, *, cloud: bool) -> dict[str, str]:
    """Check ``fit()`` inputs; return channel name -> URI (``s3://`` for cloud jobs, ``file://`` locally)."""
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
            raise ChannelNotFoundError(f"channel {name!r}: expected a path or URI, got {uri!r}")
        if cloud:
            if not str(uri).startswith("s3://"):
                raise ChannelNotFoundError(
                    f"channel {name!r}: SageMaker training jobs read s3:// URIs, got {str(uri)!r} "
                    "(upload local data to S3 first, or use instance_type='local_process')"
                )
            channels[name] = str(uri)
            continue
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
        checkpoint_s3_uri: str | None = None,
        checkpoint_local_path: str | None = None,
    ) -> None:
        self.source = resolve_source(entry_point, source_dir)
        self.entry_point = entry_point
        self.source_dir = source_dir
        # A pipeline parameter (ParameterString) is checked, and picks the image, by its default value.
        self._checked_instance_type = getattr(instance_type, "default_value", instance_type)
        if isinstance(instance_type, PipelineVariable) and not isinstance(self._checked_instance_type, str):
            raise UnsupportedInstanceTypeError(
                "a pipeline parameter instance_type needs a default_value such as 'ml.g5.2xlarge' "
                "(it picks the training image)"
            )
        self._kind = classify_instance(self._checked_instance_type, instance_count)
        if isinstance(instance_type, PipelineVariable) and self._kind not in (InstanceKind.GPU, InstanceKind.CPU):
            raise UnsupportedInstanceTypeError(
                f"a pipeline parameter instance_type must default to an ml.* instance type (pipelines run SageMaker "
                f"training jobs), got default {self._checked_instance_type!r}"
            )
        self.instance_type = instance_type
        self.instance_count = instance_count
        self.role = role
        self.py_version = py_version
        self.compiler_config = _check_compiler_config(compiler_config)
        self._distribution_hyperparameters = distribution_hyperparameters(distribution)
        self.distribution = distribution
        self._user_hyperparameters = encode_hyperparameters(hyperparameters)
        self.environment = _check_environment(environment)
        if self.compiler_enabled and not self.source.entry_point.endswith(".py"):
            raise EstimatorArgumentError(
                f"entry_point {entry_point!r} is not a Python script: with compiler_config enabled the entry point "
                "must be a .py file (the compiler runs inside the Python process); shell entry points run without it"
            )
        if self.is_cloud:
            if output_path is not None and not str(output_path).startswith("s3://"):
                raise EstimatorArgumentError(
                    f"output_path for SageMaker training jobs is an s3:// URI, got {output_path!r}"
                )
            self.output_path = output_path  # None: s3://<session's default bucket>/
        else:
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
        if checkpoint_s3_uri is not None and not str(checkpoint_s3_uri).startswith("s3://"):
            raise EstimatorArgumentError(f"checkpoint_s3_uri must be an s3:// URI, got {checkpoint_s3_uri!r}")
        if checkpoint_local_path is not None and checkpoint_s3_uri is None:
            raise EstimatorArgumentError("checkpoint_local_path needs checkpoint_s3_uri (the S3 side of the sync)")
        if checkpoint_s3_uri is not None and not self.is_cloud:
            raise EstimatorArgumentError("checkpoint_s3_uri applies to SageMaker training jobs (ml.* instance types)")
        self.checkpoint_s3_uri = checkpoint_s3_uri
        self.checkpoint_local_path = checkpoint_local_path
        self.model_data: str | None = None
        self.latest_training_job: local_process.LocalJobResult | cloud.CloudJob | None = None

    @property
    def is_cloud(self) -> bool:
        """True when ``fit()`` creates a SageMaker training job (an ``ml.*`` instance type)."""
        return self._kind in (InstanceKind.GPU, InstanceKind.CPU)

    def _image_uri(self, region: str) -> str:
        """The stock DLC training image for this estimator's versions (each framework class defines it)."""
        raise NotImplementedError(f"{type(self).__name__} names no framework image")

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
        encoded.update(encode_hyperparameters(self._distribution_hyperparameters, allow_reserved=True))
        if self.compiler_config is not None:
            encoded.update(
                encode_hyperparameters(
                    contract.encode(self.compiler_config, entry_point=self.source.entry_point), allow_reserved=True
                )
            )
        return encoded

    def _build_request(
        self,
        job_name: str,
        channels: dict[str, str],
        submit_directory: str,
        *,
        image_uri: str | None = None,
        output_path: str | None = None,
        region: str | None = None,
    ) -> TrainingJobRequest:
        program = contract.LAUNCHER_PROGRAM if self.compiler_enabled else self.source.entry_point
        script_mode = {
            contract.HP_PROGRAM: program,
            contract.HP_SUBMIT_DIRECTORY: submit_directory,
            contract.HP_JOB_NAME: job_name,
            contract.HP_LOG_LEVEL: logging.INFO,
        }
        if region:
            script_mode[contract.HP_REGION] = region
        hyperparameters = self.hyperparameters()
        hyperparameters.update(encode_hyperparameters(script_mode, allow_reserved=True))
        output = output_path or local_process.local_path(self.output_path).as_uri()
        return build_request(
            job_name=job_name,
            image_uri=image_uri or self.image_uri,
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
            checkpoint_s3_uri=self.checkpoint_s3_uri,
            checkpoint_local_path=self.checkpoint_local_path,
        )

    @runnable_by_pipeline
    def fit(
        self,
        inputs: str | Mapping[str, str] | None = None,
        wait: bool = True,
        logs: bool = True,
        job_name: str | None = None,
    ) -> Any:
        """Run the training job.

        Args:
            inputs: channel name -> data (a bare string is the ``training`` channel, as in SDK v2);
                each becomes ``SM_CHANNEL_<NAME>`` in the job. ``local_process``: a local folder/file
                or ``file://`` URI. SageMaker training jobs: an ``s3://`` URI.
            wait: block until the job ends (``local_process`` always runs in the foreground).
            logs: stream the job's log to stdout.
            job_name: the job's name; default ``<base_job_name>-<timestamp>``.

        After a waited job completes, ``model_data`` is the URI of ``model.tar.gz`` (``file://``
        locally, ``s3://`` on SageMaker); ``latest_training_job`` is the job.

        Under a ``PipelineSession`` nothing runs: ``fit()`` returns the step arguments for
        ``TrainingStep(name=..., step_args=estimator.fit(...))`` (the source is uploaded when the
        pipeline definition is built).

        Raises:
            ChannelNotFoundError: an input is missing, has the wrong scheme, or a channel name is invalid.
            EstimatorArgumentError: ``wait=False`` with ``local_process``; no ``role`` for a cloud job.
            UnsupportedImageError: no stock DLC image for the versions (cloud jobs without ``image_uri``).
            TrainingJobFailedError: the job failed; the message carries the job's failure reason
                (``output/failure``, which starts with the script's exception and message).
        """
        if self.is_cloud:
            return self._fit_cloud(inputs, wait=wait, logs=logs, job_name=job_name)
        if self._kind is InstanceKind.LOCAL_DOCKER:
            return self._fit_docker(inputs, job_name=job_name)
        if not wait:
            raise EstimatorArgumentError("instance_type='local_process' runs in the foreground: use wait=True")
        channels = _channels(inputs, cloud=False)
        job_name = job_name or make_job_name(self.base_job_name)
        with tempfile.TemporaryDirectory(prefix="sagemaker-tc-source-") as staging:
            archive = build_source_archive(self.source, Path(staging), inject_launcher=self.compiler_enabled)
            request = self._build_request(job_name, channels, str(archive))
            result = local_process.run_job(request, logs=logs)
        self.latest_training_job = result
        self.model_data = result.model_artifacts
        if result.status != "Completed":
            raise TrainingJobFailedError(result.job_name, result.failure_reason or "unknown")

    def _fit_docker(self, inputs, *, job_name: str | None) -> None:
        channels = _channels(inputs, cloud=False)
        local_docker.check_docker()  # before any work: a clear error when Docker is missing
        image_uri = self.image_uri or self._image_uri(self._region_for_local())
        job_name = job_name or make_job_name(self.base_job_name)
        code_dir = local_process.local_path(self.output_path) / job_name / "code"
        with tempfile.TemporaryDirectory(prefix="sagemaker-tc-source-") as staging:
            archive = build_source_archive(self.source, Path(staging), inject_launcher=self.compiler_enabled)
            code_dir.mkdir(parents=True)
            with tarfile.open(archive) as tar:
                tar.extractall(code_dir, filter="data")
        request = self._build_request(job_name, channels, code_dir.as_uri(), image_uri=image_uri)
        self.model_data = local_docker.run_job(request)

    @staticmethod
    def _region_for_local() -> str:
        """The AWS region that picks the DLC image in Docker local mode (the default region, else us-east-1)."""
        import boto3

        return boto3.session.Session().region_name or "us-east-1"

    def _fit_cloud(self, inputs, *, wait: bool, logs: bool, job_name: str | None):
        channels = _channels(inputs, cloud=True)
        if not self.role:
            raise EstimatorArgumentError("role is required for SageMaker training jobs (an IAM role ARN)")
        if not _ROLE_ARN_RE.match(str(self.role)):
            raise EstimatorArgumentError(
                f"role must be a full IAM role ARN such as 'arn:aws:iam::111122223333:role/SageMakerRole', "
                f"got {self.role!r}"
            )
        if job_name is not None:
            check_job_name(job_name)
        session = cloud.resolve_session(self.sagemaker_session)
        in_pipeline = isinstance(session, PipelineSession)
        if isinstance(self.instance_type, PipelineVariable) and not in_pipeline:
            raise EstimatorArgumentError(
                "instance_type is a pipeline parameter: build the step under a PipelineSession "
                "(sagemaker_session=PipelineSession()), or pass a plain instance type string"
            )
        region = session.boto_region_name
        image_uri = self.image_uri or self._image_uri(region)
        job_name = job_name or make_job_name(self.base_job_name)
        # As SDK v2: the output path's bucket, else the session's default bucket (which asks STS for the account).
        bucket = cloud.bucket_of(self.output_path) if self.output_path else session.default_bucket()
        output_path = self.output_path or f"s3://{bucket}/"
        with tempfile.TemporaryDirectory(prefix="sagemaker-tc-source-") as staging:
            archive = build_source_archive(self.source, Path(staging), inject_launcher=self.compiler_enabled)
            if in_pipeline:
                key_prefix = f"{self.base_job_name}/code/{archive_digest(archive)}"
            else:
                key_prefix = f"{job_name}/source"
            submit_directory = cloud.upload_source(session, archive, bucket=bucket, key_prefix=key_prefix)
        request = self._build_request(
            job_name, channels, submit_directory, image_uri=image_uri, output_path=output_path, region=region
        )
        if in_pipeline:
            # Building a pipeline definition: hand the request to the step instead of creating a job
            # (TrainingStep reads it back from session.context).
            _internals.hand_request_to_pipeline(session, request.to_api_dict())
            return None
        self.latest_training_job = cloud.create_job(request, session)
        self.model_data = None
        if wait:
            self.model_data = self.latest_training_job.wait(logs=logs)

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

    def wait(self, logs: bool = True) -> None:
        """Wait for the latest cloud job started with ``fit(wait=False)``; sets ``model_data``.

        Raises:
            EstimatorArgumentError: no cloud job was started.
            TrainingJobFailedError: the job failed (carries its FailureReason).
        """
        if not isinstance(self.latest_training_job, cloud.CloudJob):
            raise EstimatorArgumentError("no SageMaker training job to wait for: call fit(..., wait=False) first")
        self.model_data = self.latest_training_job.wait(logs=logs)

    @classmethod
    def attach(cls, training_job_name: str, sagemaker_session: Any = None) -> cloud.CloudJob:
        """Attach to an existing SageMaker training job by name: returns its handle
        (``status``, ``model_data``, ``wait()``), not an estimator."""
        from botocore.exceptions import ClientError

        job = cloud.CloudJob(job_name=training_job_name, session=cloud.resolve_session(sagemaker_session))
        try:
            job.describe()  # fail now if the job does not exist
        except ClientError as error:
            raise EstimatorArgumentError(f"cannot attach to training job {training_job_name!r}: {error}") from None
        return job


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
        if "framework_version" in kwargs:
            raise EstimatorArgumentError(
                "HuggingFace takes transformers_version and pytorch_version, not framework_version"
            )
        self.transformers_version = transformers_version
        self.pytorch_version = pytorch_version
        super().__init__(entry_point, **kwargs)

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
    """

    _default_base_job_name = "pytorch-training"

    def __init__(self, entry_point: str, *, framework_version: str | None = None, **kwargs: Any) -> None:
        self.framework_version = framework_version
        super().__init__(entry_point, **kwargs)

    def _image_uri(self, region: str) -> str:
        return training_image(
            framework="pytorch",
            region=region,
            instance_type=self._checked_instance_type,
            py_version=self.py_version,
            pytorch_version=self.framework_version,
        )
