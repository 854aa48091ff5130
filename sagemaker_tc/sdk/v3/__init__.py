"""SDK v3 (sagemaker-train's ``ModelTrainer``) with the training compiler: install ``sagemaker-tc[v3]``.

``from sagemaker_tc import ModelTrainer`` is sagemaker-train's ``ModelTrainer`` with one more field,
``compiler_config`` (:mod:`sagemaker_tc.sdk.v3.trainer`). Never imports torch.
"""

from sagemaker_tc.sdk.v3.driver import TrainingCompilerDriver
from sagemaker_tc.sdk.v3.trainer import ModelTrainer

__all__ = ["ModelTrainer", "TrainingCompilerDriver"]
