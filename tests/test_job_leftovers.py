"""Nothing a job creates is left outside its folders (issue 22): a failed, a stuck and a stopped job, with
the compiler on, leave nothing in the machine's temporary folder (a private TMPDIR here), where a stopped
or stuck job used to leave /tmp/sagemaker-tc-watch-*/ with its process's Python stack, and every job left
torch's /tmp/torchinductor_<user>. Real local_process jobs through the toolkit and the launcher."""

import tempfile

import pytest
from conftest import REPO

from sagemaker_tc import PyTorch, TrainingCompilerConfig, TrainingJobFailedError, contract
from sagemaker_tc.scratch import make_temp_dir, remove_temp_dir


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The jobs' TMPDIR (and this process's ``tempfile.tempdir``): an empty folder of the test's own."""
    folder = tmp_path / "machine-tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def job(tmp_path, entry_point, *, hang_grace_s=None, **arguments):
    return PyTorch(
        entry_point,
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        compiler_config=TrainingCompilerConfig(backend="eager", hang_grace_s=hang_grace_s),
        output_path=str(tmp_path / "out"),
        **arguments,
    )


def assert_nothing_left(estimator, private_tmp) -> None:
    assert sorted(path.name for path in private_tmp.iterdir()) == []
    for host, job_dir in estimator.latest_training_job.host_dirs.items():
        assert not (job_dir / "output" / contract.SCRATCH_DIRNAME).exists(), host


@pytest.mark.slow
def test_a_failed_job_leaves_nothing(tmp_path, private_tmp):
    estimator = job(tmp_path, "echo.py", environment={"ECHO_FAIL_WITH": "learning rate 42 is too high"})
    with pytest.raises(TrainingJobFailedError, match="learning rate 42 is too high"):
        estimator.fit(logs=False)
    assert_nothing_left(estimator, private_tmp)


@pytest.mark.slow
def test_a_stuck_job_stopped_by_the_watchdog_leaves_nothing(tmp_path, private_tmp):
    estimator = job(tmp_path, "ddp_exit.py", hang_grace_s=3, hyperparameters={"block_at_exit_rank": 0, "steps": 1})
    with pytest.raises(TrainingJobFailedError, match="StuckRankError: its script finished and the process did not"):
        estimator.fit(logs=False)
    assert "Python stack (main thread first)" in estimator.latest_training_job.failure_reason  # kept in the reason
    assert_nothing_left(estimator, private_tmp)


@pytest.mark.slow
def test_a_job_stopped_at_max_run_leaves_nothing(tmp_path, private_tmp):
    estimator = job(tmp_path, "sleeper.py", max_run=15)
    with pytest.raises(TrainingJobFailedError, match="MaxRuntimeExceeded"):
        estimator.fit(logs=False)
    assert_nothing_left(estimator, private_tmp)


@pytest.mark.slow
def test_a_failed_torchrun_job_leaves_nothing(tmp_path, private_tmp):
    estimator = job(
        tmp_path,
        "echo.py",
        environment={"ECHO_FAIL_WITH": "rank failed"},
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
    )
    with pytest.raises(TrainingJobFailedError, match="rank failed"):
        estimator.fit(logs=False)
    assert_nothing_left(estimator, private_tmp)


def test_temporary_folders_go_in_the_jobs_output_folder_and_go_away(tmp_path, private_tmp):
    output_dir = tmp_path / "opt_ml" / "output"
    output_dir.mkdir(parents=True)
    folder = make_temp_dir("sagemaker-tc-watch-", {contract.ENV_OUTPUT_DIR: str(output_dir)})
    assert folder.parent == output_dir / contract.SCRATCH_DIRNAME and (folder.stat().st_mode & 0o777) == 0o700
    remove_temp_dir(folder)
    assert list(output_dir.iterdir()) == []  # the scratch folder went with its last folder

    outside = make_temp_dir("sagemaker-tc-watch-", {})  # outside a job: the system's temporary folder
    assert outside.parent == private_tmp
    remove_temp_dir(outside)
    assert list(private_tmp.iterdir()) == []
