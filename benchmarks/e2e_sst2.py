"""The demo job end to end through ``estimator.fit()``, side by side: eager, the peer, and ours.

The job is ``make demo``'s: the unmodified Hugging Face ``Trainer`` script ``examples/sst2/code/train.py``
fine-tunes the pretrained all-MiniLM-L6-v2 on the 6,400-row SST-2 slice for one epoch (200 steps of
32, dynamic padding), evaluates and predicts the 872 validation sentences, and saves the model, as a
``local_process`` job on this machine. Variants, run one after the other:

- ``eager``: no ``compiler_config``: a plain script-mode job;
- ``hf-torch-compile`` (the peer): the same script with ``TrainingArguments(torch_compile=True)``
  (the script's ``--torch_compile true``), no ``compiler_config``;
- ``sagemaker-tc``: ``compiler_config=TrainingCompilerConfig(cache=DIR)``, the default config, DIR
  empty (a first job);
- ``sagemaker-tc-repeat``: the same again, reusing the first job's ``cache=`` (a repeated job).

Every job gets its own empty ``TORCHINDUCTOR_CACHE_DIR``: nothing compiled by one job is reused by
another except through ``cache=``. ``--rounds N`` repeats the whole sequence N times, variants
interleaved, so machine noise shows as the spread of each ratio; the ratio of a round is measured
against that round's eager job. ``--pairs N`` runs only ``eager`` and ``sagemaker-tc`` (the default
config, which keeps eager where compiling cannot pay off), N pairs, the order swapped every other
pair so that a drift of the machine does not favour either; it prints the median ratio and its
spread (lowest, highest). Prints, per job, ``fit()`` seconds, the ratio to eager (eager's
seconds / the variant's: > 1 is faster), and validation accuracy, and writes the JSON result.

Usage: ``.venv/bin/python benchmarks/e2e_sst2.py [--rounds 1 | --pairs 3]
[--out benchmarks/results/e2e-sst2_cpu_YYYYMM.json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from sagemaker_tc_bench.hardware import write_result

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "sst2"
VARIANTS = ("eager", "hf-torch-compile", "sagemaker-tc", "sagemaker-tc-repeat")
HYPERPARAMETERS = {"epochs": 1, "train_batch_size": 32, "learning_rate": 1e-4, "max_length": 64}


def run_job(variant: str, work: Path, cache: Path) -> dict:
    """One demo job for ``variant``; returns its seconds, accuracy and (ours) compiler report."""
    from sagemaker_tc import HuggingFace, TrainingCompilerConfig

    inductor = Path(tempfile.mkdtemp(prefix=f"inductor-{variant}-", dir=work))
    hyperparameters = dict(HYPERPARAMETERS)
    if variant == "hf-torch-compile":
        hyperparameters["torch_compile"] = "true"
    config = TrainingCompilerConfig(cache=str(cache)) if variant.startswith("sagemaker-tc") else None
    estimator = HuggingFace(
        entry_point="train.py",
        source_dir=str(EXAMPLE / "code"),
        instance_type="local_process",
        hyperparameters=hyperparameters,
        environment={"TORCHINDUCTOR_CACHE_DIR": str(inductor)},
        compiler_config=config,
        output_path=str(work / "jobs"),
        base_job_name=f"e2e-{variant}",
    )
    log = work / f"{variant}-{inductor.name}.log"  # each job's own log, for reading the decision afterwards
    with open(log, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        started = time.perf_counter()
        estimator.fit({"train": str(EXAMPLE / "data" / "train"), "validation": str(EXAMPLE / "data" / "validation")})
        seconds = time.perf_counter() - started
    output = Path(estimator.latest_training_job.output_artifacts.removeprefix("file://"))
    with tarfile.open(output) as tar:
        accuracy = json.load(tar.extractfile("eval_results.json"))["eval_accuracy"]
        report = json.load(tar.extractfile("compiler/report.json")) if config is not None else None
    print(f"  {variant}: job log {log}", file=sys.stderr)
    row = {"variant": variant, "fit_seconds": seconds, "accuracy": accuracy}
    if report is not None:
        keys = (
            "compiled",
            "plan",
            "plan_decision",
            "trials",
            "compile_seconds",
            "steady_step_seconds",
            "eager_step_seconds",
            "cache",
            "shapes",
            "steps",
        )
        row["report"] = {key: report.get(key) for key in keys}
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="repeat every variant this many times, interleaved")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--pairs", type=int, help="N interleaved eager / sagemaker-tc pairs (overrides the above)")
    parser.add_argument("--out", type=Path, help="result JSON (default: print only)")
    args = parser.parse_args(argv)
    if args.pairs:
        args.rounds, args.variants = args.pairs, ["eager", "sagemaker-tc"]
    work = Path(tempfile.mkdtemp(prefix="e2e-sst2-"))
    # The first job would otherwise also pay for reading torch and transformers from disk.
    subprocess.run([sys.executable, "-c", "import torch, transformers, accelerate, sagemaker_training"], check=True)
    rounds = []
    for index in range(args.rounds):
        cache = work / f"compile-cache-{index}"  # empty for the round's first job, reused by its repeat
        rows = []
        swap = bool(args.pairs) and index % 2 == 1  # pairs: every other pair runs ours first
        for variant in reversed(args.variants) if swap else args.variants:
            row = run_job(variant, work, cache)
            rows.append(row)
            print(
                f"round {index + 1} {variant:>20}: fit {row['fit_seconds']:7.1f} s, accuracy {row['accuracy']:.4f}",
                flush=True,
            )
        eager = next((r["fit_seconds"] for r in rows if r["variant"] == "eager"), None)
        for row in rows:
            row["ratio_to_eager"] = eager / row["fit_seconds"] if eager else None
        rounds.append(rows)
    summary = {}
    for variant in args.variants:
        ratios = [r["ratio_to_eager"] for rows in rounds for r in rows if r["variant"] == variant]
        seconds = [r["fit_seconds"] for rows in rounds for r in rows if r["variant"] == variant]
        summary[variant] = {
            "fit_seconds": seconds,
            "ratio_to_eager": ratios,
            "median_ratio": statistics.median(ratios) if all(ratios) else None,
            "spread": [min(ratios), max(ratios)] if all(ratios) else None,
        }
        print(
            f"{variant:>20}: fit {statistics.median(seconds):7.1f} s (median of {len(seconds)}), "
            f"ratio to eager {summary[variant]['median_ratio']:.3f} "
            f"(lowest {min(ratios):.3f}, highest {max(ratios):.3f})"
        )
    command = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    write_result(args.out, command, hyperparameters=HYPERPARAMETERS, rounds=rounds, summary=summary)
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
