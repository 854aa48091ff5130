"""torch's NCCL Flight Recorder, switched on for GPU jobs: a hung collective leaves torch's own dump.

torch's ``ProcessGroupNCCL`` keeps each rank's last collectives in a ring buffer (the Flight
Recorder); with ``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` its NCCL watchdog writes that buffer to one file per
rank (the prefix plus the rank) when a collective times out. Our own watchdog
(:mod:`sagemaker_tc.container.watchdog`) covers what NCCL's does not (gloo/CPU, a hang at exit, a
rank left alone) and writes ``$SM_OUTPUT_DIR/failure``; torch's dump goes under
``$SM_OUTPUT_DATA_DIR/flight_recorder/`` beside it, which SageMaker uploads with ``output.tar.gz``.

Variable names, by torch version (2.7-2.13 are supported):

- ring-buffer size: ``TORCH_NCCL_TRACE_BUFFER_SIZE`` (2.7, 2.8); from 2.9 ``TORCH_FR_BUFFER_SIZE``,
  with the old name still read when the new one is unset;
- dump-file prefix: ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` (2.7, 2.8); from 2.9 ``TORCH_FR_DUMP_TEMP_FILE``,
  the old name still read as its fallback;
- ``TORCH_NCCL_DUMP_ON_TIMEOUT`` (all).

Both names of a pair are set to the same value; a pair of which the user set either name is left
alone entirely, so the user's value is the one torch reads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from sagemaker_tc import contract

logger = logging.getLogger("sagemaker_tc.launcher")

BUFFER_SIZE = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DUMP_ON_TIMEOUT = ("TORCH_NCCL_DUMP_ON_TIMEOUT",)
DUMP_FILE = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
BUFFER_ENTRIES = "2000"  # collectives kept per rank (torch 2.9+'s own default when the recorder is on)
DUMP_DIRNAME = "flight_recorder"
DUMP_PREFIX = "nccl_trace_rank_"


def dump_dir(environ: Mapping[str, str]) -> Path | None:
    """``$SM_OUTPUT_DATA_DIR/flight_recorder``, or None outside a job (no output folder)."""
    base = environ.get(contract.ENV_OUTPUT_DATA_DIR)
    return Path(base) / DUMP_DIRNAME if base else None


def wanted_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The Flight Recorder variables for this process: none for a CPU job (``SM_NUM_GPUS`` unset or
    0); for a GPU job each pair of names the user set neither of, with the dump file under
    :func:`dump_dir` (left to torch's default outside a job)."""
    try:
        gpus = int(environ.get(contract.ENV_NUM_GPUS) or 0)
    except ValueError:
        gpus = 0
    if gpus <= 0:
        return {}
    folder = dump_dir(environ)
    pairs = [(BUFFER_SIZE, BUFFER_ENTRIES), (DUMP_ON_TIMEOUT, "1")]
    if folder is not None:
        pairs.append((DUMP_FILE, str(folder / DUMP_PREFIX)))
    wanted = {}
    for names, value in pairs:
        given = [name for name in names if name in environ]
        if given and any(environ[name] != value for name in given):
            logger.info("Flight Recorder: keeping the user's %s", ", ".join(f"{n}={environ[n]!r}" for n in given))
            continue
        wanted.update(dict.fromkeys(names, value))
    return wanted


def switch_on(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Set :func:`wanted_environment` in ``environ`` (before torchrun or the script starts, so every
    rank inherits it) and make the dump folder.

    Returns:
        The variables set (empty for a CPU job).

    Raises:
        OSError: the dump folder cannot be made.
    """
    wanted = wanted_environment(environ)
    if not wanted:
        return {}
    environ.update(wanted)
    if DUMP_FILE[0] in wanted:
        Path(wanted[DUMP_FILE[0]]).parent.mkdir(parents=True, exist_ok=True)
    logger.info("NCCL Flight Recorder on (a collective that times out leaves torch's dump): %s", wanted)
    return wanted
