"""notebooks/: committed without outputs, and every cell of every notebook runs (nbclient, a real
kernel) at the size the notebook sets; "run on SageMaker" runs against moto's server."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import boto3
import nbformat
import pytest
from conftest import REPO
from nbclient import NotebookClient

NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT_SECONDS = 900


def all_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_committed_notebooks_have_no_outputs():
    assert len(all_notebooks()) == 5
    for path in all_notebooks():
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        for cell in book.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip the outputs"
        assert "widgets" not in book.metadata, f"{path.name}: strip the widget state"


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A kernelspec for this interpreter (so the notebook runs in the environment under test, whatever
    other kernels the machine has); returns its name."""
    spec_dir = tmp_path / "jupyter" / "kernels" / "sagemaker-tc-test"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "sagemaker-tc test",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return "sagemaker-tc-test"


@pytest.fixture
def workdir(tmp_path):
    """Where the notebooks run: ``<tmp>/notebooks``, laid out as in the repository (``../examples`` is
    the repository's, which the notebooks only read), so what they write stays under ``tmp_path``."""
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    folder = tmp_path / "notebooks"
    folder.mkdir()
    return folder


def execute(name: str, kernel: str, workdir: Path) -> nbformat.NotebookNode:
    """Run every cell of ``notebooks/<name>`` in ``workdir`` (a folder beside the repository's
    ``examples/``, as ``notebooks/`` is where users run them); returns the executed notebook (the
    file on disk is left as it is). A failing cell raises with its traceback."""
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        book,
        kernel_name=kernel,
        timeout=CELL_TIMEOUT_SECONDS,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    return book


def text_of(book: nbformat.NotebookNode) -> str:
    """Everything the cells printed."""
    parts = []
    for cell in book.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output["text"])
            elif "data" in output:
                parts.append(output["data"].get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.slow
def test_quickstart_runs(kernel, workdir):
    book = execute("01_quickstart.ipynb", kernel, workdir)
    out = text_of(book)
    assert "Found configuration for Training Compiler" in out
    assert ": Completed in " in out
    assert "compiled             True" in out and any((workdir / "sagemaker-tc-output").iterdir())
    assert "validation accuracy after 20 steps" in out
    assert "positive | a gorgeous" in out
    # The bench section: both variants measured side by side, the eager row is the reference.
    assert re.search(r"^eager +[\d.]+ samples/s .* speedup vs eager 1\.00x$", out, re.MULTILINE)
    assert re.search(r"^sagemaker-tc +[\d.]+ samples/s .* speedup vs eager [\d.]+x$", out, re.MULTILINE)
    assert any("image/png" in output.get("data", {}) for cell in book.cells for output in cell.get("outputs", []))


@pytest.mark.slow
def test_bring_your_own_loop_runs(kernel, workdir):
    out = text_of(execute("03_bring_your_own_loop.ipynb", kernel, workdir))
    assert "status               Completed" in out
    assert "compiled             True" in out and "integration          pytorch" in out
    assert "sagemaker_training_compiler_enabled      true" in out
    # What the notebook wrote is in its working folder: the script it wrote and the jobs' output.
    assert (workdir / "byo_loop" / "train.py").is_file() and any((workdir / "sagemaker-tc-output").iterdir())


@pytest.mark.slow
def test_modeltrainer_runs(kernel, workdir):
    out = text_of(execute("04_modeltrainer.ipynb", kernel, workdir))
    assert "TrainingCompilerDriver" in out and "SM_TRAINING_COMPILER_SETTINGS" in out
    assert "Found configuration for Training Compiler" in out and "sagemaker-tc driver: running train.py" in out
    assert "status               Completed" in out and "integration          transformers" in out
    assert "steps                20" in out and "[sagemaker-tc] compile_seconds=" in out
    assert "compiled             True" in out and "plan                 regional" in out


@pytest.fixture
def sagemaker_account(aws, monkeypatch):
    """A bucket and an execution role (trusted by SageMaker, allowed to train) in moto's account."""
    boto3.client("s3").create_bucket(Bucket="notebook-bucket")
    iam = boto3.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    role = iam.create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    allow = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["sagemaker:*", "s3:*", "iam:PassRole", "logs:*"], "Resource": "*"}
        ],
    }
    iam.put_role_policy(RoleName="SageMakerRole", PolicyName="training", PolicyDocument=json.dumps(allow))
    monkeypatch.setenv("SAGEMAKER_ROLE", role)
    monkeypatch.setenv("SAGEMAKER_BUCKET", "notebook-bucket")
    return aws


def test_run_on_sagemaker_runs_against_moto(sagemaker_account, kernel, workdir):
    out = text_of(execute("02_run_on_sagemaker.ipynb", kernel, workdir))
    requests = sagemaker_account()
    (job,) = [body for target, body in requests if target == "SageMaker.CreateTrainingJob"]
    assert job["AlgorithmSpecification"]["TrainingImage"].endswith(
        "huggingface-pytorch-training:2.8-transformers4.56.2-gpu-py312-cu129-ubuntu22.04"
    )
    assert job["HyperParameters"]["sagemaker_training_compiler_enabled"] == "true"
    assert job["HyperParameters"]["train_batch_size"] == "64"
    (pipeline,) = [body for target, body in requests if target == "SageMaker.CreatePipeline"]
    (step,) = json.loads(pipeline["PipelineDefinition"])["Steps"]
    assert step["Arguments"]["ResourceConfig"]["InstanceType"] == {"Get": "Parameters.TrainInstanceType"}
    assert [target for target, _ in requests].count("SageMaker.StartPipelineExecution") == 1
    assert "s3://notebook-bucket/sagemaker-tc/sst2/train" in out and "Succeeded" in out
    assert "sagemaker_training_compiler_enabled      true" in out
