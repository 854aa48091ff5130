"""The compiler's driver as a sagemaker-train ``DistributedConfig``: what ``sm_train.sh`` runs.

A ``DistributedConfig`` names a folder (``driver_dir``) that ModelTrainer copies into its
``sm_drivers/distributed_drivers/`` channel and a script in it (``driver_script``) that
``sm_train.sh`` runs in place of its own drivers; its fields reach the container as
``SM_DISTRIBUTED_CONFIG``. Ours is ``sagemaker_tc_driver.py`` plus the container side of
``sagemaker_tc`` (:func:`sagemaker_tc.sdk.source.write_driver_folder`), and its fields say whether
to run torchrun and with how many processes per host. The container half is
:mod:`sagemaker_tc.container.modeltrainer`.

:class:`sagemaker_tc.sdk.v3.trainer.ModelTrainer` installs it; users do not build it themselves.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path

from sagemaker.train.distributed import DistributedConfig

from sagemaker_tc import contract
from sagemaker_tc.sdk.source import write_driver_folder


@cache
def driver_folder() -> Path:
    """The driver folder for this process, written once into a temporary folder removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="sagemaker-tc-driver-"))
    atexit.register(shutil.rmtree, root, True)
    return write_driver_folder(root / "drivers")


class TrainingCompilerDriver(DistributedConfig):
    """Runs ``SourceCode.entry_script`` under the training compiler's launcher.

    Attributes:
        torchrun: run the script under torchrun (the user gave ``distributed=Torchrun(...)``).
        process_count_per_node: torchrun processes per host; None: one per GPU (at least 1).
    """

    torchrun: bool = False
    process_count_per_node: int | None = None

    @property
    def driver_dir(self) -> str:
        """The local folder ModelTrainer copies into ``sm_drivers/distributed_drivers/``."""
        return str(driver_folder())

    @property
    def driver_script(self) -> str:
        """The file ``sm_train.sh`` runs: ``sagemaker_tc_driver.py``."""
        return contract.DRIVER_PROGRAM
