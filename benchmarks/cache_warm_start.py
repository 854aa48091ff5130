"""Warm start from the compile cache: two SST-2 fine-tuning jobs, the second with the first's cache.

Runs the demo's unmodified Hugging Face Trainer script (all-MiniLM-L6-v2, dynamic padding with
shape buckets) twice as ``local_process`` jobs with ``TrainingCompilerConfig(cache=<folder>)``. Each
job compiles in a fresh private Inductor folder, so the second job's warm start comes only from the
cache the first one saved. Prints both jobs' ``compile_seconds`` side by side and their ratio (the
target is <= 0.25), and writes ``benchmarks/results/cache_warm_start.json``.

Usage: ``.venv/bin/python benchmarks/cache_warm_start.py [--steps 30] [--cache DIR]``
(``--cache s3://bucket/prefix`` works the same with AWS credentials).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "sst2"


def run_job(cache: str, steps: int, output: Path) -> tuple[dict, float]:
    from sagemaker_tc import HuggingFace, TrainingCompilerConfig

    estimator = HuggingFace(
        "train.py",
        source_dir=str(EXAMPLE / "code"),
        instance_type="local_process",
        hyperparameters={"max_steps": steps, "train_batch_size": 32, "eval_batch_size": 64},
        compiler_config=TrainingCompilerConfig(cache=cache),
        output_path=str(output),
    )
    started = time.perf_counter()
    estimator.fit({"train": str(EXAMPLE / "data" / "train"), "validation": str(EXAMPLE / "data" / "validation")})
    wall = time.perf_counter() - started
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        return json.loads(tar.extractfile("compiler/report.json").read()), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--cache", default=None, help="cache location (default: a fresh temporary folder)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cache_warm_start.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sagemaker-tc-cache-bench-"))
    cache = args.cache or str(work / "compile-cache")
    cold, cold_wall = run_job(cache, args.steps, work / "cold")
    warm, warm_wall = run_job(cache, args.steps, work / "warm")
    rows = [("cold", cold, cold_wall), ("warm", warm, warm_wall)]
    print(f"\n{'job':<6}{'cache':<8}{'compile s':>11}{'first step s':>14}{'steady step s':>15}{'job wall s':>12}")
    for name, report, wall in rows:
        print(
            f"{name:<6}{report['cache']['state']:<8}{report['compile_seconds']:>11.2f}"
            f"{report['first_step_seconds']:>14.2f}{report['steady_step_seconds']:>15.3f}{wall:>12.1f}"
        )
    ratio = warm["compile_seconds"] / cold["compile_seconds"] if cold["compile_seconds"] else None
    print(f"\nwarm/cold compile_seconds = {ratio:.3f} (target <= 0.25)" if ratio is not None else "no compile measured")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "cache_warm_start",
        "steps": args.steps,
        "ratio_compile_seconds": ratio,
        "jobs": {name: {"report": report, "job_wall_seconds": wall} for name, report, wall in rows},
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "python": sys.version.split()[0],
        },
    }
    # Paths inside the repository are written relative to it (results are committed).
    args.out.write_text(json.dumps(result, indent=2).replace(f"{REPO}/", "") + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0 if ratio is not None and ratio <= 0.25 else 1


if __name__ == "__main__":
    sys.exit(main())
