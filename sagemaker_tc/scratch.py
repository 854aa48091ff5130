"""Where a job process keeps its temporary folders: in the job's own folders, not the machine's ``/tmp``.

Inside a job (``SM_OUTPUT_DIR`` is set: a SageMaker training job, Docker local mode, ``local_process``),
every temporary folder sagemaker-tc makes goes under ``$SM_OUTPUT_DIR/sagemaker-tc-tmp/``: the
watchdog's state (the job process's Python stack file), torchrun's rank states, the private Inductor
cache folder. That is outside ``output/data``, so SageMaker never uploads it. The process that made a
folder removes it when the job ends (:func:`remove_temp_dir`, the parent too once it is empty); a job
whose processes are all killed at once (``max_run`` in ``local_process``, a stopped container) leaves
them in its own folder, never in ``/tmp``. Outside a job (``sagemaker-tc launch`` on a laptop), the
system's temporary folder is used.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sagemaker_tc import contract

logger = logging.getLogger(__name__)


def scratch_root(environ: Mapping[str, str]) -> Path | None:
    """``$SM_OUTPUT_DIR/sagemaker-tc-tmp`` inside a job whose output folder exists, else None."""
    output_dir = environ.get(contract.ENV_OUTPUT_DIR)
    if not output_dir or not Path(output_dir).is_dir():
        return None
    return Path(output_dir) / contract.SCRATCH_DIRNAME


def make_temp_dir(prefix: str, environ: Mapping[str, str]) -> Path:
    """A new private folder (mode 0700) for a job process's temporary files (module docstring).

    Args:
        prefix: the folder name's start, e.g. ``"sagemaker-tc-watch-"``.
        environ: the job's environment (``SM_OUTPUT_DIR``).

    Raises:
        OSError: neither the job's scratch folder nor the system's temporary folder can hold it.
    """
    root = scratch_root(environ)
    if root is not None:
        try:
            root.mkdir(exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=prefix, dir=root))
        except OSError as error:  # a read-only output folder: the system's temporary folder, removed at the end
            logger.warning("Cannot make a temporary folder in %s (%s); using %s", root, error, tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix=prefix))


def remove_temp_dir(path: str | os.PathLike) -> None:
    """Remove a folder :func:`make_temp_dir` made, and the job's scratch folder once it is empty.
    Never raises."""
    path = Path(path)
    shutil.rmtree(path, ignore_errors=True)
    if path.parent.name == contract.SCRATCH_DIRNAME:
        try:
            path.parent.rmdir()
        except OSError:  # another process's folder is still in it, or it is gone already
            pass
