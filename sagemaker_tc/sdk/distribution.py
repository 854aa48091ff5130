"""``distribution=`` values for compiler jobs, checked, and the hyperparameters they become.

``torch_distributed`` (torchrun, DDP/FSDP2) is the engine for multi-GPU and multi-node compiled
training; SMTC's ``pytorchxla`` is accepted as an alias with a deprecation warning (XLA:CUDA was
removed from torch_xla 2.9). Other SageMaker distribution strategies are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagemaker_tc.contract import HP_PROCESSES_PER_HOST, HP_TORCH_DISTRIBUTED
from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.warn import warn_user

_REFUSED = {
    "smdistributed": "SageMaker's distributed-training libraries (smdistributed) are not compatible with the "
    "compiler (as with SMTC); use {'torch_distributed': {'enabled': True}} (DDP/FSDP2 under torchrun)",
    "pytorchddp": "SDK v2's mpirun-launched PyTorch DDP is replaced by {'torch_distributed': {'enabled': True}} "
    "(the same DDP, launched by torchrun, which the compiler runs)",
    "mpi": "MPI launching is not supported with the compiler; use {'torch_distributed': {'enabled': True}}",
    "parameter_server": "parameter servers are a TensorFlow strategy; use {'torch_distributed': {'enabled': True}}",
    "multi_worker_mirrored_strategy": "a TensorFlow strategy; use {'torch_distributed': {'enabled': True}}",
}
ACCEPTED = ("torch_distributed", "pytorchxla")


def distribution_hyperparameters(distribution: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check ``distribution`` and return the hyperparameters (raw values) that request it.

    Returns:
        ``{}`` for None/``{}`` or a disabled strategy; ``{"sagemaker_torch_distributed_enabled": True}``
        for ``torch_distributed`` or ``pytorchxla``, plus ``sagemaker_tc_processes_per_host`` when
        ``processes_per_host`` is given (torchrun's ``--nproc_per_node``; default: the host's GPUs, or 1).

    Raises:
        EstimatorArgumentError: a refused strategy (with the reason), an unknown key, or a malformed value.

    Warns:
        DeprecationWarning: ``pytorchxla`` (SMTC's multi-GPU switch).
    """
    if not distribution:
        return {}
    if not isinstance(distribution, Mapping):
        raise EstimatorArgumentError("distribution must be a dict such as {'torch_distributed': {'enabled': True}}")
    for key in distribution:
        if key in _REFUSED:
            raise EstimatorArgumentError(f"distribution={{{key!r}: ...}} is not supported: {_REFUSED[key]}")
        if key in ("enabled", "processes_per_host"):
            raise EstimatorArgumentError(
                f"distribution[{key!r}] belongs inside the strategy's dict: "
                f"{{'torch_distributed': {{'enabled': True, 'processes_per_host': 2}}}}"
            )
        if key not in ACCEPTED:
            raise EstimatorArgumentError(f"unknown distribution {key!r}; accepted: {', '.join(ACCEPTED)}")
    if len(distribution) > 1:
        raise EstimatorArgumentError(f"choose one distribution strategy, got {sorted(distribution)}")
    ((key, value),) = distribution.items()
    if (
        not isinstance(value, Mapping)
        or "enabled" not in value
        or not set(value) <= {"enabled", "processes_per_host"}
        or not isinstance(value["enabled"], bool)
    ):
        raise EstimatorArgumentError(
            f"distribution[{key!r}] must be {{'enabled': True or False}} (optionally 'processes_per_host': int), "
            f"got {value!r}"
        )
    processes = value.get("processes_per_host")
    if processes is not None and (not isinstance(processes, int) or isinstance(processes, bool) or processes < 1):
        raise EstimatorArgumentError(f"processes_per_host must be a positive integer, got {processes!r}")
    if key == "pytorchxla":
        warn_user(
            "distribution={'pytorchxla': ...} is SMTC's XLA switch; sagemaker-tc runs it as "
            "{'torch_distributed': {'enabled': True}} (torchrun). Use that name instead.",
            DeprecationWarning,
        )
    if not value["enabled"]:
        return {}
    return {HP_TORCH_DISTRIBUTED: True, **({HP_PROCESSES_PER_HOST: processes} if processes else {})}
