"""Docker-free local mode (``instance_type="local_process"``): run a training job on this host.

The engine reads a :class:`~sagemaker_tc.sdk.request.TrainingJobRequest` like SageMaker would:
it lays out a job folder like ``/opt/ml`` (config JSON files, channels, code, model, output), runs
the real sagemaker-training toolkit's ``train`` in a subprocess with ``SAGEMAKER_BASE_DIR`` and
``SM_STUDIO_LOCAL_MODE=true``, streams its log live, then writes ``model.tar.gz`` (the ``model/``
folder) and ``output.tar.gz`` (the ``output/data/`` folder) under ``<output_path>/<job name>/output/``,
also when the job failed or was stopped, so nothing it produced is lost. A job is stopped as SageMaker
stops one (:mod:`~sagemaker_tc.sdk.local.stop`); :class:`~sagemaker_tc.sdk.local.job.LocalJob` is its handle.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tarfile
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sagemaker_tc import contract
from sagemaker_tc.errors import ChannelNotFoundError, EstimatorArgumentError, JobArtifactsError, JobSettingWarning
from sagemaker_tc.paths import space_note, tree_bytes
from sagemaker_tc.sdk.job_paths import is_synced_locally, local_path, relation
from sagemaker_tc.sdk.job_status import LocalJobResult
from sagemaker_tc.sdk.local import namespace as job_namespace
from sagemaker_tc.sdk.local.checkpoints import checkpoint_sync
from sagemaker_tc.sdk.local.hosts import HostCommand, LastException, first_failure, free_port, run_hosts
from sagemaker_tc.sdk.local.stop import REQUESTED, StopRequest, stop_grace_s
from sagemaker_tc.sdk.request import TrainingJobRequest
from sagemaker_tc.sdk.source_tree import JOB_FOLDER_MARKER, mark_job_folder

logger = logging.getLogger(__name__)

INSTANCE_TYPE = "local_process"
HOST = "algo-1"
# The failure file's first 1024 characters become a SageMaker job's FailureReason.
MAX_FAILURE_REASON_CHARS = 1024
# The toolkit's failure file for a script it ran with stderr not captured: the exception is only in the log.
_EMPTY_TOOLKIT_MESSAGE = 'ErrorMessage ""'
# Shown when the toolkit died without writing output/failure.
_NO_FAILURE_FILE = "the training process exited with code {code} and wrote no output/failure file"
# The watchdog's grace period in local_process jobs, seconds (SageMaker's is 600): a job process
# still running this long after its script ended, or idle this long after another rank's ended, fails
# the job (TrainingCompilerConfig.hang_grace_s, or SM_TC_HANG_GRACE_S in the job's environment, win).
LOCAL_PROCESS_HANG_GRACE_S = 120
_TOOLKIT_COMMAND = "from sagemaker_training.cli.train import main; main()"


def toolkit_host(job_dir: Path, host: str) -> HostCommand:
    """The estimators' host: the sagemaker-training toolkit's ``train``, based in ``job_dir``."""
    return HostCommand([sys.executable, "-c", _TOOLKIT_COMMAND], job_dir, {contract.ENV_BASE_DIR: str(job_dir)})


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def hosts_for(request: TrainingJobRequest) -> list[str]:
    """``algo-1`` ... ``algo-N`` for the request's instance count, as SageMaker names hosts."""
    return [f"algo-{index}" for index in range(1, request.resource_config.instance_count + 1)]


def prepare_job_dir(request: TrainingJobRequest, job_dir: Path, host: str = HOST) -> None:
    """Lay out ``job_dir`` like ``/opt/ml`` for ``request`` as seen from ``host``: config files,
    channels, empty model/output.

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
    hosts = hosts_for(request)
    _write_json(
        config_dir / "resourceconfig.json",
        {
            "current_host": host,
            "current_instance_type": instance_type,
            "current_group_name": "homogeneousCluster",
            "hosts": hosts,
            "instance_groups": [
                {"instance_group_name": "homogeneousCluster", "instance_type": instance_type, "hosts": hosts}
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


def _tar_folder(folder: Path, archive: Path) -> None:
    """Pack ``folder`` into ``archive`` through a partial file renamed when whole: never a torn
    archive under its final name (the partial file is removed when the write fails). A ``folder``
    the job's script removed, or replaced with something that is not a folder, gives an empty
    archive and a warning that says so (what stands there now is left where it is)."""
    partial = archive.with_name(f".{archive.name}.sagemaker-tc-partial")
    partial.unlink(missing_ok=True)
    is_folder = folder.is_dir()
    children = sorted(folder.iterdir()) if is_folder else []
    if not is_folder:
        found = "a file or link" if folder.exists() or folder.is_symlink() else "nothing"
        logger.warning(
            "%s is empty: the job's script removed its folder %s (%s stands there now); write the files into "
            "that folder instead of replacing it",
            archive.name,
            folder,
            found,
        )
    try:
        with tarfile.open(partial, "w:gz") as tar:
            for child in children:
                tar.add(child, arcname=child.name)
        os.replace(partial, archive)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _failure_reason(job_dir: Path, exit_code: int, exception: str | None = None) -> str | None:
    """The host's failure reason: its ``output/failure``, led by the script's ``exception`` (the last
    one its log showed) when the file does not hold it (the toolkit's ``ErrorMessage ""`` for a script
    it ran directly: a job without the compiler)."""
    failure = job_dir / "output" / "failure"
    if failure.exists():
        text = failure.read_text(encoding="utf-8", errors="replace")
        if exception and _EMPTY_TOOLKIT_MESSAGE in text and exception not in text:
            text = f"{exception}\n{text}"
        return text[:MAX_FAILURE_REASON_CHARS]
    if exit_code != 0 or not (job_dir / "output" / "success").exists():
        return _NO_FAILURE_FILE.format(code=exit_code)
    return None


def run_job(
    request: TrainingJobRequest,
    *,
    logs: bool = True,
    log_sink: TextIO | None = None,
    host_command: Callable[[Path, str], HostCommand] = toolkit_host,
    stop: StopRequest | None = None,
) -> LocalJobResult:
    """Run ``request`` on this machine with the real sagemaker-training toolkit; block until it ends.

    One host: the job folder is ``<output_path>/<job name>/opt_ml/``. ``instance_count`` N > 1 runs
    hosts ``algo-1`` ... ``algo-N`` at once, each a toolkit process group with its own
    ``<output_path>/<job name>/<host>/opt_ml/`` and ``SM_CURRENT_HOST``, talking over 127.0.0.1
    (``SM_TC_MASTER_ADDR``/``SM_TC_MASTER_PORT`` give torchrun's rendezvous). Artifacts go to
    ``<output_path>/<job name>/output/{model,output}.tar.gz`` from ``algo-1`` (where rank 0 runs).

    The job fails as a whole: when a host fails, the others get ``hosts.FAILED_HOST_GRACE_SECONDS`` to
    end on their own, then are stopped and their ``output/failure`` names the failed host. A
    ``stop`` request (from another thread), or ``StoppingCondition.MaxRuntimeInSeconds`` passing,
    stops every host as SageMaker does: SIGTERM, a grace period (120 s; ``SM_TC_STOP_GRACE_S``),
    SIGKILL (:mod:`~sagemaker_tc.sdk.local.stop`); the job ends ``Stopped`` with what it wrote.

    Each host runs in its own mount namespace where ``/opt/ml`` is its job folder, and a
    ``CheckpointConfig`` syncs a local folder with each host's checkpoint folder (see
    :mod:`~sagemaker_tc.sdk.local.namespace` and :mod:`~sagemaker_tc.sdk.local.checkpoints`).

    Args:
        request: the job; its ``output_data_config.s3_output_path`` must be local.
        logs: stream each host's log (stdout and stderr, prefixed ``algo-N | ``) to ``log_sink``.
        log_sink: where to stream; defaults to ``sys.stdout``.
        host_command: how each host starts, from its job folder and name (default: the toolkit).
        stop: the job's stop request (default: one that only ``max_run`` sets).

    Returns:
        The result; a failed or stopped job is a result with ``status="Failed"``/``"Stopped"``, not an exception.

    Raises:
        ChannelNotFoundError: a channel's local path does not exist.
        EstimatorArgumentError: the output or checkpoint path is not local, the checkpoint folder is
            not under ``/opt/ml``, the job folder exists, or ``SM_TC_STOP_GRACE_S`` is not a number >= 0.
        OptMlUnavailableError: the job names ``/opt/ml`` and this machine allows no mount namespace.
        JobArtifactsError: ``model.tar.gz`` or ``output.tar.gz`` could not be written (the job's files
            stay in its folder; no torn archive is left).
        CheckpointSyncError: a checkpoint could not be copied (at the end: raised once the archives
            are written).
    """
    return prepare_job(request, host_command=host_command).run((log_sink or sys.stdout) if logs else None, stop)


@dataclass
class PreparedJob:
    """A ``local_process`` job laid out and ready to start (see :func:`run_job`).

    Attributes:
        request: the job.
        output_root: ``<output_path>/<job name>``.
        job_dirs: each host's ``/opt/ml``-style folder.
        commands: how each host starts.
        environment: the environment every host starts with.
        grace_s: seconds between SIGTERM and SIGKILL when the job is stopped.
        checkpoints: the checkpoint sync (a context manager).
    """

    request: TrainingJobRequest
    output_root: Path
    job_dirs: dict[str, Path]
    commands: dict[str, HostCommand]
    environment: dict[str, str]
    grace_s: float
    checkpoints: AbstractContextManager

    def run(self, sink: TextIO | None, stop: StopRequest | None = None) -> LocalJobResult:
        """Run the hosts, streaming their log to ``sink``; then write the artifacts, however the job ended.

        Raises:
            JobArtifactsError, CheckpointSyncError: see :func:`run_job`.
        """
        request, job_dirs = self.request, self.job_dirs
        stop = stop or StopRequest(self.grace_s)
        logger.info(
            "Starting local_process training job %s on %s in %s",
            request.training_job_name,
            list(job_dirs),
            self.output_root,
        )
        max_run = request.stopping_condition.max_runtime_in_seconds
        started = time.monotonic()
        try:
            exceptions: dict[str, LastException] = {}
            with self.checkpoints:
                exit_codes = run_hosts(
                    self.commands, job_dirs, self.environment, sink, max_run=max_run, stop=stop, exceptions=exceptions
                )
        finally:
            job_namespace.remove_stages(job_dirs)
        duration = time.monotonic() - started
        first = next(iter(job_dirs.values()))  # algo-1
        model_tar, output_tar = _write_artifacts(first, self.output_root / "output")
        failure = getattr(self.checkpoints, "failure", None)
        if failure is not None:  # raised once the archives are safe: the job fails with it
            raise failure
        status, secondary, reason = _outcome(job_dirs, exit_codes, stop, {h: e.line for h, e in exceptions.items()})
        logger.info("Training job %s %s in %.1f s", request.training_job_name, status, duration)
        return LocalJobResult(
            job_name=request.training_job_name,
            status=status,
            failure_reason=reason,
            exit_code=max((abs(code) for code in exit_codes.values()), default=0),
            job_dir=first,
            model_artifacts=model_tar.as_uri(),
            output_artifacts=output_tar.as_uri(),
            duration_seconds=duration,
            host_dirs=dict(job_dirs),
            secondary_status=secondary,
        )


def prepare_job(
    request: TrainingJobRequest, *, host_command: Callable[[Path, str], HostCommand] = toolkit_host
) -> PreparedJob:
    """Check ``request`` and lay out its job folders; nothing starts (raises as :func:`run_job`)."""
    output_root = local_path(request.output_data_config.s3_output_path) / request.training_job_name
    _warn_inside_a_channel(request, output_root)
    job_dirs = _host_dirs(request, output_root)
    environment = _job_environment(request)
    grace_s = stop_grace_s(environment)
    namespace = job_namespace.prepare(request)  # before any folder is made: a refusal leaves nothing
    checkpoints = _checkpoint_sync(request, job_dirs)
    mark_job_folder(output_root)  # a later job with source_dir="." never ships this one
    for host, job_dir in job_dirs.items():
        prepare_job_dir(request, job_dir, host)
    commands = {host: host_command(job_dir, host) for host, job_dir in job_dirs.items()}
    if namespace is not None:  # one mount namespace per host, where /opt/ml is its job folder
        commands = {host: namespace.wrap(command, job_dirs[host]) for host, command in commands.items()}
    return PreparedJob(request, output_root, job_dirs, commands, environment, grace_s, checkpoints)


def _warn_inside_a_channel(request: TrainingJobRequest, output_root: Path) -> None:
    """Warn (:class:`~sagemaker_tc.errors.JobSettingWarning`) when the job folder lies in a channel's
    folder: the job runs (SageMaker accepts an output prefix under an input prefix, and the channel is
    linked, not copied), but its model and archives become part of that data for every later job.
    A job folder that *is* a channel's folder is refused by :func:`_host_dirs` (it exists)."""
    for channel in request.input_data_config or ():
        data = local_path(channel.data_source.s3_data_source.s3_uri)
        if relation(output_root.resolve(), data.resolve()) == "lies inside":
            warnings.warn(
                f"output_path {request.output_data_config.s3_output_path!r}: the job folder {str(output_root)!r} "
                f"lies inside the {channel.channel_name!r} channel's folder {str(data)!r}, so the job's model and "
                "archives become part of that data for later jobs; give output_path a folder outside every channel",
                JobSettingWarning,
                stacklevel=2,
            )


# What a job's own front end may stage in its job folder before prepare_job (ModelTrainer's code and drivers).
_STAGED = frozenset({JOB_FOLDER_MARKER, contract.CHANNEL_CODE, contract.CHANNEL_DRIVERS})


def _host_dirs(request: TrainingJobRequest, output_root: Path) -> dict[str, Path]:
    """Each host's ``/opt_ml`` folder (``<root>/opt_ml`` for one host, ``<root>/<host>/opt_ml`` for several).

    Raises:
        EstimatorArgumentError: ``output_root`` exists and holds more than the job's front end staged
            there (an earlier job of this name, whatever its host count; a folder of the user's), or is
            a file or a link.
    """
    hosts = hosts_for(request)
    if len(hosts) == 1:
        job_dirs = {hosts[0]: output_root / "opt_ml"}
    else:
        job_dirs = {host: output_root / host / "opt_ml" for host in hosts}
    held = sorted(entry.name for entry in output_root.iterdir()) if output_root.is_dir() else []
    if output_root.is_symlink() or (output_root.exists() and not output_root.is_dir()) or set(held) - _STAGED:
        shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
        raise EstimatorArgumentError(
            f"job folder {output_root} already exists{f' and holds {shown}' if held else ''}: job names must be "
            "unique, and a job never writes into a folder it did not make (an earlier job's, or one of yours)"
        )
    return job_dirs


def _checkpoint_sync(request: TrainingJobRequest, job_dirs: dict[str, Path]) -> AbstractContextManager:
    """The job's checkpoint sync (:mod:`~sagemaker_tc.sdk.local.checkpoints`), or nothing to do without one.

    Raises:
        EstimatorArgumentError: the checkpoint location is, holds or lies inside a channel's folder.
    """
    if request.checkpoint_config is None or not is_synced_locally(request.checkpoint_config.s3_uri):
        return nullcontext()
    location = local_path(request.checkpoint_config.s3_uri)
    for channel in request.input_data_config or ():
        data = local_path(channel.data_source.s3_data_source.s3_uri)
        overlap = relation(location.resolve(), data.resolve())
        if overlap is not None:
            raise EstimatorArgumentError(
                f"checkpoint location {request.checkpoint_config.s3_uri!r} {overlap} the {channel.channel_name!r} "
                f"channel's folder {str(data)!r}: the checkpoint sync would copy checkpoints into your data and "
                "your data into the checkpoints; give the checkpoints a folder of their own"
            )
    return checkpoint_sync(request, job_dirs, location)


def _job_environment(request: TrainingJobRequest) -> dict[str, str]:
    """The environment every host's toolkit process starts with (``SAGEMAKER_BASE_DIR`` is added per host)."""
    environment = dict(os.environ)
    environment.setdefault(contract.ENV_HANG_GRACE, str(LOCAL_PROCESS_HANG_GRACE_S))
    environment.update(request.environment)
    environment.update(
        {
            contract.ENV_STUDIO_LOCAL_MODE: "true",
            contract.ENV_TRAINING_JOB_NAME: request.training_job_name,  # as SageMaker sets it in the container
            contract.ENV_PYTHON_UNBUFFERED: "1",
            # Hosts are processes on this machine: torchrun's rendezvous is on loopback.
            contract.ENV_MASTER_ADDR: "127.0.0.1",
            contract.ENV_MASTER_PORT: str(free_port()),
        }
    )
    return environment


def _write_artifacts(job_dir: Path, artifacts: Path) -> tuple[Path, Path]:
    """``model.tar.gz`` (the ``model/`` folder) and ``output.tar.gz`` (``output/data/``) into ``artifacts``.

    Raises:
        JobArtifactsError: an archive could not be written (both are tried); no torn archive is left.
    """
    model_tar, output_tar = artifacts / "model.tar.gz", artifacts / "output.tar.gz"
    failures = []
    for folder, archive in ((job_dir / "model", model_tar), (job_dir / "output" / "data", output_tar)):
        try:
            artifacts.mkdir(parents=True, exist_ok=True)
            _tar_folder(folder, archive)
        except OSError as error:
            failures.append(
                f"{archive.name} ({error.strerror or error}; {space_note(artifacts, tree_bytes(folder))}; its files "
                f"stay in {str(folder)!r})"
            )
    if failures:
        raise JobArtifactsError(
            f"could not write the job's archives into the folder {str(artifacts)!r}: {'; '.join(failures)}. No torn "
            "archive was left; make room there (or give output_path a folder with room) and run the job again"
        )
    return model_tar, output_tar


def _outcome(
    job_dirs: dict[str, Path],
    exit_codes: dict[str, int],
    stop: StopRequest,
    exceptions: dict[str, str | None] | None = None,
) -> tuple[str, str, str | None]:
    """``(TrainingJobStatus, SecondaryStatus, FailureReason)``: ``Stopped`` once the job was sent SIGTERM
    (``Stopped``, or ``MaxRuntimeExceeded`` with its reason), else ``Completed``, or ``Failed`` with the
    reason of the host that failed first."""
    if stop.signalled.is_set():
        return "Stopped", stop.secondary_status or REQUESTED, stop.reason
    hosts = list(job_dirs)
    exceptions = exceptions or {}
    reasons = {host: _failure_reason(job_dirs[host], exit_codes[host], exceptions.get(host)) for host in hosts}
    failed = [host for host in hosts if reasons[host] is not None]
    if not failed:
        return "Completed", "Completed", None
    origin = first_failure(failed, job_dirs, reasons)
    reason = reasons[origin] if len(hosts) == 1 else f"{origin}: {reasons[origin]}"
    return "Failed", "Failed", reason[:MAX_FAILURE_REASON_CHARS]
