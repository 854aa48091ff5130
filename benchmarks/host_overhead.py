"""Where a launch-bound step's time goes, per compile plan: host work per step, measured on CPU.

A BERT-base step at batch 32 x 128 on an H200 is bound by the host: eager took 37.6 ms where the
GPU needs about 4 ms of compute (``shared/research/perf.md`` section 5), so what decides the speed
is how much Python, dispatch and launching the host does per step, and whether it waits for the GPU.
This script measures that host work where no GPU is needed: a 12-layer BERT with BERT-base's
structure but hidden size 64, batch 2 x 16 tokens, whose compute is negligible on the CPU, so a
step's time is its host work. Per variant (eager, ``regional``, ``model``, ``step`` through
``sagemaker_tc.compile_model``, and whole-model ``torch.compile`` as HF's ``torch_compile=True``
does), in one process each:

- the steady step time (median of 30 steps after 10 warm-up steps), milliseconds;
- the aten operators the host dispatched per step outside compiled graphs and the compiled-graph
  calls per step (``torch.profiler``), forward, backward and optimizer together;
- the host syncs per step: tensor reads that make the host wait for the device (``.item()``,
  ``bool(tensor)``, ...) by the code that made them (transformers' mask helpers, the Trainer, us).

Writes ``benchmarks/results/host-overhead_cpu_YYYYMM.json`` and prints a table.

Usage: ``.venv/bin/python benchmarks/host_overhead.py [--out PATH]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from sagemaker_tc_bench.hardware import write_result

VARIANTS = ("eager", "regional", "model", "step", "torch.compile")
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
    """Train ``variant`` 40 steps in this process and measure it (see the module docstring)."""
    import torch

    import sagemaker_tc
    from sagemaker_tc import TrainingCompilerConfig

    model, batch = build()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    if variant == "torch.compile":
        model = torch.compile(model)
    elif variant != "eager":
        sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan=variant, baseline_steps=0, buckets=None))

    def step():
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(10):
        step()
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # one variant, in a child process
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(run_variant(args.variant)))
        return 0
    rows = []
    for variant in VARIANTS:
        out = subprocess.run(
            [sys.executable, __file__, "--variant", variant], capture_output=True, text=True, check=True
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        row = rows[-1]
        print(
            f"{variant:>14}: {row['step_ms']:7.2f} ms/step, {row['aten_ops_per_step']:4d} aten ops, "
            f"{row['compiled_graph_calls_per_step']:3d} compiled-graph calls, syncs {row['host_syncs_per_step']}",
            flush=True,
        )
    model = "BERT structure, 12 layers, hidden 64, batch 2 x 16, CPU"
    write_result(args.out, "benchmarks/host_overhead.py", model=model, rows=rows)
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
