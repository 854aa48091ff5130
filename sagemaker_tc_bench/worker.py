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
import time
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
    """Train ``spec.model`` for ``spec.steps`` timed steps as ``spec.variant`` and measure it.

    Each step is shaped as a ``transformers.Trainer`` step (:func:`trainer_step`): forward (under bf16
    autocast if asked), ``loss.backward()``, ``clip_grad_norm_`` at 1.0 (the norm not read),
    ``optimizer.step()``, a linear ``LambdaLR`` step, ``zero_grad(set_to_none=True)``, and the loss read
    (``.item()``) only every :data:`LOSS_READ_EVERY` steps. Steps are timed by the jobs' own step timer
    (:class:`~sagemaker_tc.compiler.steps.StepTimer`: CUDA events read back after the last step, no
    host sync per step; the host's clock on CPU) and, on the host, by ``perf_counter`` from a step's
    begin to its end without a sync (``host_ms``). Batches are real SST-2 rows, a new batch each step
    (cycling), all moved to the device before timing. After the timed steps, two short untimed passes
    (:mod:`sagemaker_tc_bench.probes`) measure the GPU busy time and the host syncs per step.

    Returns:
        A JSON-ready dict: ``step_seconds`` (every step, seconds), ``host_seconds`` (each step's host
        time, s), ``compiled_during`` (whether torch compiled during each step), ``first_step_s``,
        ``step_ms`` (median of the steady steps, the runtime's rule:
        :func:`sagemaker_tc.compiler.steps.steady_steps`; None if there is none), ``host_ms`` (the same
        median of the host times), ``gpu_busy_ms`` and ``syncs_per_step`` (None off CUDA, with
        ``needs_cuda`` naming them), ``cuda_graphs_recorded`` (whole run) and
        ``cuda_graphs_recorded_timed``, ``cuda_graph_replays_per_step`` (timed steps),
        ``inductor_cudagraph_counters``, ``samples_per_s``, ``tokens_per_s``, ``peak_memory_bytes`` and
        ``peak_memory_kind``, ``peak_reserved_bytes`` (CUDA), dynamo's ``graphs``, ``frames_compiled``,
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
    run = _train(prepared, batches, spec, autocast)
    load_after = os.getloadavg()[0]
    for index, seconds in enumerate(run.records):
        logger.info("%s %s step %d: %.4f s", spec.model, spec.variant, index, seconds.seconds)
    step_s = steady_median(run.records)
    counts = dynamo_stats()
    loss_values = [float(value) for value in run.losses]
    return {
        "status": "ok",
        "step_seconds": [record.seconds for record in run.records],
        "host_seconds": run.host_seconds,
        "compiled_during": [record.compiled_during for record in run.records],
        "steady_steps": len(steady_steps(run.records)),
        "first_step_s": prepared.details.get("warmup_first_step_s") or run.records[0].seconds,  # the compiling step
        "step_ms": step_s * 1000 if step_s else None,
        "samples_per_s": spec.batch_size / step_s if step_s else None,
        "tokens_per_s": spec.batch_size * spec.seq_len / step_s if step_s else None,
        **run.figures,
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
MAX_GRAD_NORM = 1.0
"""``TrainingArguments.max_grad_norm``'s default: the Trainer clips every step at this norm."""
LOSS_READ_EVERY = 50
"""The bench reads the loss on the host (``.item()``, one sync) every this many steps, as a Trainer
logging every 50 steps does; the steps in between never wait for the device."""


@dataclass
class TrainedRun:
    """What :func:`_train` measured.

    Attributes:
        records: the timed steps' records (read back after the last step).
        host_seconds: each timed step's host time, perf_counter from its begin to its end (no sync).
        losses: each timed step's loss (device tensors, read after timing).
        figures: the per-step figures beside the step time (:func:`_figures`).
    """

    records: list[StepRecord]
    host_seconds: list[float]
    losses: list[Any]
    figures: dict[str, Any]


def trainer_step(model: Any, optimizer: Any, scheduler: Any, batch: dict, autocast: Any, index: int) -> Any:
    """One training step in the order ``transformers.Trainer`` runs it (``training_step``, then
    ``_clip_grad_norm``, ``optimizer.step()``, ``lr_scheduler.step()``, ``model.zero_grad()``), with
    the loss read on the host only at a logging step (``index`` a multiple of :data:`LOSS_READ_EVERY`).
    Returns the loss tensor."""
    import torch

    with autocast:
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)  # the norm is not read: no sync
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    if index % LOSS_READ_EVERY == 0:
        loss.item()
    return loss


def linear_schedule(optimizer: Any, total_steps: int) -> Any:
    """The Trainer's default ``lr_scheduler_type="linear"`` without warm-up: a ``LambdaLR`` from the
    optimizer's learning rate down to 0 at ``total_steps`` (``transformers.get_linear_schedule_with_warmup``'s
    rule, written out so the bench does not depend on where transformers keeps it)."""
    import torch

    def factor(step: int) -> float:
        return max(0.0, (total_steps - step) / max(1, total_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _warm_up(prepared: Any, spec: WorkerSpec, step: Any) -> int:
    """The untimed warm-up every variant runs (:data:`WARMUP_STEPS`; the ``sagemaker-tc`` variant more
    only when its ``plan="auto"`` takes longer to decide: ``decision_steps``); returns the steps run."""
    warm = StepTimer(use_cuda=spec.device == "cuda")  # the warm-up's first step: the variant's compile

    def warm_step(index: int) -> None:
        warm.begin_step()
        step(index)
        warm.end_step(spec.batch_size)

    decided = 0
    if spec.variant.partition("@")[0] == "sagemaker-tc":
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
    return decided


def _train(prepared: Any, batches: list, spec: WorkerSpec, autocast: Any) -> TrainedRun:
    """The warm-up (:func:`_warm_up`), ``spec.steps`` timed Trainer-shaped steps (:func:`trainer_step`),
    then the untimed probe passes (:func:`_figures`)."""
    import torch

    from sagemaker_tc_bench import probes

    model, optimizer = prepared.model, prepared.optimizer
    total = WARMUP_STEPS + MAX_DECISION_STEPS + spec.steps + 2 * probes.PROBE_STEPS
    scheduler = linear_schedule(optimizer, max(spec.job_steps, total))
    prepared.details["schedule"] = f"linear LambdaLR to 0 at step {max(spec.job_steps, total)}, clip {MAX_GRAD_NORM}"

    def step(index: int) -> Any:
        return trainer_step(model, optimizer, scheduler, batches[index % len(batches)], autocast, index)

    graphs = probes.GraphCounter().install()
    try:
        decided = _warm_up(prepared, spec, step)
        before = graphs.counts()
        timer = StepTimer(use_cuda=spec.device == "cuda")
        watch = CompileWatch(timer.on_compile)
        watch.install()
        losses, host_seconds = [], []
        try:
            for index in range(decided, decided + spec.steps):
                timer.begin_step()
                began = time.perf_counter()
                # A copy: under CUDA graphs the loss lives in the graph's memory, which the next step overwrites.
                losses.append(step(index).detach().clone())
                host_seconds.append(time.perf_counter() - began)
                timer.end_step(spec.batch_size)
            records = timer.flush()
        finally:
            watch.uninstall()
        after = graphs.counts()
        figures = _figures(step, decided + spec.steps, spec, torch.device(spec.device), before, after)
    finally:
        graphs.uninstall()
    figures["host_ms"] = _steady_host_ms(records, host_seconds)
    return TrainedRun(records, host_seconds, losses, figures)


def _steady_host_ms(records: list[StepRecord], host_seconds: list[float]) -> float | None:
    """The median host time of the steady steps (the same steps as ``step_ms``), ms."""
    kept = [
        StepRecord(seconds, record.samples, record.compiled_during, record.variant)
        for record, seconds in zip(records, host_seconds, strict=True)
    ]
    median = steady_median(kept)
    return median * 1000 if median else None


def _figures(step: Any, next_index: int, spec: WorkerSpec, device: Any, before: Any, after: Any) -> dict[str, Any]:
    """The figures beside the step time: peak memory (taken first, before the probe passes), the CUDA
    graphs counted over the run and the timed steps (``before``/``after``: :meth:`GraphCounter.counts`
    around them), then the two untimed probe passes (:mod:`sagemaker_tc_bench.probes`)."""
    from sagemaker_tc_bench import measure, probes

    memory_bytes, memory_kind = measure.peak_memory(device)
    figures: dict[str, Any] = {
        "peak_memory_bytes": memory_bytes,
        "peak_memory_kind": memory_kind,
        "peak_reserved_bytes": probes.peak_reserved_bytes(device),
        "cuda_graphs_recorded": after[0] if after else None,
        "cuda_graphs_recorded_timed": after[0] - before[0] if after and before else None,
        "cuda_graph_replays_per_step": (after[1] - before[1]) / spec.steps if after and before else None,
        "inductor_cudagraph_counters": probes.inductor_cudagraph_counters(),
    }
    figures["probe_errors"] = {}
    for offset, (key, probe) in enumerate(
        (("gpu_busy_ms", probes.gpu_busy_ms), ("syncs_per_step", probes.syncs_per_step))
    ):
        try:
            figures[key] = probe(step, next_index + offset * probes.PROBE_STEPS, device)
        except Exception as error:  # a side measurement: it must not cost the row its step time
            logger.warning("%s %s: the %s pass failed: %s", spec.model, spec.variant, key, error)
            figures[key] = None
            figures["probe_errors"][key] = f"{type(error).__name__}: {error}"
    cuda_only = ("gpu_busy_ms", "syncs_per_step", "peak_reserved_bytes")
    figures["needs_cuda"] = [key for key in cuda_only if figures[key] is None and device.type != "cuda"]
    return figures


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
