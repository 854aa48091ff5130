"""Where a launch-bound step's time goes, per compile plan: host work per step, measured on CPU.

A BERT-base step at batch 32 x 128 on an H200 is bound by the host: eager took 37.6 ms where the
GPU needs about 4 ms of compute (``shared/research/perf.md`` section 5), so what decides the speed
is how much Python, dispatch and launching the host does per step, and whether it waits for the GPU.
This script measures that host work where no GPU is needed: a 12-layer BERT with BERT-base's
structure but hidden size 64, batch 2 x 16 tokens, whose compute is small on the CPU, so most of a
step's time is its host work. Per variant (eager, ``regional``, ``model``, ``step`` through
``sagemaker_tc.compile_model``, whole-model ``torch.compile`` as HF's ``torch_compile=True`` does,
and ``torch.compile(mode="reduce-overhead")`` as ``torch_compile_mode="reduce-overhead"`` does: on a
CPU that mode records no CUDA graph, so the row measures its other settings only), in one process
each, every step shaped as a Trainer step (the bench's ``sagemaker_tc_bench.worker.trainer_step``:
clip at 1.0, a linear LambdaLR, ``zero_grad(set_to_none=True)``, the loss read every 50 steps).
Two rows measure host work the peer could shed without CUDA graphs: Inductor's C++ wrapper
(``cpp_wrapper``, the compiled graph called from C++ instead of generated Python) and dynamo's guards
skipped in the steady steps (``set_stance(skip_guard_eval_unsafe=True)``). One more row, the floor,
runs the peer's compiled forward and backward alone (then ``zero_grad``; no clip, optimizer or
scheduler): no plan that compiles the same graphs as the peer can take less, so
its ``vs_peer`` is the best ratio reachable by removing host work around the graphs on this CPU.
Per variant:

- the steady step time (median of 30 steps after 10 warm-up steps), milliseconds;
- the aten operators the host dispatched per step outside compiled graphs and the compiled-graph
  calls per step (``torch.profiler``), forward, backward and optimizer together;
- the host syncs per step: tensor reads that make the host wait for the device (``.item()``,
  ``bool(tensor)``, ...) by the code that made them (transformers' mask helpers, the Trainer, us).

The machine is shared and noisy, so the variants run in ``--rounds`` (default 3) interleaved rounds,
each variant in a fresh process per round (round r starts at the r-th variant, so no variant is always
first), with one Inductor cache folder for the whole run (the first round compiles cold, the later
ones warm: compiling is not what is measured). Each variant's ``step_ms`` is the median of its rounds'
step times; ``step_ms_rounds`` has every round's, ``vs_peer`` the median over the peer's median.

Writes ``benchmarks/results/host-overhead_cpu_YYYYMM.json`` and prints a table.

Usage: ``.venv/bin/python benchmarks/host_overhead.py [--rounds N] [--out PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from sagemaker_tc_bench.hardware import write_result

PEER = "torch.compile"
PEER_REDUCE_OVERHEAD = "torch.compile reduce-overhead"
FLOOR = "torch.compile forward+backward only"
PEER_CPP_WRAPPER = "torch.compile cpp_wrapper"
PEER_SKIP_GUARDS = "torch.compile skip guards"
VARIANTS = ("eager", "regional", "model", "step", PEER, PEER_REDUCE_OVERHEAD, FLOOR, PEER_CPP_WRAPPER, PEER_SKIP_GUARDS)
LABELS = {
    PEER_REDUCE_OVERHEAD: 'torch.compile(model, mode="reduce-overhead"): no CUDA graphs on a CPU',
    FLOOR: "the peer's graphs alone (forward, backward, zero_grad; no clip, optimizer or scheduler): a floor",
    PEER_CPP_WRAPPER: 'torch.compile(model, options={"cpp_wrapper": True}): Inductor\'s C++ wrapper, not Python',
    PEER_SKIP_GUARDS: "the peer, timed under torch.compiler.set_stance(skip_guard_eval_unsafe=True) after warm-up",
}
ROUNDS = 3
SYNCING = {"item", "cpu", "tolist", "numpy", "__bool__", "__int__", "__float__", "nonzero"}


def build():
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=64,
        num_hidden_layers=12,
        num_attention_heads=4,
        intermediate_size=256,
        vocab_size=1024,
        max_position_embeddings=128,
        num_labels=2,
        attn_implementation="sdpa",
    )
    model = BertForSequenceClassification(config)
    ids = torch.randint(1, 1024, (2, 16), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 1])}
    return model, batch


def run_variant(variant: str) -> dict:
    """Train ``variant`` 40 Trainer-shaped steps in this process and measure it (module docstring)."""
    import torch

    import sagemaker_tc
    from sagemaker_tc import TrainingCompilerConfig
    from sagemaker_tc_bench.worker import linear_schedule, trainer_step

    model, batch = build()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    scheduler = linear_schedule(optimizer, 10_000)
    if variant in (PEER, FLOOR, PEER_SKIP_GUARDS):
        model = torch.compile(model)
    elif variant == PEER_CPP_WRAPPER:
        model = torch.compile(model, options={"cpp_wrapper": True})
    elif variant == PEER_REDUCE_OVERHEAD:
        model = torch.compile(model, mode="reduce-overhead")
    elif variant != "eager":
        sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan=variant, baseline_steps=0, buckets=None))
    no_autocast = torch.autocast("cpu", enabled=False)
    index = 0

    def step():
        nonlocal index
        if variant == FLOOR:
            forward_backward(model, optimizer, batch, no_autocast)
        else:
            trainer_step(model, optimizer, scheduler, batch, no_autocast, index)
        index += 1

    for _ in range(10):
        step()
    with measured_stance(variant):  # the timed steps only: the profiler's and the spy's modes recompile
        times = []
        for _ in range(30):
            started = time.perf_counter()
            step()
            times.append(time.perf_counter() - started)
    ops, graphs = _profile(step)
    syncs = _syncs(step)
    return {
        "variant": variant,
        "step_ms": statistics.median(times) * 1000,
        "aten_ops_per_step": ops,
        "compiled_graph_calls_per_step": graphs,
        "host_syncs_per_step": syncs,
    }


def measured_stance(variant: str):
    """What the timed steps run under: dynamo's guards skipped where they do not tell two compiled
    entries apart (``skip_guard_eval_unsafe``, entered after the warm-up compiled everything) for the
    skip-guards row; nothing for the others. Unsafe in general: a change a skipped guard would have
    caught (``eval()``, a frozen parameter) runs the old graph."""
    import contextlib

    import torch

    if variant != PEER_SKIP_GUARDS:
        return contextlib.nullcontext()
    return torch.compiler.set_stance(skip_guard_eval_unsafe=True)


def forward_backward(model, optimizer, batch: dict, autocast) -> None:
    """The floor's step: the forward and backward of a Trainer step, then ``zero_grad``; the clip, the
    optimizer's update and the scheduler are left out (module docstring)."""
    with autocast:
        loss = model(**batch).loss
    loss.backward()
    optimizer.zero_grad(set_to_none=True)


def _profile(step) -> tuple[int, int]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    names = Counter(event.name for event in prof.events())
    graphs = sum(
        count for name, count in names.items() if name.startswith(("CompiledFunction", "Torch-Compiled Region"))
    )
    top_level = [e for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]
    return len(top_level), graphs


def _syncs(step) -> dict[str, int]:
    import torch

    seen: Counter[str] = Counter()

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in SYNCING:
                frame = sys._getframe(1)
                while frame is not None and "/torch/" in frame.f_code.co_filename:
                    frame = frame.f_back
                where = frame.f_code.co_filename if frame is not None else "?"
                package = next((p for p in ("transformers", "sagemaker_tc", "accelerate") if f"/{p}/" in where), where)
                seen[f"{getattr(func, '__name__', '')} in {package}"] += 1
            return func(*args, **(kwargs or {}))

    with Spy():
        step()
    return dict(seen)


def run_rounds(rounds: int, variants: tuple[str, ...] = VARIANTS) -> list[dict]:
    """Every variant once per round, each in a fresh process, round ``r`` starting at variant ``r``;
    one Inductor cache folder for the whole run (removed at the end). Returns one row per variant:
    the first round's counts, ``step_ms`` the median over the rounds, ``step_ms_rounds`` each round's."""
    cache = tempfile.mkdtemp(prefix="host-overhead-inductor-")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    measured: dict[str, list[dict]] = {variant: [] for variant in variants}
    try:
        for round_index in range(rounds):
            order = variants[round_index % len(variants) :] + variants[: round_index % len(variants)]
            for variant in order:
                out = subprocess.run(
                    [sys.executable, __file__, "--variant", variant],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env,
                ).stdout
                measured[variant].append(json.loads(out.strip().splitlines()[-1]))
                print(
                    f"round {round_index + 1}/{rounds} {variant:>30}: {measured[variant][-1]['step_ms']:7.2f} ms/step",
                    flush=True,
                )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return [_summary(variant, runs) for variant, runs in measured.items()]


def _summary(variant: str, runs: list[dict]) -> dict:
    """One variant's row over its rounds (:func:`run_rounds`)."""
    row = dict(runs[0])
    row["step_ms_rounds"] = [run["step_ms"] for run in runs]
    row["step_ms"] = statistics.median(row["step_ms_rounds"])
    if variant in LABELS:
        row["label"] = LABELS[variant]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"interleaved rounds (default {ROUNDS})")
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # one variant, in a child process
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(run_variant(args.variant)))
        return 0
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1 (got {args.rounds})")
    rows = run_rounds(args.rounds)
    peer_ms = next(row["step_ms"] for row in rows if row["variant"] == PEER)
    for row in rows:
        row["vs_peer"] = row["step_ms"] / peer_ms
        rounds = ", ".join(f"{value:.1f}" for value in row["step_ms_rounds"])
        print(
            f"{row['variant']:>30}: {row['step_ms']:7.2f} ms/step median ({rounds}), {row['vs_peer']:.2f}x the peer's, "
            f"{row['aten_ops_per_step']:4d} aten ops, {row['compiled_graph_calls_per_step']:3d} compiled-graph calls, "
            f"syncs {row['host_syncs_per_step']}",
            flush=True,
        )
    model = "BERT structure, 12 layers, hidden 64, batch 2 x 16, CPU; Trainer-shaped step (clip 1.0, linear LambdaLR)"
    command = f"benchmarks/host_overhead.py --rounds {args.rounds}" + (f" --out {args.out}" if args.out else "")
    write_result(args.out, command, model=model, rounds=args.rounds, rows=rows)
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
