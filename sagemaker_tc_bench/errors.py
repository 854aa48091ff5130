"""The errors ``sagemaker-tc bench``, ``verify`` and ``tune`` raise on purpose.

They subclass :class:`sagemaker_tc.errors.SagemakerTCError`, so the ``sagemaker-tc`` command reports
them like every other error. Bad input is a ``ValueError`` subclass raised before any model is built;
a verification that finds the compiled model training differently from eager raises
:class:`NumericalMismatchError`.
"""

from __future__ import annotations

from sagemaker_tc.errors import SagemakerTCError


class BenchError(SagemakerTCError, ValueError):
    """A bench or verify argument is not accepted (unknown model or variant, bad size, dtype or device,
    out-of-range number). The message names the argument and what is accepted."""


class ScriptLoadError(BenchError):
    """``--script PATH:FUNCTION`` cannot be loaded, or the function returns something verify cannot
    train (see :func:`sagemaker_tc_bench.verify_script.load_script` for the accepted shapes)."""


class ModelNotDeterministicError(BenchError):
    """Two eager forward passes of the same batch give different losses (dropout or other randomness
    that verify cannot turn off), so compiled and eager cannot be compared step by step."""


class NumericalMismatchError(SagemakerTCError, RuntimeError):
    """Compiled and eager training of the same model disagree: some step's loss differs by more than
    the relative tolerance.

    Attributes:
        result: the :class:`~sagemaker_tc_bench.verify.VerifyResult` with both loss curves.
    """

    def __init__(self, message: str, result: object) -> None:
        super().__init__(message)
        self.result = result


class VariantFailedError(SagemakerTCError, RuntimeError):
    """A bench variant's subprocess failed (exception, crash or timeout); its row records the reason."""
