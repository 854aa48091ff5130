"""Docker local mode (``instance_type="local"`` / ``"local_gpu"``) through sagemaker-core's local engine.

sagemaker-core's ``LocalSession`` runs the training image with docker compose (``command: train``,
the code folder mounted at ``/opt/ml/code``, a GPU reservation for ``local_gpu``), as SDK v2's local
mode did. Before anything starts, :func:`check_docker` makes a missing Docker engine or compose a
clear error that points to the docker-free ``local_process``.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

from sagemaker_tc.errors import DockerNotAvailableError
from sagemaker_tc.sdk import _internals
from sagemaker_tc.sdk.request import TrainingJobRequest

logger = logging.getLogger(__name__)
_DOCKER_INFO_TIMEOUT_SECONDS = 30
_SUGGESTION = "use instance_type='local_process' to run on this host with no Docker"


def check_docker() -> None:
    """Raise unless ``docker info`` answers and docker compose is installed.

    Raises:
        DockerNotAvailableError: what is missing, and the ``local_process`` alternative.
    """
    if shutil.which("docker") is None:
        raise DockerNotAvailableError(
            f"Docker local mode needs the docker command, which is not installed; {_SUGGESTION}"
        )
    try:
        info = subprocess.run(
            ["docker", "info"], capture_output=True, text=True, timeout=_DOCKER_INFO_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise DockerNotAvailableError(f"`docker info` did not answer within 30 s; {_SUGGESTION}") from None
    if info.returncode != 0:
        detail = (info.stderr or info.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DockerNotAvailableError(f"no Docker engine answers (`docker info`: {detail[0]}); {_SUGGESTION}")
    try:
        _internals.docker_compose_command()
    except ImportError as error:
        raise DockerNotAvailableError(f"{error}; or {_SUGGESTION}") from None


def run_job(request: TrainingJobRequest, container_root: Path | None = None) -> str:
    """Run ``request`` with sagemaker-core's Docker local engine; block until it ends.

    The request's ``sagemaker_submit_directory`` must be a ``file://`` folder (it is mounted as
    ``/opt/ml/code``), channels ``file://`` URIs, and the output path ``file://``.

    Args:
        container_root: the folder the engine makes its job folder in (compose file, each host's
            ``/opt/ml`` folders); default: ``local.container_root`` of the SageMaker local config,
            else the system's temporary folder.

    Returns:
        The ``file://`` URI of ``model.tar.gz``.

    Call :func:`check_docker` first (the estimator does, before it stages any code).

    Raises:
        RuntimeError: the container failed (sagemaker-core's local engine reports it).
    """
    from sagemaker.core.local.local_session import LocalSession

    session = LocalSession()
    if container_root is not None:
        config = dict(session.config or {})
        config["local"] = {**config.get("local", {}), "container_root": str(container_root)}
        session.config = config
    body = request.to_api_dict()
    body.pop("RoleArn", None)
    session.sagemaker_client.create_training_job(**body)
    described = session.sagemaker_client.describe_training_job(request.training_job_name)
    return described["ModelArtifacts"]["S3ModelArtifacts"]


def configured_container_root() -> Path | None:
    """``local.container_root`` of the SageMaker local config (``~/.sagemaker/config.yaml``), if set."""
    from sagemaker.core.config.config import load_local_mode_config

    root = ((load_local_mode_config() or {}).get("local") or {}).get("container_root")
    return Path(root).expanduser().resolve() if root else None
