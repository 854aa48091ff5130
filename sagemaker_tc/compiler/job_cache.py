"""A job's compile cache: which Inductor folder it uses, who loads it and who saves it.

The launcher loads the cache once per host before any rank starts (:meth:`JobCache.open`), into a
fresh private folder it points ``TORCHINDUCTOR_CACHE_DIR`` at. Under torchrun the load's outcome
reaches the ranks in ``SM_TC_CACHE`` (:meth:`JobCache.export` / :meth:`JobCache.inherited`). The
session of global rank 0 (always on the first host) saves the folder when its script has ended
(:meth:`JobCache.save`), so the job's one ``report.json`` holds both the load and the save; the
process that made the private folder removes it last (:meth:`JobCache.remove_private_dir`).

Every job with the compiler on, cached or not, compiles into a private folder in the job's own
folders (:func:`private_inductor_dir`, :mod:`sagemaker_tc.scratch`), not torch's default
``/tmp/torchinductor_<user>``, unless the user chose ``TORCHINDUCTOR_CACHE_DIR``.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagemaker_tc import contract, scratch
from sagemaker_tc.compiler.cache import CompileCache
from sagemaker_tc.config import TrainingCompilerConfig

logger = logging.getLogger(__name__)


def default_inductor_dir() -> str:
    """torch's default ``TORCHINDUCTOR_CACHE_DIR``: ``<tempdir>/torchinductor_<user>``
    (``torch/_inductor/runtime/cache_dir_utils.py``)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + user)


def uses_default_inductor_dir(environ: Mapping[str, str]) -> bool:
    """True when nobody chose ``TORCHINDUCTOR_CACHE_DIR``: unset, empty, or torch's default (importing
    transformers writes the default into ``os.environ``, so a job can inherit it without anyone choosing it)."""
    return environ.get(contract.ENV_INDUCTOR_CACHE_DIR) in (None, "", default_inductor_dir())


@contextmanager
def private_inductor_dir(environ: MutableMapping[str, str]) -> Iterator[Path | None]:
    """For the block, point ``TORCHINDUCTOR_CACHE_DIR`` at a new folder in the job's own folders
    (:func:`sagemaker_tc.scratch.make_temp_dir`), unless the user (or a parent launcher) chose one:
    what torch compiles, and what importing it creates, stays out of the machine's ``/tmp``. At the
    end the folder is removed and the variable put back.

    Yields:
        The folder; None when the chosen one is kept.

    Raises:
        OSError: no folder can be made.
    """
    if not uses_default_inductor_dir(environ):
        yield None
        return
    before = environ.get(contract.ENV_INDUCTOR_CACHE_DIR)
    folder = scratch.make_temp_dir("sagemaker-tc-inductor-", environ)
    environ[contract.ENV_INDUCTOR_CACHE_DIR] = str(folder)
    try:
        yield folder
    finally:
        scratch.remove_temp_dir(folder)
        if before is None:
            environ.pop(contract.ENV_INDUCTOR_CACHE_DIR, None)
        else:
            environ[contract.ENV_INDUCTOR_CACHE_DIR] = before


def is_first_host(environ: Mapping[str, str]) -> bool:
    """True on the job's first host (``SM_HOSTS[0]``), and outside a multi-host job."""
    hosts = contract.job_hosts(environ)
    if not hosts:
        return True
    return environ.get(contract.ENV_CURRENT_HOST, hosts[0]) == hosts[0]


@dataclass
class JobCache:
    """The compile cache of one job process tree.

    Attributes:
        cache: the cache location and this host's Inductor folder.
        outcome: the report's ``cache`` entry: the load's outcome, and after :meth:`save` the keys
            ``saved``, ``saved_bytes`` (and ``save_reason`` when it did not save).
        private_dir: the folder this process made for Inductor (removed at the end), else None.
    """

    cache: CompileCache
    outcome: dict[str, Any]
    private_dir: Path | None = None

    @classmethod
    def open(cls, config: TrainingCompilerConfig, environ: MutableMapping[str, str]) -> JobCache:
        """Point Inductor at a folder of this job's and restore the cache entry into it.

        The folder is ``TORCHINDUCTOR_CACHE_DIR`` when the user set it to a folder of their own,
        else a fresh private folder, so a warm start comes from the cache, not from what an earlier
        job left in torch's default folder on this host (importing transformers writes that default
        into ``os.environ``, so a ``local_process`` job can inherit it without anyone choosing it).
        Never raises over the cache itself (a bad cache loads cold, see :meth:`CompileCache.load`).
        """
        private = uses_default_inductor_dir(environ)
        if private:
            environ[contract.ENV_INDUCTOR_CACHE_DIR] = str(scratch.make_temp_dir("sagemaker-tc-inductor-", environ))
        folder = Path(environ[contract.ENV_INDUCTOR_CACHE_DIR])
        cache = CompileCache(config.cache or "", folder, users_folder=not private)
        outcome = cache.load().to_dict()
        return cls(cache=cache, outcome=outcome, private_dir=folder if private else None)

    def export(self, environ: MutableMapping[str, str]) -> None:
        """Pass the load's outcome to child processes (torchrun's ranks) in ``SM_TC_CACHE``."""
        environ[contract.ENV_CACHE_OUTCOME] = json.dumps(self.outcome)

    @classmethod
    def inherited(cls, config: TrainingCompilerConfig, environ: Mapping[str, str]) -> JobCache | None:
        """The cache a parent launcher loaded for this rank (None when there is none). The files in
        the folder now count as loaded, so a save stores only what this job compiled new."""
        raw, folder = environ.get(contract.ENV_CACHE_OUTCOME), environ.get(contract.ENV_INDUCTOR_CACHE_DIR)
        if not raw or not folder or not config.cache:
            return None
        try:
            outcome = json.loads(raw)
        except ValueError:
            return None
        cache = CompileCache(config.cache, Path(folder))
        cache.mark_loaded()
        return cls(cache=cache, outcome=outcome if isinstance(outcome, dict) else {"state": "cold"})

    def save(self, environ: Mapping[str, str]) -> None:
        """Save the folder as the cache's entry, from the first host only; record the outcome.
        Never raises."""
        if not is_first_host(environ):
            return
        try:
            saved = self.cache.save()
            self.outcome["saved"] = saved.state
            self.outcome["saved_bytes"] = saved.saved_bytes
            if saved.reason and saved.state != "saved":
                self.outcome["save_reason"] = saved.reason
        except Exception:
            logger.exception("Could not save the compile cache")

    def remove_private_dir(self) -> None:
        """Remove the folder :meth:`open` made (nothing when the user chose the folder)."""
        if self.private_dir is not None:
            scratch.remove_temp_dir(self.private_dir)
