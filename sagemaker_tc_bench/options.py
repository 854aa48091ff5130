"""What one bench run was asked to do, checked: :class:`BenchOptions` (the runner builds it, the
variant processes read it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagemaker_tc_bench.variants import DEFAULT_JOB_STEPS

MAX_BATCH_SIZE = 65_536
"""The largest batch ``bench``, ``verify`` and ``tune`` take (``--batch-size``, ``--max-batch-size``):
the inputs of that many samples are tokenized in memory before the first step, and no device the
suite targets trains a batch this large (``tune`` finds the suite's largest batches well below it)."""


def check_batch_size(option: str, value: int) -> int:
    """``value`` when it is a batch the bench takes (1 to :data:`MAX_BATCH_SIZE`).

    Raises:
        BenchError: a batch below 1 or above :data:`MAX_BATCH_SIZE` (named by ``option``).
    """
    from sagemaker_tc_bench.errors import BenchError

    if value < 1:
        raise BenchError(f"{option} must be >= 1 (got {value})")
    if value > MAX_BATCH_SIZE:
        raise BenchError(
            f"{option} must be at most {MAX_BATCH_SIZE} (got {value}): its samples are prepared in memory before "
            "the first step, and no device trains a batch that large"
        )
    return value


@dataclass(frozen=True)
class BenchOptions:
    """A checked bench run (build it with :func:`sagemaker_tc_bench.runner.resolve_options`).

    Attributes:
        models: suite model names, in run order.
        size: ``tiny`` or ``full``.
        variants: variant names, in run order.
        batch_size: samples per step.
        seq_len: tokens per sample.
        steps: timed optimizer steps per variant (the first includes compilation).
        dtype: ``fp32`` or ``bf16`` (autocast).
        device: ``cpu`` or ``cuda``.
        device_name: the CUDA device's name, or the CPU model.
        cache_dir: None: a fresh empty ``TORCHINDUCTOR_CACHE_DIR`` per variant (cold compile).
            A folder: each (model, variant) uses ``cache_dir/<model>/<variant>``, kept between runs,
            so a second run with the same folder measures a warm compile.
        cpu_threads: ``OMP_NUM_THREADS`` in every variant's process (default
            :func:`~sagemaker_tc_bench.rows.default_cpu_threads`: one fewer than the usable cores).
        timeout_s: per-variant wall-clock limit, seconds.
        time_budget_s: None, or a limit on the whole run, seconds, shared fairly between the models:
            each model in turn gets an equal share of the time left (what an earlier model did not
            use goes to the later ones), a variant gets at most what is left of its model's share,
            and once that is spent the model's remaining variants are recorded as ``skipped`` (so a
            prepared GPU run ends in time, reaches every model and still writes its files).
        data: SST-2 TSV file or folder (None: the repository's shipped slice).
        seed: torch seed before building each model.
        job_steps: the job length the ``sagemaker-tc`` variant's ``plan="auto"`` plans for.
    """

    models: tuple[str, ...]
    size: str
    variants: tuple[str, ...]
    batch_size: int
    seq_len: int
    steps: int
    dtype: str
    device: str
    device_name: str | None
    cache_dir: Path | None = None
    cpu_threads: int = 1
    timeout_s: float = 1800.0
    time_budget_s: float | None = None
    data: Path | None = None
    seed: int = 0
    job_steps: int = DEFAULT_JOB_STEPS
