"""One bench variant in its own process: ``python -m sagemaker_tc_bench.worker SPEC.json RESULT.json``.

A fresh process per variant keeps dynamo's state (compiled code, recompile counts) and the peak
memory figure to that variant alone, and lets the parent point ``TORCHINDUCTOR_CACHE_DIR`` at a
fresh folder so the first step is a cold compile.

SPEC.json holds :class:`WorkerSpec`'s fields; RESULT.json receives :func:`run_variant`'s dict, or
``{"status": "failed", "error": ..., "traceback": ...}`` when the variant raised.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sagemaker_tc.compiler.dynamo import CompileWatch, dynamo_stats
from sagemaker_tc.compiler.planner import COMPILED_PLANS
from sagemaker_tc.compiler.schedule import EAGER_TRIAL_STEPS, TRIAL_STEPS
from sagemaker_tc.compiler.steps import StepRecord, StepTimer, steady_median, steady_steps

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerSpec:
    """What one variant process runs.

    Attributes:
        model: suite model name.
        size: ``tiny`` or ``full``.
        variant: one of :data:`sagemaker_tc_bench.variants.VARIANTS`.
        batch_size: samples per step.
        seq_len: tokens per sample.
        steps: optimizer steps to time (the first one includes compilation).
        dtype: ``fp32``, or ``bf16`` (autocast mixed precision with fp32 weights, as
            ``Trainer(bf16=True)`` does through accelerate).
        device: ``cpu`` or ``cuda``.
        data_path: JSON file of :class:`~sagemaker_tc_bench.data.TokenizedSST2`.
        seed: torch seed before building the model (same weights in every variant).
        job_steps: the job length the ``sagemaker-tc`` variant's ``plan="auto"`` is told.
    """

    model: str
    size: str
    variant: str
    batch_size: int
    seq_len: int
    steps: int
    dtype: str
    device: str
    data_path: str
    seed: int = 0
    job_steps: int = 10_000


def run_variant(spec: WorkerSpec) -> dict[str, Any]:
    """Train ``spec.model`` for ``spec.steps`` steps as ``spec.variant`` and measure it.

    Each step is ``zero_grad``, forward (under bf16 autocast if asked), ``loss.backward()``,
    ``optimizer.step()``, timed by the jobs' own step timer (:class:`~sagemaker_tc.compiler.steps.
    StepTimer`: CUDA events read back after the last step, no host sync per step; the host's clock
    on CPU). Batches are real SST-2 rows, a new batch each step (cycling), all moved to the device
    before timing.

    Returns:
        A JSON-ready dict: ``step_seconds`` (every step, seconds), ``compiled_during`` (whether torch
        compiled during each step), ``first_step_s``, ``step_ms`` (median of the steady steps, the
        runtime's rule: :func:`sagemaker_tc.compiler.steps.steady_steps`; None if there is none),
        ``samples_per_s`` (``batch_size`` / median steady step), ``tokens_per_s``,
        ``peak_memory_bytes`` and ``peak_memory_kind``, dynamo's ``graphs``, ``frames_compiled``,
        ``recompiles``, ``graph_breaks``, ``dynamo_compile_s``, ``flops_per_sample``, ``losses`` (first
        and last), ``device_name``, ``torch``/``cuda`` versions, ``torch_threads``, the host's
        1-minute load average before and after the steps (``load_avg_1m``: other work competing for
        the CPU shows here), and the variant's ``details``.
    """
    import torch

    from sagemaker_tc_bench import measure, variants
    from sagemaker_tc_bench.data import TokenizedSST2
    from sagemaker_tc_bench.suite import make_batches

    device = torch.device(spec.device)
    data = TokenizedSST2.from_dict(json.loads(Path(spec.data_path).read_text(encoding="utf-8")))
    torch.manual_seed(spec.seed)
    model = variants.build(spec.variant, spec.model, spec.size, device)
    batches = make_batches(model, spec.model, data, spec.batch_size, device)
    # Counted before compiling, in every variant alike: one no-grad eager forward of one sample.
    flops_per_sample = measure.training_flops_per_sample(model, batches[0])
    prepared = variants.finish(spec.variant, model, spec.job_steps)
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=spec.dtype == "bf16")
    measure.reset_peak_memory(device)
    load_before = os.getloadavg()[0]
    records, losses = _train(prepared, batches, spec, autocast)
    load_after = os.getloadavg()[0]
    step_seconds = [record.seconds for record in records]
    compiled_during = [record.compiled_during for record in records]
    for index, seconds in enumerate(step_seconds):
        logger.info("%s %s step %d: %.4f s", spec.model, spec.variant, index, seconds)
    steady = steady_steps(records)
    step_s = steady_median(records)
    memory_bytes, memory_kind = measure.peak_memory(device)
    counts = dynamo_stats()
    loss_values = [float(value) for value in losses]
    return {
        "status": "ok",
        "step_seconds": step_seconds,
        "compiled_during": compiled_during,
        "steady_steps": len(steady),
        "first_step_s": prepared.details.get("warmup_first_step_s") or step_seconds[0],  # the compiling step
        "step_ms": step_s * 1000 if step_s else None,
        "samples_per_s": spec.batch_size / step_s if step_s else None,
        "tokens_per_s": spec.batch_size * spec.seq_len / step_s if step_s else None,
        "peak_memory_bytes": memory_bytes,
        "peak_memory_kind": memory_kind,
        "graphs": counts.graphs,
        "frames_compiled": counts.frames_compiled,
        "recompiles": counts.recompiles,
        "graph_breaks": counts.graph_breaks,
        "dynamo_compile_s": counts.compile_seconds,
        "flops_per_sample": flops_per_sample,
        "loss_first": loss_values[0],
        "loss_last": loss_values[-1],
        "losses_finite": all(value == value and abs(value) != float("inf") for value in loss_values),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "torch_threads": torch.get_num_threads(),
        "load_avg_1m": [load_before, load_after],
        "details": prepared.details,
    }


MAX_DECISION_STEPS = 60
"""The ``sagemaker-tc`` variant's ``plan="auto"`` decides within its eager steps and three trials
(5 + 3 x 6 steps); this many steps at most are run before timing starts."""
WARMUP_STEPS = EAGER_TRIAL_STEPS + len(COMPILED_PLANS) * TRIAL_STEPS
"""Untimed steps every variant runs before its timed steps, the same rule for all: as many as
``plan="auto"`` may take to decide (its eager steps and a trial of each of the three plans), so the
``sagemaker-tc`` variant is not timed after more warm-up than eager and the peer."""


def _train(prepared: Any, batches: list, spec: WorkerSpec, autocast: Any) -> tuple[list[StepRecord], list]:
    """``spec.steps`` timed training steps; returns the step records (read back after the last step)
    and each step's loss (tensors, read after timing). Every variant first runs :data:`WARMUP_STEPS`
    untimed steps (``prepared.details["warmup_steps"]``; the ``sagemaker-tc`` variant more only when
    its ``plan="auto"`` takes longer to decide: ``decision_steps``)."""
    model, optimizer = prepared.model, prepared.optimizer

    def step(index: int) -> Any:
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = model(**batches[index % len(batches)]).loss
        loss.backward()
        optimizer.step()
        return loss

    warm = StepTimer(use_cuda=spec.device == "cuda")  # the warm-up's first step: the variant's compile

    def warm_step(index: int) -> None:
        warm.begin_step()
        step(index)
        warm.end_step(spec.batch_size)

    decided = 0
    if spec.variant != "sagemaker-tc":
        while decided < WARMUP_STEPS:
            warm_step(decided)
            decided += 1
    else:
        from sagemaker_tc.compiler.session import current_session

        runtime = current_session().runtime
        while runtime.decision is None and runtime.fallback_reason is None and decided < MAX_DECISION_STEPS:
            warm_step(decided)
            decided += 1
        prepared.details["decision_steps"] = decided
        prepared.details["plan"] = runtime.final_label()
        prepared.details["plan_decision"] = runtime.decision
        while decided < WARMUP_STEPS:  # the rest of the warm-up every variant gets
            warm_step(decided)
            decided += 1
    prepared.details["warmup_steps"] = decided
    warmup = warm.flush()  # one sync, before the timed steps
    prepared.details["warmup_first_step_s"] = warmup[0].seconds if warmup else None
    timer = StepTimer(use_cuda=spec.device == "cuda")
    watch = CompileWatch(timer.on_compile)
    watch.install()
    losses = []
    try:
        for index in range(decided, decided + spec.steps):
            timer.begin_step()
            # A copy: under CUDA graphs the loss lives in the graph's memory, which the next step overwrites.
            losses.append(step(index).detach().clone())
            timer.end_step(spec.batch_size)
        return timer.flush(), losses
    finally:
        watch.uninstall()


def serve(argv: list[str] | None, spec_class: type, run: Any) -> int:
    """A worker process's body: read ``argv``'s SPEC.json into ``spec_class``, call ``run(spec)``,
    write its dict (plus the spec) to RESULT.json; when it raised, write ``{"status": "failed",
    "error": ..., "traceback": ...}`` instead (the whole traceback, so a failure on a machine that
    keeps nothing else can be diagnosed from the result) and return 1 (the parent reports it in that
    row), else 0."""
    args = sys.argv[1:] if argv is None else argv
    spec_path, result_path = Path(args[0]), Path(args[1])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    spec = spec_class(**json.loads(spec_path.read_text(encoding="utf-8")))
    try:
        result = run(spec)
        code = 0
    except Exception as error:  # any failure: the parent reports it in the row
        traceback.print_exc()
        result = {"status": "failed", "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        code = 1
    result["spec"] = asdict(spec)
    result_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point: one bench variant (:func:`serve` with :func:`run_variant`)."""
    return serve(argv, WorkerSpec, run_variant)


if __name__ == "__main__":
    sys.exit(main())
