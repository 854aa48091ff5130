"""Docker-free local mode (``instance_type="local_process"``): run a training job on this host.

The engine reads a :class:`~sagemaker_tc.sdk.request.TrainingJobRequest` like SageMaker would:
it lays out a job folder like ``/opt/ml`` (config JSON files, channels, code, model, output), runs
the real sagemaker-training toolkit's ``train`` in a subprocess with ``SAGEMAKER_BASE_DIR`` and
``SM_STUDIO_LOCAL_MODE=true``, streams its log live, then writes ``model.tar.gz`` (the ``model/``
folder) and ``output.tar.gz`` (the ``output/data/`` folder) under ``<output_path>/<job name>/output/``,
also when the job failed, so nothing it produced is lost.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import unquote, urlparse

from sagemaker_tc.errors import ChannelNotFoundError, EstimatorArgumentError
from sagemaker_tc.sdk.request import TrainingJobRequest

logger = logging.getLogger(__name__)

INSTANCE_TYPE = "local_process"
HOST = "algo-1"
# The failure file's first 1024 characters become a SageMaker job's FailureReason.
MAX_FAILURE_REASON_CHARS = 1024
# Shown when the toolkit died without writing output/failure.
_NO_FAILURE_FILE = "the training process exited with code {code} and wrote no output/failure file"
_TOOLKIT_COMMAND = "from sagemaker_training.cli.train import main; main()"


def local_path(uri: str) -> Path:
    """A ``file://`` URI or a plain path, as an absolute path.

    Raises:
        EstimatorArgumentError: any other URI scheme (``s3://`` needs the cloud path).
    """
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.netloc + parsed.path)).resolve()
    if parsed.scheme in ("", None) or len(parsed.scheme) == 1:  # plain path (or a Windows drive letter)
        return Path(uri).expanduser().resolve()
    raise EstimatorArgumentError(
        f"{uri!r}: local modes ('local_process', 'local', 'local_gpu') read local paths or file:// URIs only"
    )


@dataclass(frozen=True)
class LocalJobResult:
    """How a ``local_process`` job ended.

    Attributes:
        job_name: the job's name.
        status: ``"Completed"`` or ``"Failed"`` (SageMaker's TrainingJobStatus values).
        failure_reason: None, or the first 1024 characters of ``output/failure``.
        exit_code: the toolkit process's exit code.
        job_dir: the ``/opt/ml``-style folder the job ran in.
        model_artifacts: ``file://`` URI of ``model.tar.gz``.
        output_artifacts: ``file://`` URI of ``output.tar.gz``.
        duration_seconds: wall time of the toolkit process, seconds.
    """

    job_name: str
    status: str
    failure_reason: str | None
    exit_code: int
    job_dir: Path
    model_artifacts: str
    output_artifacts: str
    duration_seconds: float


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def prepare_job_dir(request: TrainingJobRequest, job_dir: Path) -> None:
    """Lay out ``job_dir`` like ``/opt/ml`` for ``request``: config files, channels, empty model/output.

    Raises:
        ChannelNotFoundError: a channel's local path does not exist.
    """
    channels = {
        channel.channel_name: channel.data_source.s3_data_source.s3_uri for channel in request.input_data_config
    }
    config_dir = job_dir / "input" / "config"
    for folder in (config_dir, job_dir / "code", job_dir / "model", job_dir / "output" / "data"):
        folder.mkdir(parents=True, exist_ok=True)
    _write_json(config_dir / "hyperparameters.json", request.hyper_parameters)
    instance_type = request.resource_config.instance_type
    _write_json(
        config_dir / "resourceconfig.json",
        {
            "current_host": HOST,
            "current_instance_type": instance_type,
            "current_group_name": "homogeneousCluster",
            "hosts": [HOST],
            "instance_groups": [
                {"instance_group_name": "homogeneousCluster", "instance_type": instance_type, "hosts": [HOST]}
            ],
            "network_interface_name": "lo",
        },
    )
    _write_json(
        config_dir / "inputdataconfig.json",
        {name: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"} for name in channels},
    )
    # Channels are linked, not copied, as Docker local mode bind-mounts them: no copy of large data,
    # and a channel folder that holds the output path is not copied into itself.
    for name, uri in channels.items():
        source = local_path(uri)
        target = job_dir / "input" / "data" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            target.symlink_to(source, target_is_directory=True)
        elif source.is_file():
            target.mkdir()
            (target / source.name).symlink_to(source)
        else:
            raise ChannelNotFoundError(f"channel {name!r}: {uri!r} does not exist")


def _stream(pipe: TextIO, sink: TextIO | None, prefix: str) -> None:
    """Copy the job's output to ``sink`` line by line (drained, not shown, when ``sink`` is None)."""
    for line in pipe:
        if sink is not None:
            sink.write(prefix + line)
            sink.flush()


def _stop(process: subprocess.Popen) -> None:
    """SIGKILL the job's whole process group (the toolkit and the user's script under it)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _tar_folder(folder: Path, archive: Path) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(child, arcname=child.name)


def run_job(request: TrainingJobRequest, *, logs: bool = True, log_sink: TextIO | None = None) -> LocalJobResult:
    """Run ``request`` on this host with the real sagemaker-training toolkit; block until it ends.

    The job folder is ``<output_path>/<job name>/opt_ml/``; artifacts go to
    ``<output_path>/<job name>/output/{model,output}.tar.gz``. The job is stopped (SIGKILL) after
    ``StoppingCondition.MaxRuntimeInSeconds``.

    Args:
        request: the job; its ``output_data_config.s3_output_path`` must be local.
        logs: stream the job's log (stdout and stderr, prefixed ``algo-1 | ``) to ``log_sink``.
        log_sink: where to stream; defaults to ``sys.stdout``.

    Returns:
        The result; a failed job is a result with ``status="Failed"``, not an exception.

    Raises:
        ChannelNotFoundError: a channel's local path does not exist.
        EstimatorArgumentError: the output path is not local.
    """
    output_root = local_path(request.output_data_config.s3_output_path) / request.training_job_name
    job_dir = output_root / "opt_ml"
    if job_dir.exists():
        raise EstimatorArgumentError(f"job folder {job_dir} already exists: job names must be unique")
    prepare_job_dir(request, job_dir)

    env = dict(os.environ)
    env.update(request.environment)
    env.update(
        {
            "SAGEMAKER_BASE_DIR": str(job_dir),
            "SM_STUDIO_LOCAL_MODE": "true",
            "TRAINING_JOB_NAME": request.training_job_name,  # as SageMaker sets it in the container
            "PYTHONUNBUFFERED": "1",
        }
    )
    max_run = request.stopping_condition.max_runtime_in_seconds
    logger.info("Starting local_process training job %s in %s", request.training_job_name, job_dir)
    sink = (log_sink or sys.stdout) if logs else None
    started = time.monotonic()
    with subprocess.Popen(
        [sys.executable, "-c", _TOOLKIT_COMMAND],
        cwd=job_dir,
        env=env,
        start_new_session=True,  # its own process group, so stopping the job stops the user's script too
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        errors="replace",
    ) as process:
        streamer = threading.Thread(target=_stream, args=(process.stdout, sink, f"{HOST} | "), daemon=True)
        streamer.start()
        try:
            exit_code = process.wait(timeout=max_run)
        except subprocess.TimeoutExpired:
            _stop(process)
            exit_code = process.wait()
            failure = job_dir / "output" / "failure"
            if not failure.exists():
                failure.write_text(f"MaxRuntimeExceeded: the job ran longer than {max_run} seconds and was stopped")
        except BaseException:  # e.g. Ctrl-C in the notebook: stop the job, then let the interrupt through
            _stop(process)
            raise
        streamer.join()
    duration = time.monotonic() - started

    artifacts = output_root / "output"
    artifacts.mkdir(parents=True, exist_ok=True)
    model_tar, output_tar = artifacts / "model.tar.gz", artifacts / "output.tar.gz"
    _tar_folder(job_dir / "model", model_tar)
    _tar_folder(job_dir / "output" / "data", output_tar)

    success = (job_dir / "output" / "success").exists()
    failure_file = job_dir / "output" / "failure"
    if exit_code == 0 and success and not failure_file.exists():
        status, reason = "Completed", None
    else:
        status = "Failed"
        if failure_file.exists():
            reason = failure_file.read_text(encoding="utf-8", errors="replace")[:MAX_FAILURE_REASON_CHARS]
        else:
            reason = _NO_FAILURE_FILE.format(code=exit_code)
    logger.info("Training job %s %s in %.1f s", request.training_job_name, status, duration)
    return LocalJobResult(
        job_name=request.training_job_name,
        status=status,
        failure_reason=reason,
        exit_code=exit_code,
        job_dir=job_dir,
        model_artifacts=model_tar.as_uri(),
        output_artifacts=output_tar.as_uri(),
        duration_seconds=duration,
    )
