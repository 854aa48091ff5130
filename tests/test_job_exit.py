"""How job processes end under the launcher: DDP teardown on gloo, the watchdog, a rank that dies at exit.

Every job runs for real: ``local_process`` hosts, the sagemaker-training toolkit, torchrun, gloo.
"""

import re
import tarfile

import pytest
from conftest import REPO, sst2_trainer_job

from sagemaker_tc import PyTorch, TrainingCompilerConfig, TrainingJobFailedError

pytestmark = pytest.mark.slow

# Past this, a job that hangs is stopped by local_process as MaxRuntimeExceeded (so a hang fails a test).
MAX_RUN_S = 300


def ddp_job(tmp_path, *, hosts, processes, hang_grace_s=None, **hyperparameters):
    return PyTorch(
        "ddp_exit.py",
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        instance_count=hosts,
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": processes}},
        hyperparameters=hyperparameters,
        compiler_config=TrainingCompilerConfig(hang_grace_s=hang_grace_s),
        output_path=str(tmp_path / "out"),
        max_run=MAX_RUN_S,
    )


def model_files(job) -> list[str]:
    with tarfile.open(job.model_data.removeprefix("file://")) as tar:
        return tar.getnames()


# Each topology meets each way of ending: with and without compile_model, with and without
# destroy_process_group() (pairwise). The first is the hang of issue 14: a plain DDP script whose
# globals (the DDP model and, through it, gloo's process group) were freed while the launcher held the GIL.
@pytest.mark.parametrize(
    ("hosts", "processes", "compile_model", "destroy"),
    [(2, 1, 0, 1), (2, 1, 1, 0), (1, 2, 0, 0), (1, 2, 1, 1)],
    ids=["2x1-plain-destroy", "2x1-compiled-no-destroy", "1x2-plain-no-destroy", "1x2-compiled-destroy"],
)
def test_a_ddp_script_that_exits_cleanly_under_torchrun_exits_cleanly_under_the_launcher(
    tmp_path, hosts, processes, compile_model, destroy
):
    job = ddp_job(tmp_path, hosts=hosts, processes=processes, compile=compile_model, destroy=destroy)

    job.fit()

    result = job.latest_training_job
    assert result.status == "Completed", result.failure_reason
    assert "model.pt" in model_files(job)
    for host, job_dir in result.host_dirs.items():
        assert (job_dir / "output" / "success").exists(), host
        assert not (job_dir / "output" / "failure").exists(), host


def test_hf_trainer_on_two_hosts_exits_cleanly(tmp_path, tiny_bert_dir):
    job, inputs = sst2_trainer_job(tmp_path, tiny_bert_dir, TrainingCompilerConfig(backend="eager"), instance_count=2)

    job.fit(inputs)

    assert job.latest_training_job.status == "Completed"
    assert "model.safetensors" in model_files(job)
    for host, job_dir in job.latest_training_job.host_dirs.items():
        assert (job_dir / "output" / "success").exists(), host


def test_a_rank_that_blocks_at_exit_fails_the_job_with_its_host_rank_and_stack(tmp_path):
    job = ddp_job(tmp_path, hosts=2, processes=1, hang_grace_s=15, block_at_exit_rank=1)

    with pytest.raises(TrainingJobFailedError) as raised:
        job.fit()

    reason = raised.value.failure_reason
    assert reason.startswith(
        "algo-2: algo-2 rank 1: StuckRankError: its script finished and the process did not exit within 15 s"
    ), reason
    # The stuck rank's Python stack, main thread first: the interpreter waiting for the thread at exit.
    assert re.search(r"Python stack \(main thread first\):\n(Current thread|Thread) 0x", reason), reason
    assert "in _shutdown" in reason, reason
    stack = (job.latest_training_job.host_dirs["algo-2"] / "output" / "failure").read_text()
    assert "ddp_exit.py" in stack, stack  # the thread the script left running, with its line
    assert "MaxRuntimeExceeded" not in reason


def test_a_rank_with_no_progress_after_another_host_finished_fails_the_job(tmp_path):
    job = ddp_job(tmp_path, hosts=2, processes=1, hang_grace_s=15, block_rank=1)

    with pytest.raises(TrainingJobFailedError) as raised:
        job.fit()

    reason = raised.value.failure_reason
    assert reason.startswith("algo-2: algo-2 rank 1: StuckRankError: it made no progress"), reason
    assert "for 15 s after algo-1 rank 0 finished its script" in reason, reason
    assert "ddp_exit.py" in reason and "in <module>" in reason, reason  # where the script blocks


def test_a_single_process_that_blocks_at_exit_fails_the_job(tmp_path):
    job = PyTorch(
        "ddp_exit.py",
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        hyperparameters={"block_at_exit_rank": 0},
        compiler_config=TrainingCompilerConfig(hang_grace_s=10),
        output_path=str(tmp_path / "out"),
        max_run=MAX_RUN_S,
    )

    with pytest.raises(TrainingJobFailedError) as raised:
        job.fit()

    assert raised.value.failure_reason.startswith(
        "algo-1: StuckRankError: its script finished and the process did not exit within 10 s"
    ), raised.value.failure_reason
    assert "model.pt" in model_files(job)


def test_a_rank_that_dies_at_exit_after_training_is_reported_and_its_model_kept(tmp_path, capsys):
    job = ddp_job(tmp_path, hosts=1, processes=1, die_at_exit_rank=0)

    job.fit()

    log = capsys.readouterr().out
    assert job.latest_training_job.status == "Completed"
    assert "model.pt" in model_files(job)
    assert "RANK DIED AT EXIT: algo-1 rank 0 (Fatal Python error: Aborted) finished its script" in log, log[-3000:]
