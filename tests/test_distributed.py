"""Distributed compiled training through torchrun, proven on CPU (gloo) with local_process hosts."""

import json
import tarfile
import time

import pytest
import torch
from conftest import REPO, sst2_trainer_job, write_sst2_slice

from sagemaker_tc import PyTorch, TrainingCompilerConfig, TrainingJobFailedError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def train_channel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sst2") / "train"
    write_sst2_slice(folder, "train", 80)
    return str(folder)


def ddp_job(tmp_path, tiny_bert_dir, *, instance_count=1, distribution=None, **hyperparameters):
    return PyTorch(
        "ddp_loop.py",
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        instance_count=instance_count,
        distribution=distribution,
        hyperparameters={"model_dir": str(tiny_bert_dir), "steps": 10, "global_batch": 8, **hyperparameters},
        compiler_config=TrainingCompilerConfig(),
        output_path=str(tmp_path / "out"),
        max_run=600,
    )


def weights(model_data: str, folder) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    with tarfile.open(model_data.removeprefix("file://")) as tar:
        tar.extractall(folder, filter="data")
    return load_file(str(folder / "model.safetensors"))


@pytest.fixture(scope="module")
def single_process_weights(tmp_path_factory, tiny_bert_dir, train_channel):
    tmp_path = tmp_path_factory.mktemp("single")
    job = ddp_job(tmp_path, tiny_bert_dir)
    job.fit({"train": train_channel})
    return weights(job.model_data, tmp_path / "model")


@pytest.mark.parametrize(("instance_count", "processes_per_host"), [(2, 1), (1, 2)], ids=["2-hosts-x-1", "1-host-x-2"])
def test_ddp_matches_one_process(
    tmp_path, tiny_bert_dir, train_channel, single_process_weights, instance_count, processes_per_host
):
    job = ddp_job(
        tmp_path,
        tiny_bert_dir,
        instance_count=instance_count,
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": processes_per_host}},
    )
    job.fit({"train": train_channel})
    result = job.latest_training_job
    assert result.status == "Completed"
    trained = weights(job.model_data, tmp_path / "model")
    assert trained.keys() == single_process_weights.keys()
    for name, tensor in trained.items():
        torch.testing.assert_close(tensor, single_process_weights[name], rtol=1e-4, atol=1e-5, msg=name)
    # Only rank 0 (on algo-1) wrote the model; every host finished.
    for host, job_dir in result.host_dirs.items():
        assert (job_dir / "output" / "success").exists(), host
        assert (job_dir / "model" / "model.safetensors").exists() == (host == "algo-1")


def test_a_failing_rank_fails_the_whole_job(tmp_path, tiny_bert_dir, train_channel):
    job = ddp_job(
        tmp_path,
        tiny_bert_dir,
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True}},
        fail_rank=1,
        fail_step=3,
    )
    started = time.monotonic()
    with pytest.raises(TrainingJobFailedError, match="rank 1 failed on purpose at step 3") as raised:
        job.fit({"train": train_channel})
    elapsed = time.monotonic() - started
    print(f"2-host failing job ended in {elapsed:.1f} s")
    # Bounded: it ended on the rank's error, not on max_run (600 s).
    assert "MaxRuntimeExceeded" not in raised.value.failure_reason
    assert raised.value.failure_reason.startswith("algo-2: algo-2 rank 1: RuntimeError")
    for host, job_dir in job.latest_training_job.host_dirs.items():
        assert (job_dir / "output" / "failure").exists(), host
        assert not (job_dir / "output" / "success").exists(), host


def test_hf_trainer_script_runs_compiled_under_torchrun_with_no_change(tmp_path, tiny_bert_dir):
    config = TrainingCompilerConfig(plan="regional")
    job, inputs = sst2_trainer_job(tmp_path, tiny_bert_dir, config, processes_per_host=2)
    job.fit(inputs)
    with tarfile.open(job.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        report = json.load(tar.extractfile("compiler/report.json"))
        assert "predictions.json" in tar.getnames()
    assert report["compiled"] is True and report["integration"] == "transformers" and report["steps"] == 6
    with tarfile.open(job.model_data.removeprefix("file://")) as tar:
        assert "model.safetensors" in tar.getnames()


def test_auto_batch_under_torchrun_agrees_across_ranks(tmp_path, tiny_bert_dir):
    config = TrainingCompilerConfig(
        backend="eager", batch_size="auto", tune_seq_len=32, memory_budget_gib=0.03, max_batch_size=64
    )
    job, inputs = sst2_trainer_job(tmp_path, tiny_bert_dir, config, processes_per_host=2, train_batch_size=4)
    job.fit(inputs)
    with tarfile.open(job.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        tuning = json.load(tar.extractfile("compiler/report.json"))["batch_tuning"]
    found = tuning["per_device_batch"]["after"]
    assert tuning["applied"] is True and tuning["world_size"] == 2 and 4 < found <= 64
    assert tuning["global_batch"] == {"before": 8, "after": 2 * found}
    assert tuning["schedule"]["trainer_batch_size"] == found
    assert tuning["max_steps"]["after"] == -(-6 * 4 // found)
