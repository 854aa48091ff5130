"""``/opt/ml`` inside docker-free (``local_process``) jobs: each host in its own mount namespace.

Scripts written for SageMaker read and write fixed paths (``/opt/ml/input/data/<channel>``,
``/opt/ml/model``, ``/opt/ml/checkpoints``, ...). In a ``local_process`` job each host runs in a
private mount namespace (Linux ``unshare --mount``; with ``--user --map-root-user`` where plain
``--mount`` is not permitted, e.g. for a user who is not root) where ``/opt/ml`` *is* that host's
job folder, as inside a SageMaker container: two jobs, or two hosts of one job, never see each
other's files, and nothing is written into this machine's ``/opt/ml`` (which need not exist).

How: in the namespace, a tmpfs is built up as the new ``/opt`` (every entry of this machine's
``/opt`` bound back in, plus ``ml`` bound to the job folder) and bound over ``/opt``; then the
host's command is exec'd, so the toolkit, torchrun and the script all run inside it. The ``SM_*``
variables keep naming the job folder's host paths, which are the same folders.

The rule where no namespace is available (not Linux, no ``unshare``, namespaces denied, or
``SM_TC_LOCAL_NAMESPACE=0``): a job that names ``/opt/ml`` (in a hyperparameter or environment
value, a file of its code, or a checkpoint configuration) is refused before it starts with
:class:`~sagemaker_tc.errors.OptMlUnavailableError`. Spotting the text is not enough (a script can
build the path), so any other job runs only where it cannot reach this machine's ``/opt/ml``: where
that folder does not exist and cannot be made (:func:`host_opt_ml_reachable`), or where the user opted
in with ``SM_TC_ALLOW_HOST_OPT_ML=1`` in the environment of the process that calls ``fit()``; else
it is refused too. Such a job runs with its ``SM_*`` folders and an
:class:`~sagemaker_tc.errors.OptMlNotMappedWarning`. Never a silent fall back to the host's ``/opt/ml``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from sagemaker_tc import contract
from sagemaker_tc.errors import EstimatorArgumentError, OptMlNotMappedWarning, OptMlUnavailableError
from sagemaker_tc.paths import unwritable_reason
from sagemaker_tc.sdk.job_paths import is_synced_locally
from sagemaker_tc.sdk.local.hosts import HostCommand
from sagemaker_tc.sdk.request import TrainingJobRequest
from sagemaker_tc.warn import warn_user

OPT_ML = "/opt/ml"
# This machine's /opt/ml, which a job without a namespace must not be able to reach.
HOST_OPT_ML = Path(OPT_ML)
# "1": run jobs without a namespace even where this machine's /opt/ml exists or can be made (read
# from the environment of the process that calls fit()).
ENV_ALLOW_HOST_OPT_ML = "SM_TC_ALLOW_HOST_OPT_ML"
# Each host's tmpfs for the new /opt is mounted here (inside the namespace only), next to its job folder.
STAGE_NAME = ".sagemaker-tc-opt"
# The unshare options tried in turn: a plain mount namespace (root), then one in a user namespace.
UNSHARE_VARIANTS = (
    ("--mount", "--propagation", "private"),
    ("--user", "--map-root-user", "--mount", "--propagation", "private"),
)
# Code files larger than this are not searched for "/opt/ml" (data, weights).
MAX_SCANNED_BYTES = 1 << 20
# The paths a script may name, and the variables that hold the job's folders instead.
PATH_VARIABLES = {
    "/opt/ml/input/data/<channel>": "SM_CHANNEL_<CHANNEL>",
    "/opt/ml/input/config": "SM_INPUT_CONFIG_DIR",
    "/opt/ml/model": "SM_MODEL_DIR",
    "/opt/ml/output/data": "SM_OUTPUT_DATA_DIR",
    "/opt/ml/output": "SM_OUTPUT_DIR",
    "/opt/ml/code": "the working folder",
    "/opt/ml/checkpoints": "no variable: needs the namespace",
}
# $1: the stage folder, $2: the job folder, then the host's command. Run by /bin/sh in the new namespace.
SETUP_SCRIPT = r"""set -e
stage=$1; job=$2; shift 2
mount -t tmpfs -o mode=755 sagemaker-tc "$stage"
for entry in /opt/* /opt/.[!.]* /opt/..?*; do
  [ -e "$entry" ] || [ -L "$entry" ] || continue
  name=${entry#/opt/}
  [ "$name" = ml ] && continue
  if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "$stage/$name"; continue; fi
  if [ -d "$entry" ]; then mkdir "$stage/$name"; else : > "$stage/$name"; fi
  mount --rbind "$entry" "$stage/$name"
done
mkdir "$stage/ml"
mount --bind "$job" "$stage/ml"
mount --rbind "$stage" /opt
exec "$@"
"""


@dataclass(frozen=True)
class Namespace:
    """How this machine starts a host in its own mount namespace.

    Attributes:
        unshare: the ``unshare`` command and options that worked here.
    """

    unshare: tuple[str, ...]

    def command(self, job_dir: Path, argv: list[str]) -> list[str]:
        """``argv`` run in a new namespace where ``/opt/ml`` is ``job_dir``."""
        stage = stage_dir(job_dir)
        return [
            *self.unshare,
            "--",
            "/bin/sh",
            "-c",
            SETUP_SCRIPT,
            "sagemaker-tc-opt-ml",
            str(stage),
            str(job_dir),
            *argv,
        ]

    def wrap(self, command: HostCommand, job_dir: Path) -> HostCommand:
        """``command`` started in its own namespace (its stage folder is made next to ``job_dir``)."""
        stage_dir(job_dir).mkdir(exist_ok=True)
        return HostCommand(self.command(job_dir, command.argv), command.cwd, command.environment)


def stage_dir(job_dir: Path) -> Path:
    """The empty folder, next to ``job_dir``, where the host's namespace builds its ``/opt``."""
    return job_dir.with_name(STAGE_NAME)


def remove_stages(job_dirs: dict[str, Path]) -> None:
    """Remove each host's stage folder (empty on this machine: its tmpfs lived in the namespace only)."""
    for job_dir in job_dirs.values():
        try:
            stage_dir(job_dir).rmdir()
        except OSError:
            pass


_ON = ("1", "true", "on", "yes")
_OFF = ("0", "false", "off", "no")


def find_namespace() -> Namespace | str:
    """The way to start hosts in a namespace here, or why there is none (tried on a scratch folder).

    Raises:
        EstimatorArgumentError: ``SM_TC_LOCAL_NAMESPACE`` is set to something other than on/off words.
    """
    setting = os.environ.get(contract.ENV_LOCAL_NAMESPACE, "1").strip().lower()
    if setting in _OFF:
        return f"{contract.ENV_LOCAL_NAMESPACE}={os.environ[contract.ENV_LOCAL_NAMESPACE]} turns it off"
    if setting not in _ON:
        raise EstimatorArgumentError(
            f"{contract.ENV_LOCAL_NAMESPACE}={os.environ[contract.ENV_LOCAL_NAMESPACE]!r} is neither on nor off: "
            f"accepted: {', '.join(_ON)} (the default) or {', '.join(_OFF)}"
        )
    if not sys.platform.startswith("linux"):
        return f"mount namespaces are Linux-only, this is {sys.platform}"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the unshare command (util-linux) is not installed"
    errors = []
    with tempfile.TemporaryDirectory(prefix="sagemaker-tc-namespace-") as scratch:
        job_dir = Path(scratch) / "opt_ml"
        job_dir.mkdir()
        stage_dir(job_dir).mkdir()
        for variant in UNSHARE_VARIANTS:
            namespace = Namespace((unshare, *variant))
            argv = namespace.command(job_dir, ["/bin/sh", "-c", f"test -d {OPT_ML}"])
            try:
                probe = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            except (OSError, subprocess.TimeoutExpired) as error:
                errors.append(f"{' '.join(variant)}: {error}")
                continue
            if probe.returncode == 0:
                return namespace
            errors.append(f"{' '.join(variant)}: {probe.stderr.strip() or f'exit code {probe.returncode}'}")
    return "unshare failed (" + "; ".join(errors) + ")"


def opt_ml_uses(request: TrainingJobRequest) -> list[str]:
    """Where the job names ``/opt/ml``: hyperparameters, environment, its checkpoint folder, its code."""
    uses = [f"hyperparameter {name}" for name, value in request.hyper_parameters.items() if OPT_ML in value]
    uses += [f"environment variable {name}" for name, value in request.environment.items() if OPT_ML in value]
    if request.checkpoint_config is not None and is_synced_locally(request.checkpoint_config.s3_uri):
        uses.append("checkpoint_local_path (checkpoints sync with a folder under /opt/ml)")
    uses += [f"code file {name}" for name, data in _code_files(request) if OPT_ML.encode() in data]
    return uses


def _code_files(request: TrainingJobRequest) -> Iterator[tuple[str, bytes]]:
    """``(name, content)`` of the user's code: the estimators' source archive, or ModelTrainer's code channel."""
    submitted = request.hyper_parameters.get(contract.HP_SUBMIT_DIRECTORY)
    archive = Path(_local(contract.decoded_value(submitted))) if submitted else None
    if archive is not None and archive.is_file() and tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                top = Path(member.name).parts[0] if member.name else ""
                if member.isfile() and member.size <= MAX_SCANNED_BYTES and top not in _INJECTED:
                    yield member.name, tar.extractfile(member).read()
    for channel in request.input_data_config:
        if channel.channel_name == contract.CHANNEL_CODE:
            folder = Path(_local(channel.data_source.s3_data_source.s3_uri))
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path.stat().st_size <= MAX_SCANNED_BYTES:
                    yield str(path.relative_to(folder)), path.read_bytes()


_INJECTED = {contract.LAUNCHER_PROGRAM, "sagemaker_tc"}  # what the SDK adds to the archive (source.py)


def _local(uri: object) -> str:
    """A ``file://`` URI's path, or the text itself."""
    text = str(uri)
    parsed = urlparse(text)
    return unquote(parsed.netloc + parsed.path) if parsed.scheme == "file" else text


def host_opt_ml_reachable(folder: Path | None = None) -> str | None:
    """How a job without a namespace could reach this machine's ``/opt/ml`` (``folder``, default
    :data:`HOST_OPT_ML`): it exists, or it can be made; None when neither (nothing to read or write).
    Probed as :func:`sagemaker_tc.paths.unwritable_reason` does, leaving nothing behind."""
    folder = HOST_OPT_ML if folder is None else folder
    if folder.exists() or folder.is_symlink():
        return f"{folder} exists on this machine"
    if unwritable_reason(folder) is None:
        return f"{folder} does not exist but this user can create it"
    return None


def _opted_in() -> bool:
    return os.environ.get(ENV_ALLOW_HOST_OPT_ML, "").strip().lower() in ("1", "true", "yes", "on")


def prepare(request: TrainingJobRequest) -> Namespace | None:
    """How the job's hosts start: in a namespace each, or (where there is none) with a warning.

    Warns:
        OptMlNotMappedWarning: no namespace here, the job does not name ``/opt/ml``, and this
            machine's ``/opt/ml`` is out of its reach (or the user opted in).

    Raises:
        OptMlUnavailableError: no namespace here, and the job names ``/opt/ml``, or this machine's
            ``/opt/ml`` exists or can be made and the user did not set ``SM_TC_ALLOW_HOST_OPT_ML=1``.
    """
    namespace = find_namespace()
    if isinstance(namespace, Namespace):
        return namespace
    uses = opt_ml_uses(request)
    variables = "; ".join(f"{path} -> {variable}" for path, variable in PATH_VARIABLES.items())
    if uses:
        raise OptMlUnavailableError(
            f"this job names /opt/ml ({', '.join(uses)}), but local_process cannot give it a private /opt/ml "
            f"here: {namespace}. Nothing was started: read the job's folders from the SM_* variables instead "
            f"({variables}), or run where Linux mount namespaces are allowed"
        )
    reachable = host_opt_ml_reachable()
    if reachable is not None and not _opted_in():
        raise OptMlUnavailableError(
            f"local_process cannot give this job a private /opt/ml here ({namespace}), and the job could reach this "
            f"machine's /opt/ml ({reachable}), where a script that builds the path would read or write. Nothing was "
            f"started: run where Linux mount namespaces are allowed, or set {ENV_ALLOW_HOST_OPT_ML}=1 in this "
            f"process's environment to run it anyway, reading the job's folders from the SM_* variables ({variables})"
        )
    warn_user(
        f"local_process runs this job without a private /opt/ml ({namespace}): /opt/ml paths are not the job's "
        f"folders there, so read them from the SM_* variables ({variables})"
        + (f"; {ENV_ALLOW_HOST_OPT_ML}=1: the job can reach this machine's /opt/ml ({reachable})" if reachable else ""),
        OptMlNotMappedWarning,
    )
    return None
