"""Compiled training end to end: real toolkit, real transformers models (tiny), real SST-2 rows."""

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, read_tsv, write_sst2_slice

from sagemaker_tc import HuggingFace, PyTorch, TrainingCompilerConfig
from sagemaker_tc.sdk import COMPILER_METRIC_DEFINITIONS

pytestmark = pytest.mark.slow

# A fresh interpreter with plain transformers only: does the saved model give the job's predictions?
RELOAD = r"""
import csv, json, sys
import torch
from safetensors import safe_open
from transformers import AutoModelForSequenceClassification, AutoTokenizer
model_dir, validation, max_length = sys.argv[1], sys.argv[2], int(sys.argv[3])
with safe_open(f"{model_dir}/model.safetensors", "pt") as weights:
    keys = list(weights.keys())
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
rows = list(csv.DictReader(open(validation, newline="", encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE))
batch = tokenizer([r["sentence"] for r in rows], truncation=True, padding="max_length", max_length=max_length,
                  return_tensors="pt")
with torch.no_grad():
    predictions = model(**batch).logits.argmax(-1).tolist()
print(json.dumps({"keys": keys, "predictions": predictions, "sagemaker_tc": "sagemaker_tc" in sys.modules}))
"""


def read(archive_uri, name):
    with tarfile.open(archive_uri.removeprefix("file://")) as tar:
        return tar.extractfile(name).read().decode()


@pytest.fixture(scope="module")
def sst2_channels(tmp_path_factory):
    root = tmp_path_factory.mktemp("sst2")
    write_sst2_slice(root / "train", "train", 96)
    write_sst2_slice(root / "validation", "validation", 48)
    return {"train": str(root / "train"), "validation": str(root / "validation")}


def run_hf_trainer(tmp_path, channels, model_dir, config):
    estimator = HuggingFace(
        "train.py",
        source_dir=str(REPO / "examples" / "sst2" / "code"),
        instance_type="local_process",
        hyperparameters={
            "model_name_or_path": str(model_dir),
            "max_steps": 6,
            "train_batch_size": 16,
            "eval_batch_size": 48,
            "max_length": 32,
        },
        compiler_config=config,
        output_path=str(tmp_path / "out"),
    )
    estimator.fit(channels)
    return estimator


def test_hf_trainer_script_is_compiled_with_no_change(tmp_path, sst2_channels, tiny_bert_dir, capsys):
    estimator = run_hf_trainer(tmp_path, sst2_channels, tiny_bert_dir, TrainingCompilerConfig(plan="regional"))
    log = capsys.readouterr().out
    job = estimator.latest_training_job
    report = json.loads(read(job.output_artifacts, "compiler/report.json"))
    assert report["compiled"] is True and report["fallback_reason"] is None
    assert report["integration"] == "transformers" and report["regional"] is True
    assert report["graphs"] > 0 and report["steps"] == 6
    assert report["steady_step_seconds"] > 0 and report["samples_per_second"] > 0
    # 3 eager baseline steps, then compiled: the eager step is measured and the variant is compiled.
    assert report["variant"] == "compiled" and report["policy"] == "fallback"
    assert report["compile_seconds"] > 0 and report["eager_step_seconds"] > 0
    assert [t["variant"] for t in report["trials"]] == ["eager", "compiled"]
    # The report's eager step is what the eager trial measured (break_even_steps' rule: test_report.py).
    assert report["eager_step_seconds"] == report["trials"][0]["steady_step_seconds"]
    assert report["cache"] == {"state": "disabled", "hit": False}
    assert report["graph_breaks"] == 0 and report["recompile_limit_hit"] is False  # BERT compiles without breaks
    # Metric lines that the SDK's metric definitions read.
    import re

    for definition in COMPILER_METRIC_DEFINITIONS:
        assert re.search(definition["Regex"], log), definition
    # Evaluation ran under compile: its accuracy is that of the job's own predictions.
    predictions = json.loads(read(job.output_artifacts, "predictions.json"))
    labels = [int(row["label"]) for row in read_tsv(Path(sst2_channels["validation"]) / "validation.tsv")]
    accuracy = sum(p == y for p, y in zip(predictions, labels, strict=True)) / len(labels)
    assert json.loads(read(job.output_artifacts, "eval_results.json"))["eval_accuracy"] == pytest.approx(accuracy)

    model_dir = tmp_path / "model"
    with tarfile.open(estimator.model_data.removeprefix("file://")) as tar:
        tar.extractall(model_dir, filter="data")
    validation = sst2_channels["validation"] + "/validation.tsv"
    reloaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", RELOAD, str(model_dir), validation, "32"], check=True, capture_output=True, text=True
        ).stdout.splitlines()[-1]
    )
    assert not any("_orig_mod" in key for key in reloaded["keys"])
    assert reloaded["sagemaker_tc"] is False
    assert reloaded["predictions"] == json.loads(read(job.output_artifacts, "predictions.json"))


def test_eager_backend_is_a_measured_uncompiled_baseline(tmp_path, sst2_channels, tiny_bert_dir):
    estimator = run_hf_trainer(tmp_path, sst2_channels, tiny_bert_dir, TrainingCompilerConfig(backend="eager"))
    report = json.loads(read(estimator.latest_training_job.output_artifacts, "compiler/report.json"))
    assert report["compiled"] is False and report["graphs"] == 0 and report["backend"] == "eager"
    assert report["fallback_reason"] is None and report["steps"] == 6 and report["samples_per_second"] > 0


def test_plain_pytorch_loop_compiles_with_one_call(tmp_path, sst2_channels, tiny_bert_dir):
    estimator = PyTorch(
        "ddp_loop.py",  # without distribution it is a plain single-process loop
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        hyperparameters={"model_dir": str(tiny_bert_dir), "steps": 5, "global_batch": 8},
        compiler_config=TrainingCompilerConfig(plan="regional"),
        output_path=str(tmp_path / "out"),
    )
    estimator.fit({"train": sst2_channels["train"]})
    report = json.loads(read(estimator.latest_training_job.output_artifacts, "compiler/report.json"))
    assert report["compiled"] is True and report["integration"] == "pytorch" and report["regional"] is True
    assert report["steps"] == 5 and report["samples_per_second"] > 0
    with tarfile.open(estimator.model_data.removeprefix("file://")) as tar:
        tar.extractall(tmp_path / "model", filter="data")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model" / "model.safetensors"), "pt") as weights:
        assert not any("_orig_mod" in key for key in weights.keys())
