"""How many processes train together: the one world-size helper for the compiler and the tuner.

Two questions, two functions:

- :func:`world_size`: processes in the job, for what is measured per job (the global batch, the
  workload a compile history is kept for, ``backend="xla"``'s one-process rule). torch.distributed's
  when its process group is up, else torchrun's ``WORLD_SIZE`` (set before the script builds the
  group), else 1.
- :func:`process_group_size`: ranks a collective reaches now (torch.distributed's initialized
  default group, else 1). Code that calls a collective, or must not run where one runs (CUDA
  graphs), asks this one: a ``WORLD_SIZE`` without a process group has no collective to join.

Imports torch only when torch.distributed is asked about, and nothing else of the package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from sagemaker_tc import contract


def process_group_size() -> int:
    """Ranks in torch.distributed's initialized default process group; 1 when it is not
    initialized (or torch.distributed is not available, or torch was never imported)."""
    ranks = _group_size()
    return 1 if ranks is None else ranks


def _group_size() -> int | None:
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else None


def backend() -> str | None:
    """The default process group's backend (``"gloo"``, ``"nccl"``); None when no group is initialized."""
    if _group_size() is None:
        return None
    import torch.distributed as dist

    return str(dist.get_backend())


def world_size(environ: Mapping[str, str] | None = None) -> int:
    """Processes training together in the job: :func:`process_group_size` once the group is
    initialized, else ``WORLD_SIZE`` from ``environ`` (default ``os.environ``; torchrun sets it),
    else 1. A ``WORLD_SIZE`` that is not a positive integer counts as 1."""
    ranks = _group_size()
    if ranks is not None:
        return ranks
    value = (os.environ if environ is None else environ).get(contract.ENV_WORLD_SIZE, "")
    return int(value) if value.strip().isdigit() and int(value) > 0 else 1
