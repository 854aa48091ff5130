"""``sagemaker-tc bench``: every variant of every model, each in its own subprocess, side by side.

The parent checks every option and input before any work (:func:`resolve_options`,
:func:`~sagemaker_tc_bench.data.check_inputs`), tokenizes the SST-2 rows once, then runs one
:mod:`sagemaker_tc_bench.worker` process per (model, variant), one at a time, and gathers their
results with the run's options, machine and versions (:func:`run_bench`), handing the document so
far to its caller after every variant. Each row's figures (step time over windows, noise, speedup)
come from :mod:`sagemaker_tc_bench.rows`. Torch is imported here only to resolve the device (CUDA
present? bf16 capable?).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sagemaker_tc_bench import hardware, rows
from sagemaker_tc_bench.data import tokenize_sst2
from sagemaker_tc_bench.errors import BenchError
from sagemaker_tc_bench.options import BenchOptions, check_batch_size
from sagemaker_tc_bench.processes import budget_timeout, run_cell
from sagemaker_tc_bench.suite import DEFAULT_MODELS, check_seq_len, check_size, get_spec
from sagemaker_tc_bench.variants import (
    BASELINE,
    DEFAULT_JOB_STEPS,
    PEER,
    PEER_REDUCE_OVERHEAD,
    UNCOMPILED_SAME_SETTINGS,
    VARIANTS,
    base_variant,
    check_variant,
    repeat_suffix,
)
from sagemaker_tc_bench.worker import WorkerSpec

logger = logging.getLogger(__name__)

DTYPES: tuple[str, ...] = ("fp32", "bf16")
DEVICES: tuple[str, ...] = ("cpu", "cuda")
DEFAULTS: dict[str, dict[str, int]] = {
    "tiny": {"batch_size": 8, "seq_len": 64},
    "full": {"batch_size": 32, "seq_len": 128},
}
"""Per-size defaults: a CPU-sized step for ``tiny``; SMTC's TF tables' T=128 with batch 32 for ``full``."""
MAX_DISTINCT_BATCHES = 16
SCHEMA = "sagemaker-tc-bench/1"


def _check_job_steps(job_steps: int) -> int:
    if isinstance(job_steps, bool) or not isinstance(job_steps, int) or job_steps < 1:
        raise BenchError(f"job_steps must be a positive int (the job length plan='auto' plans for), got {job_steps!r}")
    return job_steps


def _check_choice(what: str, value: str, accepted: Sequence[str]) -> str:
    if value not in accepted:
        raise BenchError(f"unknown {what} {value!r}; accepted: {', '.join(accepted)}")
    return value


def _cuda_info() -> tuple[bool, str | None, bool]:
    """(CUDA available, device 0's name, bf16 supported); imports torch."""
    import torch

    if not torch.cuda.is_available():
        return False, None, False
    return True, torch.cuda.get_device_name(0), bool(torch.cuda.is_bf16_supported(including_emulation=False))


def resolve_options(
    *,
    models: Sequence[str] | None = None,
    size: str = "tiny",
    variants: Sequence[str] | None = None,
    batch_size: int | None = None,
    seq_len: int | None = None,
    steps: int = 60,
    dtype: str = "fp32",
    device: str | None = None,
    cache_dir: str | Path | None = None,
    cpu_threads: int | None = None,
    timeout_s: float = 1800.0,
    time_budget_s: float | None = None,
    data: str | Path | None = None,
    seed: int = 0,
    job_steps: int = DEFAULT_JOB_STEPS,
) -> BenchOptions:
    """Check every bench option and fill the defaults, before any model is built.

    Args:
        models: suite names (default: :data:`~sagemaker_tc_bench.suite.DEFAULT_MODELS`, in suite order).
        size: ``tiny`` or ``full``.
        variants: default all four, ``eager`` first; a name may end in ``@N`` to run it again as its own
            row (:func:`~sagemaker_tc_bench.variants.base_variant`).
        batch_size, seq_len: default per size (:data:`DEFAULTS`).
        steps: >= 3 (a first step plus steady steps to take the median of); default 60.
        dtype: ``fp32`` or ``bf16``.
        device: ``cpu`` or ``cuda``; None picks ``cuda`` when torch sees a GPU, else ``cpu``.
        cache_dir, cpu_threads, timeout_s, time_budget_s, data, seed: see :class:`BenchOptions`.

    Raises:
        BenchError: an unknown model/variant/size/dtype/device, a number out of range, a sequence
            longer than a model's positions, ``cuda`` without a GPU, ``bf16`` on a GPU without
            bf16 (compute capability < 8.0). The message says what is accepted.
    """
    check_size(size)
    _check_choice("dtype", dtype, DTYPES)
    names = _listed_once("models", DEFAULT_MODELS if models is None else tuple(models), get_spec)
    chosen = _listed_once("variants", VARIANTS if variants is None else tuple(variants), check_variant)
    batch_size = DEFAULTS[size]["batch_size"] if batch_size is None else batch_size
    seq_len = DEFAULTS[size]["seq_len"] if seq_len is None else seq_len
    check_batch_size("batch_size", batch_size)
    for name in names:
        check_seq_len(get_spec(name), seq_len)
    if steps < 3:
        raise BenchError(f"steps must be >= 3: the first step compiles, the median is over the rest (got {steps})")
    if cpu_threads is not None and cpu_threads < 1:
        raise BenchError(f"cpu_threads must be >= 1 (got {cpu_threads})")
    if timeout_s <= 0:
        raise BenchError(f"timeout_s must be > 0 (got {timeout_s})")
    if time_budget_s is not None and time_budget_s <= 0:
        raise BenchError(f"time_budget_s must be > 0 (got {time_budget_s})")
    device, gpu_name = _resolved_device(device, dtype)
    if cache_dir is not None:
        cache_dir = Path(cache_dir).resolve()
        if cache_dir.exists() and not cache_dir.is_dir():
            raise BenchError(f"cache_dir {cache_dir} exists and is not a folder")
    return BenchOptions(
        models=names,
        size=size,
        variants=chosen,
        batch_size=batch_size,
        seq_len=seq_len,
        steps=steps,
        dtype=dtype,
        device=device,
        device_name=gpu_name if device == "cuda" else hardware.environment()["cpu"],
        cache_dir=cache_dir,
        cpu_threads=rows.default_cpu_threads() if cpu_threads is None else cpu_threads,
        timeout_s=timeout_s,
        time_budget_s=time_budget_s,
        data=Path(data) if data is not None else None,
        seed=seed,
        job_steps=_check_job_steps(job_steps),
    )


def _listed_once(kind: str, values: tuple[str, ...], check: Callable[[str], object]) -> tuple[str, ...]:
    """``values`` after ``check`` accepted each (it raises BenchError naming what is accepted).

    Raises:
        BenchError: no value (an empty list is not the default), or a value listed twice.
    """
    if not values:
        raise BenchError(f"{kind}: none given; name at least one, or leave {kind} out for the default")
    for value in values:
        check(value)
    if len(set(values)) != len(values):
        raise BenchError(f"{kind} listed twice: {', '.join(values)}")
    return values


def _resolved_device(device: str | None, dtype: str) -> tuple[str, str | None]:
    """``(device, GPU name)``: ``device`` checked, None picking ``cuda`` when torch sees a GPU.

    Raises:
        BenchError: an unknown device, ``cuda`` without a GPU, ``bf16`` on a GPU without bf16.
    """
    if device is not None:
        _check_choice("device", device, DEVICES)
    has_cuda, gpu_name, gpu_bf16 = _cuda_info() if device in (None, "cuda") else (False, None, False)
    if device == "cuda" and not has_cuda:
        raise BenchError("device 'cuda' asked for, but torch sees no CUDA GPU; accepted here: cpu")
    device = device or ("cuda" if has_cuda else "cpu")
    if device == "cuda" and dtype == "bf16" and not gpu_bf16:
        raise BenchError(
            f"dtype 'bf16' needs a GPU with bf16 (compute capability >= 8.0); {gpu_name} has none: use fp32"
        )
    return device, gpu_name


def run_variant_process(
    options: BenchOptions, model: str, variant: str, workdir: Path, data_path: Path, timeout_s: float
) -> dict:
    """Run one (model, variant) in a fresh Python process, for at most ``timeout_s`` seconds, and
    return its result dict (never raises for a failed variant: the dict then has ``status``
    ``"failed"`` and ``error``)."""
    stem = f"{model}--{variant}"
    spec = WorkerSpec(
        model=model,
        size=options.size,
        variant=variant,
        batch_size=options.batch_size,
        seq_len=options.seq_len,
        steps=options.steps,
        dtype=options.dtype,
        device=options.device,
        data_path=str(data_path),
        seed=options.seed,
        job_steps=options.job_steps,
    )
    if options.cache_dir is not None:
        cache_dir = options.cache_dir / model / variant
        cache_state = "warm" if cache_dir.is_dir() and any(cache_dir.iterdir()) else "cold"
    else:
        cache_dir = workdir / "inductor-cache" / stem
        cache_state = "cold"
    logger.info("bench: %s / %s (%s compile cache %s)", model, variant, cache_state, cache_dir)
    result = run_cell("sagemaker_tc_bench.worker", spec, workdir / stem, options, cache_dir, timeout_s)
    result.update(model=model, variant=variant, cache=cache_state)
    return result


def model_deadline(time_budget_s: float | None, started: float, models_left: int) -> float | None:
    """When the next model's variants must be done (``time.perf_counter()`` seconds): an equal share
    of the time budget left, so a slow model cannot take the later models' time; None without a budget.

    Args:
        time_budget_s: the run's budget, seconds (None: no limit).
        started: ``time.perf_counter()`` when the run's budget started.
        models_left: models still to run, this one included (>= 1).
    """
    if time_budget_s is None:
        return None
    now = time.perf_counter()
    return now + max(0.0, time_budget_s - (now - started)) / models_left


def _run_one(
    options: BenchOptions, model: str, variant: str, workdir: Path, data_path: Path, deadline: float | None
) -> dict:
    """One (model, variant): run it in its process, or record it skipped once its model's share of the
    time budget (ending at ``deadline``) is spent."""
    timeout_s = budget_timeout(options.timeout_s, deadline)
    if timeout_s <= 0:
        error = f"this model's share of the time budget ({options.time_budget_s:.0f} s in all) spent before it"
        logger.warning("bench: %s / %s skipped: %s", model, variant, error)
        return {"status": "skipped", "error": error, "model": model, "variant": variant}
    return run_variant_process(options, model, variant, workdir, data_path, timeout_s)


def run_bench(
    options: BenchOptions, *, command: str | None = None, on_row: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Run every (model, variant) of ``options`` and return the result document.

    Args:
        options: the checked options (:func:`resolve_options`).
        command: the command line, recorded in the document.
        on_row: called with the document so far (``complete`` False) each time a variant finished,
            so a caller can write every finished row at once (``sagemaker-tc bench`` does).

    Returns:
        A JSON-ready dict: ``schema``, ``created`` (UTC, ISO 8601), ``command``, ``complete``,
        ``options``, ``device`` (type, name, peak FLOP/s for the dtype or None), ``environment``
        (:func:`~sagemaker_tc_bench.hardware.environment` plus torch's CUDA version), the rules
        behind the figures (``rules``), and ``results``: one row per (model, variant) with
        ``samples_per_s`` (samples/s), ``step_ms`` (ms, median over windows of steady steps) with
        ``step_ms_q1``/``step_ms_q3``/``step_ms_iqr`` (ms) and ``window_ms``, ``noisy`` and ``noise``
        (why), ``first_step_s`` (s), ``peak_memory_bytes`` (bytes) and ``peak_memory_kind``,
        ``recompiles`` (int), ``mfu`` (fraction or None), ``speedup_vs_eager`` (eager's step_ms /
        the row's; exactly 1.0 for eager) with ``speedup_range`` and ``speedup_noisy``,
        ``ours_vs_peer`` (on ``sagemaker-tc*`` rows: samples/s over ``hf-torch-compile``'s) with
        ``ours_vs_peer_range`` and ``ours_vs_peer_noisy``, plus the worker's other fields
        (:func:`sagemaker_tc_bench.worker.run_variant`).
    """
    num_rows = options.batch_size * min(options.steps, MAX_DISTINCT_BATCHES)
    data = tokenize_sst2(num_rows, options.seq_len, options.data)
    facts = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "environment": hardware.environment(),
        "data": {"source": data.source, "rows": num_rows, "tokenizer": "all-MiniLM-L6-v2 (BERT uncased WordPiece)"},
    }
    cores = rows.usable_cores()
    finished: list[dict] = []
    workdir = Path(tempfile.mkdtemp(prefix="sagemaker-tc-bench-"))
    try:
        data_path = workdir / "data.json"
        data_path.write_text(json.dumps(data.to_dict()), encoding="utf-8")
        started = time.perf_counter()
        for index, model in enumerate(options.models):
            deadline = model_deadline(options.time_budget_s, started, len(options.models) - index)
            results: dict[str, dict] = {}
            for variant in options.variants:
                results[variant] = _run_one(options, model, variant, workdir, data_path, deadline)
                if on_row is not None:
                    on_row(_document(options, facts, finished + _model_rows(results, options, cores), complete=False))
            finished += _model_rows(results, options, cores)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _document(options, facts, finished, complete=True)


def _model_rows(results: dict[str, dict], options: BenchOptions, cores: int) -> list[dict]:
    """The rows of one model's variants that have run, each against eager's result (when it ran), and
    ours (``sagemaker-tc*``) against the peer's (:data:`~sagemaker_tc_bench.variants.PEER`) and the peer
    with ``reduce-overhead``'s, and each compiled variant against the uncompiled row with the same
    settings, when they ran. A repeated row (``name@N``) is compared with the peer's row of the same
    repeat when there is one (the ABBA pair), else with the peer's first row."""
    finished = [
        rows.finish_row(
            result,
            results.get(BASELINE),
            batch_size=options.batch_size,
            seq_len=options.seq_len,
            dtype=options.dtype,
            cores=cores,
        )
        for result in results.values()
    ]
    by_name = {row["variant"]: row for row in finished}
    uncompiled = by_name.get(UNCOMPILED_SAME_SETTINGS)
    for row in finished:
        base, suffix = base_variant(row["variant"]), repeat_suffix(row["variant"])
        if base.startswith("sagemaker-tc"):
            rows.add_peer_ratio(row, by_name.get(PEER + suffix) or by_name.get(PEER))
            rows.add_peer_ratio(row, by_name.get(PEER_REDUCE_OVERHEAD), key="ours_vs_peer_ro")
        if base.startswith("sagemaker-tc") or base in (PEER, PEER_REDUCE_OVERHEAD):
            rows.add_uncompiled_ratio(row, uncompiled)
    return finished


def _document(options: BenchOptions, facts: dict[str, Any], results: list[dict], *, complete: bool) -> dict[str, Any]:
    """The result document (:func:`run_bench`) with the rows in ``results``."""
    environment = json.loads(json.dumps(facts["environment"]))
    first_ok = next((row for row in results if row.get("status") == "ok"), {})
    environment["versions"]["torch_runtime"] = first_ok.get("torch")
    environment["cuda"] = first_ok.get("cuda")
    peak = hardware.gpu_peak(options.device_name) if options.device == "cuda" and options.device_name else None
    option_dict = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}
    return {
        "schema": SCHEMA,
        "created": facts["created"],
        "command": facts["command"],
        "complete": complete,
        "options": option_dict,
        "device": {
            "type": options.device,
            "name": options.device_name,
            "peak_flops": (peak.bf16_flops if options.dtype == "bf16" else peak.fp32_flops) if peak else None,
            "peak_source": peak.source if peak else None,
        },
        "environment": environment,
        "data": facts["data"],
        "rules": rows.RULES,
        "results": results,
    }
