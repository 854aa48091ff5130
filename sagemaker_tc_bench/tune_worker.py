"""One tested-models cell in its own process: ``python -m sagemaker_tc_bench.tune_worker SPEC.json RESULT.json``.

For one suite model and one mode (``eager`` or ``compiled``) it finds the largest batch that trains
within the budget (:func:`~sagemaker_tc.tuning.finder.find_max_batch`, on real SST-2 rows), then
measures samples/s at that batch with the bench's own step loop
(:func:`sagemaker_tc_bench.worker.run_variant`: ``eager``, or ``sagemaker-tc`` for compiled) on a
freshly built model. A process per cell keeps peak memory, dynamo's state and the allocator's cache
to that cell alone.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODES: tuple[str, ...] = ("eager", "compiled")
BENCH_VARIANT = {"eager": "eager", "compiled": "sagemaker-tc"}


@dataclass(frozen=True)
class TuneSpec:
    """What one cell runs (fields as :class:`sagemaker_tc_bench.worker.WorkerSpec`, plus the search's).

    Attributes:
        mode: ``eager`` or ``compiled``.
        budget_gib: memory budget (GiB), None for the device default.
        max_batch, multiple_of, start: the search's bounds.
        steps: timed steps at the found batch (first included).
    """

    model: str
    size: str
    mode: str
    seq_len: int
    dtype: str
    device: str
    data_path: str
    budget_gib: float | None
    max_batch: int
    multiple_of: int
    start: int
    steps: int
    seed: int = 0


def run_cell(spec: TuneSpec) -> dict[str, Any]:
    """Search, then measure; returns ``{"status": "ok", "max_batch", "search", "throughput"}``
    (``throughput``: the bench worker's result dict at ``max_batch``)."""
    import gc

    import torch

    from sagemaker_tc.config import TrainingCompilerConfig
    from sagemaker_tc.tuning.finder import find_max_batch
    from sagemaker_tc_bench import variants
    from sagemaker_tc_bench.data import TokenizedSST2
    from sagemaker_tc_bench.suite import make_batches
    from sagemaker_tc_bench.worker import WorkerSpec, run_variant

    device = torch.device(spec.device)
    data = TokenizedSST2.from_dict(json.loads(Path(spec.data_path).read_text(encoding="utf-8")))
    torch.manual_seed(spec.seed)
    model = variants.build(BENCH_VARIANT[spec.mode], spec.model, spec.size, device)
    rows = make_batches(model, spec.model, data, len(data.labels), device)[0]

    def make_batch(batch_size: int) -> dict:
        # A copy, so the batch's own memory counts in the try.
        return {key: value[:batch_size].clone() for key, value in rows.items()}

    search = find_max_batch(
        model,
        make_batch,
        compiled=spec.mode == "compiled",
        config=TrainingCompilerConfig(baseline_steps=0),
        budget_gib=spec.budget_gib,
        max_batch=spec.max_batch,
        multiple_of=spec.multiple_of,
        start=spec.start,
        autocast_dtype=torch.bfloat16 if spec.dtype == "bf16" else None,
        seq_len=spec.seq_len,
    )
    model = rows = None  # free them before the samples/s run builds its own
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    throughput = run_variant(
        WorkerSpec(
            model=spec.model,
            size=spec.size,
            variant=BENCH_VARIANT[spec.mode],
            batch_size=search.batch_size,
            seq_len=spec.seq_len,
            steps=spec.steps,
            dtype=spec.dtype,
            device=spec.device,
            data_path=spec.data_path,
            seed=spec.seed,
        )
    )
    return {"status": "ok", "max_batch": search.batch_size, "search": search.to_dict(), "throughput": throughput}


def main(argv: list[str] | None = None) -> int:
    """Entry point: one cell (:func:`sagemaker_tc_bench.worker.serve` with :func:`run_cell`)."""
    from sagemaker_tc_bench.worker import serve

    return serve(argv, TuneSpec, run_cell)


if __name__ == "__main__":
    sys.exit(main())
