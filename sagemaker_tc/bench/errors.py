"""The errors ``sagemaker-tc bench`` and ``sagemaker-tc verify`` raise on purpose.

They live in :mod:`sagemaker_tc.errors` with every other error class; this module re-exports them
so ``from sagemaker_tc.bench.errors import BenchError`` keeps working. Bad input is a ``ValueError``
subclass raised before any model is built; a verification that finds the compiled model training
differently from eager raises :class:`NumericalMismatchError`.
"""

from __future__ import annotations

from sagemaker_tc.errors import (
    BenchError,
    ModelNotDeterministicError,
    NumericalMismatchError,
    ScriptLoadError,
    VariantFailedError,
)

__all__ = [
    "BenchError",
    "ModelNotDeterministicError",
    "NumericalMismatchError",
    "ScriptLoadError",
    "VariantFailedError",
]
