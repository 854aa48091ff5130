"""torchrun from the toolkit's environment, for jobs with ``distribution={"torch_distributed": ...}``.

The SageMaker PyTorch DLCs' own toolkit already runs torchrun for such jobs and then starts the
launcher once per rank (``LOCAL_RANK`` is set): nothing to do here. Where nobody did (the plain
sagemaker-training toolkit, as in ``local_process``), the launcher builds the command itself:
``--nnodes`` from ``SM_HOSTS``, ``--node_rank`` from the position of ``SM_CURRENT_HOST``,
``--nproc_per_node`` from ``processes_per_host`` or the host's GPUs (``SM_NUM_GPUS``, at least 1),
and a static rendezvous on the first host (or ``SM_TC_MASTER_ADDR``/``SM_TC_MASTER_PORT``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from sagemaker_tc import contract
from sagemaker_tc.errors import LauncherError

DEFAULT_MASTER_PORT = "29500"  # torchrun's default


def framework_params(environ: Mapping[str, str]) -> dict[str, Any]:
    """``SM_FRAMEWORK_PARAMS`` as a dict (empty when unset or not a JSON object)."""
    try:
        params = json.loads(environ.get(contract.ENV_FRAMEWORK_PARAMS) or "{}")
    except json.JSONDecodeError:
        return {}
    return params if isinstance(params, dict) else {}


def torchrun_command(entry_point: str, args: Sequence[str], environ: Mapping[str, str]) -> list[str] | None:
    """The torchrun command that runs ``entry_point`` on every rank of this host, or None when the
    job is not distributed or this process already is a rank.

    Raises:
        LauncherError: ``SM_HOSTS`` / ``SM_CURRENT_HOST`` are missing or disagree.
    """
    params = framework_params(environ)
    if params.get(contract.HP_TORCH_DISTRIBUTED) is not True or contract.ENV_LOCAL_RANK in environ:
        return None
    hosts = contract.job_hosts(environ)
    current = environ.get(contract.ENV_CURRENT_HOST)
    if not hosts or current not in hosts:
        raise LauncherError(
            f"distributed job without a usable {contract.ENV_HOSTS} / {contract.ENV_CURRENT_HOST} "
            f"({contract.ENV_HOSTS}={environ.get(contract.ENV_HOSTS)!r}, {contract.ENV_CURRENT_HOST}={current!r})"
        )
    node_rank = hosts.index(current)
    processes = processes_per_host(environ)
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={len(hosts)}",
        f"--node_rank={node_rank}",
        f"--nproc_per_node={processes}",
        f"--master_addr={environ.get(contract.ENV_MASTER_ADDR) or hosts[0]}",
        f"--master_port={environ.get(contract.ENV_MASTER_PORT) or DEFAULT_MASTER_PORT}",
        "-m",
        "sagemaker_tc.container.rank",
        entry_point,
        *args,
    ]


def processes_per_host(environ: Mapping[str, str]) -> int:
    """torchrun's ``--nproc_per_node``: ``processes_per_host`` from the distribution, else the host's GPUs
    (``SM_NUM_GPUS``), at least 1."""
    params = framework_params(environ)
    return int(params.get(contract.HP_PROCESSES_PER_HOST) or int(environ.get(contract.ENV_NUM_GPUS) or 0) or 1)


def rank_label(environ: Mapping[str, str]) -> str | None:
    """``"algo-2 rank 1"`` inside a torchrun rank (``RANK`` set), else None."""
    if contract.ENV_RANK not in environ:
        return None
    return f"{environ.get(contract.ENV_CURRENT_HOST, 'host')} rank {environ[contract.ENV_RANK]}"
