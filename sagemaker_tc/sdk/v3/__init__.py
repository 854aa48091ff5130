"""SDK v3 (sagemaker-train's ``ModelTrainer``) with the training compiler: install ``sagemaker-tc[v3]``.

``from sagemaker_tc import ModelTrainer`` is sagemaker-train's ``ModelTrainer`` with one more field,
``compiler_config`` (:mod:`sagemaker_tc.sdk.v3.trainer`). Never imports torch.
"""

try:
    import sagemaker.train  # noqa: F401  (the [v3] extra)
except ModuleNotFoundError as error:
    if not (error.name or "").startswith("sagemaker"):
        raise
    raise ImportError(
        f"sagemaker_tc.ModelTrainer needs sagemaker-train (SDK v3), which is not installed ({error}): "
        'pip install "sagemaker-tc[v3]"'
    ) from error

from sagemaker_tc.sdk.v3.driver import TrainingCompilerDriver  # noqa: E402
from sagemaker_tc.sdk.v3.trainer import ModelTrainer  # noqa: E402

__all__ = ["ModelTrainer", "TrainingCompilerDriver"]
