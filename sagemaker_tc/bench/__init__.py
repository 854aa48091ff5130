"""Benchmarks and numerical checks for the compiler: ``sagemaker-tc bench`` and ``sagemaker-tc verify``.

- :mod:`~sagemaker_tc.bench.suite`: SMTC's tested Hugging Face models, built from their configs
  (``full`` and ``tiny`` sizes), fed real SST-2 batches.
- :mod:`~sagemaker_tc.bench.verify`: compiled vs eager training, per-step losses within a tolerance.
- :mod:`~sagemaker_tc.bench.runner`: the four variants side by side, one subprocess each;
  :mod:`~sagemaker_tc.bench.report` writes the table, JSON, Markdown and PNG.
- :mod:`~sagemaker_tc.bench.tune_table`: the tested-models table (``sagemaker-tc tune``): max batch
  eager vs compiled, one subprocess per cell (:mod:`~sagemaker_tc.bench.tune_worker`).

Importing this package does not import torch (the SDK side must stay light); the modules that
train import it inside their functions. Install the extra for the table, plot and tokenizer:
``pip install "sagemaker-tc[bench]"``.
"""

from __future__ import annotations

from sagemaker_tc.bench.errors import (
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
