"""`make demo`: fine-tune the pretrained all-MiniLM-L6-v2 on GLUE SST-2 through ``estimator.fit()``,
compiler on, on this machine with no Docker (``instance_type="local_process"``).

Ends with a summary: job status, validation accuracy on the 872 SST-2 validation sentences, the
compiler report's figures (the compile plan ``plan="auto"`` kept and why), where ``model.tar.gz`` is,
and a check that the saved model, loaded with plain transformers in a fresh process (no sagemaker_tc
import), gives the job's own predictions. Exits non-zero when the job fails, accuracy is below 0.80,
the predictions differ, or the report shows neither a compiled job nor a plan decision.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from sagemaker_tc import HuggingFace, TrainingCompilerConfig

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MIN_ACCURACY = 0.80

# Runs in a fresh interpreter: plain transformers only, no sagemaker_tc.
RELOAD_CHECK = r"""
import csv, json, sys
import torch
from safetensors import safe_open
from transformers import AutoModelForSequenceClassification, AutoTokenizer
model_dir, validation = sys.argv[1], sys.argv[2]
with safe_open(f"{model_dir}/model.safetensors", "pt") as weights:
    wrapped = [key for key in weights.keys() if "_orig_mod" in key]
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
with open(validation, newline="", encoding="utf-8") as handle:
    rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
predicted = []
with torch.no_grad():
    for start in range(0, len(rows), 64):
        batch = tokenizer([r["sentence"] for r in rows[start:start + 64]], truncation=True,
                          padding="max_length", max_length=64, return_tensors="pt")
        predicted += model(**batch).logits.argmax(-1).tolist()
loaded = "sagemaker_tc" in sys.modules
print(json.dumps({"predictions": predicted, "wrapped_keys": wrapped, "sagemaker_tc_loaded": loaded}))
"""


def read_member(archive: Path, name: str):
    with tarfile.open(archive) as tar:
        return json.load(tar.extractfile(name))


def main() -> int:
    started = time.perf_counter()
    estimator = HuggingFace(
        entry_point="train.py",
        source_dir=str(HERE / "code"),
        instance_type="local_process",
        instance_count=1,
        hyperparameters={"epochs": 1, "train_batch_size": 32, "learning_rate": 1e-4, "max_length": 64},
        # The compile cache makes a second `make demo` start warm.
        compiler_config=TrainingCompilerConfig(cache=str(REPO / "sagemaker-tc-output" / "compile-cache")),
        output_path=str(REPO / "sagemaker-tc-output"),
        base_job_name="sst2-minilm",
    )
    estimator.fit({"train": str(HERE / "data" / "train"), "validation": str(HERE / "data" / "validation")})
    job = estimator.latest_training_job
    output_tar = Path(job.output_artifacts.removeprefix("file://"))
    model_tar = Path(estimator.model_data.removeprefix("file://"))
    report = read_member(output_tar, "compiler/report.json")
    metrics = read_member(output_tar, "eval_results.json")
    job_predictions = read_member(output_tar, "predictions.json")

    with tempfile.TemporaryDirectory() as model_dir:
        with tarfile.open(model_tar) as tar:
            tar.extractall(model_dir, filter="data")
        reloaded = json.loads(
            subprocess.run(
                [sys.executable, "-c", RELOAD_CHECK, model_dir, str(HERE / "data" / "validation" / "validation.tsv")],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.splitlines()[-1]
        )
    same = reloaded["predictions"] == job_predictions
    accuracy = metrics["eval_accuracy"]

    def fmt(value, unit=""):
        return "n/a" if value is None else f"{value:.3f}{unit}" if isinstance(value, float) else f"{value}{unit}"

    print("\n=== sagemaker-tc demo: SST-2, all-MiniLM-L6-v2, HuggingFace estimator, local_process ===")
    print(f"job                 {job.job_name}: {job.status} in {job.duration_seconds:.1f} s")
    print(f"validation accuracy {accuracy:.4f} on {len(job_predictions)} SST-2 validation sentences")
    decision = (report.get("plan_decision") or {}).get("decision") or {}
    print(f"compile plan        {report['plan']} (compiled {report['compiled']}, backend {report['backend']})")
    print(f"plan decision       {decision.get('reason', 'n/a')}")
    first_step, compile_overhead = report["first_step_seconds"], report["compile_seconds"]
    print(f"compile overhead    {fmt(compile_overhead, ' s')} (first step {fmt(first_step, ' s')})")
    steady, rate = report["steady_step_seconds"], report["samples_per_second"]
    print(f"steady step         {fmt(steady, ' s')}, {fmt(rate, ' samples/s')}")
    eager, break_even = report["eager_step_seconds"], report["break_even_steps"]
    print(f"eager step          {fmt(eager, ' s')} (baseline steps); break-even after {fmt(break_even, ' steps')}")
    print(f"recompiles          {report['recompiles']}, graph breaks {report['graph_breaks']}")
    shapes = report["shapes"] or {}
    print(f"shape buckets       batches per length {shapes.get('batches_per_length')}")
    cache = report["cache"]
    where = cache.get("reason") or cache.get("uri")
    print(f"compile cache       {cache['state']} ({where}); saved: {cache.get('saved')}")
    print(f"model.tar.gz        {estimator.model_data}")
    print(
        f"reloaded model      {'same predictions' if same else 'DIFFERENT predictions'} with plain transformers; "
        f"_orig_mod keys: {len(reloaded['wrapped_keys'])}"
    )
    print(f"demo wall time      {time.perf_counter() - started:.1f} s")
    # Compiled, or plan="auto" measured and decided that eager is this job's fastest: both are the compiler working.
    decided = report["compiled"] or (report["plan"] == "eager" and bool(decision.get("reason")))
    ok = accuracy >= MIN_ACCURACY and same and not reloaded["wrapped_keys"] and decided
    if not ok:
        print(
            f"demo FAILED its checks (accuracy >= {MIN_ACCURACY}, same predictions, compiled or a plan decision)",
            file=sys.stderr,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
