"""Client side: estimators, request building, local modes. Never imports torch."""

from sagemaker_tc.sdk.estimator import COMPILER_METRIC_DEFINITIONS, HuggingFace, PyTorch

__all__ = ["COMPILER_METRIC_DEFINITIONS", "HuggingFace", "PyTorch"]
