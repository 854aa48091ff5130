"""Batch size and learning rate, tuned with the compiler: what runs inside a job.

- :func:`~sagemaker_tc.tuning.finder.find_max_batch`: the largest per-device batch that trains
  within a memory budget, eager or compiled (:mod:`.search` is the bounded search, :mod:`.memory`
  the measurement).
- :mod:`.scaling`: the linear and square-root learning-rate rules and the warm-up adjustment.
- :func:`~sagemaker_tc.tuning.api.tune_batch_size`: both in one call for a plain PyTorch loop;
  Hugging Face Trainer scripts get it from ``TrainingCompilerConfig(batch_size="auto")``
  (:mod:`.trainer`).

The tested-models table (``sagemaker-tc tune``) lives with the benchmarks
(:mod:`sagemaker_tc_bench.tune_table`). The search and scaling modules import no torch; the rest
imports it when called.
"""
