"""Benchmarks and numerical checks for the compiler: ``sagemaker-tc bench``, ``verify`` and ``tune``.

A workstation tool, kept out of the ``sagemaker_tc`` package so that a training job ships and
imports only the runtime (``sagemaker_tc.sdk.source.runtime_entries``). The ``sagemaker-tc``
command imports :mod:`~sagemaker_tc_bench.commands` only when one of these subcommands runs.

- :mod:`~sagemaker_tc_bench.suite`: SMTC's tested Hugging Face models, built from their configs
  (``full`` and ``tiny`` sizes), fed real SST-2 batches.
- :mod:`~sagemaker_tc_bench.verify`: compiled vs eager training, per-step losses within a tolerance.
- :mod:`~sagemaker_tc_bench.runner`: the four variants side by side, one subprocess each;
  :mod:`~sagemaker_tc_bench.report` writes the table, JSON, Markdown and PNG.
- :mod:`~sagemaker_tc_bench.tune_table`: the tested-models table (``sagemaker-tc tune``): max batch
  eager vs compiled, one subprocess per cell (:mod:`~sagemaker_tc_bench.tune_worker`).

Importing this package does not import torch (the SDK side must stay light); the modules that
train import it inside their functions. Install the extra for the table, plot and tokenizer:
``pip install "sagemaker-tc[bench]"``.
"""

from __future__ import annotations

from sagemaker_tc_bench.errors import (
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
