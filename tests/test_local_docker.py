"""Docker local mode through sagemaker-core's local engine. No Docker engine runs on the CI machine,
so a stand-in ``docker`` command on PATH (conftest's ``fake_docker``) answers ``docker info`` /
``docker compose version`` and, for ``docker compose -f FILE up``, keeps a copy of the folder the real
engine wrote (compose file and config files) instead of starting containers; it can also run until
``docker compose stop`` (the stop contract of issue 25: ``fit(wait=False)``, ``stop()``, ``max_run``)."""

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from sagemaker_tc import DockerNotAvailableError, PyTorch, TrainingCompilerConfig, TrainingJobFailedError, contract
from sagemaker_tc.sdk.local import docker_job as local_docker_job


def estimator(source_dir, tmp_path, instance_type, **overrides):
    kwargs = {
        "source_dir": str(source_dir),
        "instance_type": instance_type,
        "image_uri": "sagemaker-tc-test:latest",
        "hyperparameters": {"greeting": "hello world"},
        "compiler_config": TrainingCompilerConfig(),
        "output_path": str(tmp_path / "out"),
    }
    kwargs.update(overrides)
    return PyTorch("echo.py", **kwargs)


def test_missing_docker_engine_is_a_clear_error_before_anything_starts(fake_docker, source_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("NO_ENGINE", "1")
    with pytest.raises(DockerNotAvailableError, match="no Docker engine answers.*instance_type='local_process'"):
        estimator(source_dir, tmp_path, "local").fit({"train": str(source_dir)})
    assert not (tmp_path / "out").exists()
    assert not (fake_docker / "command").exists()


def test_local_gpu_compose_file_runs_train_with_the_launcher_and_a_gpu(fake_docker, source_dir, tmp_path):
    job = estimator(source_dir, tmp_path, "local_gpu")
    job.fit({"train": str(source_dir)})

    command = (fake_docker / "command").read_text().split()
    assert command[:2] == ["compose", "-f"] and "up" in command and "--abort-on-container-exit" in command
    compose = yaml.safe_load((fake_docker / "run" / "docker-compose.yaml").read_text())
    (service,) = compose["services"].values()
    assert service["image"] == "sagemaker-tc-test:latest"
    assert service["command"] == "train"
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert devices and devices[0]["capabilities"] == ["gpu"]
    code_mounts = [v for v in service["volumes"] if v.endswith(":/opt/ml/code")]
    assert code_mounts, service["volumes"]
    code_dir = code_mounts[0].rsplit(":", 1)[0]
    assert {"echo.py", "sagemaker_tc_launcher.py", "sagemaker_tc"} <= set(os.listdir(code_dir))

    host = next(p for p in (fake_docker / "run").iterdir() if p.is_dir() and (p / "input" / "config").exists())
    hps = json.loads((host / "input" / "config" / "hyperparameters.json").read_text())
    assert hps["sagemaker_training_compiler_enabled"] == "true"
    assert hps["sagemaker_program"] == '"sagemaker_tc_launcher.py"'
    assert json.loads(hps["greeting"]) == "hello world"
    assert job.model_data.startswith("file://")


def test_local_cpu_has_no_gpu_reservation_and_leaves_no_container_root(fake_docker, source_dir, tmp_path, monkeypatch):
    """The job's container root (compose file, emptied host folders) is removed once the job ended;
    its archives are in the output path."""
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    job_estimator = estimator(source_dir, tmp_path, "local")
    job_estimator.fit()
    compose = yaml.safe_load((fake_docker / "run" / "docker-compose.yaml").read_text())
    (service,) = compose["services"].values()
    assert "deploy" not in service
    assert not [p.name for p in system_tmp.iterdir() if p.name.startswith("sagemaker-tc-")]
    assert Path(job_estimator.model_data.removeprefix("file://")).is_file()


def test_compose_command_is_found_the_way_sagemaker_core_finds_it(fake_docker):
    """The one private sagemaker-core call Docker local mode makes, through sagemaker_tc.sdk._internals."""
    from sagemaker_tc.sdk import _internals

    assert _internals.docker_compose_command() == ["docker", "compose"]


def test_wait_false_returns_at_once_and_the_job_handle_waits_with_the_containers_log(
    fake_docker, source_dir, tmp_path, capsys
):
    job_estimator = estimator(source_dir, tmp_path, "local")
    job_estimator.fit(wait=False)

    job = job_estimator.latest_training_job
    assert job_estimator.wait(logs=False) is None and job.status == "Completed"
    assert job.describe()["TrainingJobStatus"] == "Completed" and job.describe()["SecondaryStatus"] == "Completed"
    assert job_estimator.model_data == job.model_artifacts and job.model_artifacts.endswith("/model.tar.gz")
    assert "algo-1-fake  | training in the container" in job.logs()
    assert "training in the container" not in capsys.readouterr().out  # a background job's log is its own


def test_stop_runs_docker_compose_stop_with_the_grace_and_the_job_ends_stopped(
    fake_docker, source_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("FAKE_UP_WAITS", "1")
    job_estimator = estimator(source_dir, tmp_path, "local_gpu")
    job_estimator.fit(wait=False)
    job = job_estimator.latest_training_job
    assert job.status == "InProgress" and job.describe()["SecondaryStatus"] == "Training"

    job.stop(grace_s=7)
    job_estimator.wait(logs=False)  # a requested stop raises nothing, though the container exited 137

    stop = (fake_docker / "stop").read_text().split()
    assert stop[:2] == ["compose", "-f"] and stop[2].endswith("/docker-compose.yaml")
    assert stop[3:] == ["stop", "--timeout", "7"]
    described = job.describe()
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert "FailureReason" not in described and job.model_artifacts.endswith("/model.tar.gz")


def test_max_run_stops_a_docker_job_as_max_runtime_exceeded(fake_docker, source_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_UP_WAITS", "1")
    monkeypatch.setenv(contract.ENV_STOP_GRACE, "3")
    job_estimator = estimator(source_dir, tmp_path, "local", max_run=1)

    with pytest.raises(TrainingJobFailedError, match="MaxRuntimeExceeded: the job ran longer than 1 seconds"):
        job_estimator.fit(logs=False)

    assert (fake_docker / "stop").read_text().split()[3:] == ["stop", "--timeout", "3"]
    job = job_estimator.latest_training_job
    assert (job.status, job.secondary_status) == ("Stopped", "MaxRuntimeExceeded")


def test_a_failed_container_fails_the_job_with_the_engines_reason_and_its_log_on_stdout(
    fake_docker, source_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("FAKE_UP_FAILS", "1")
    job_estimator = estimator(source_dir, tmp_path, "local")

    with pytest.raises(TrainingJobFailedError, match="Process exited with code: 3"):
        job_estimator.fit()  # in the foreground, the log goes to stdout as it comes
    assert job_estimator.latest_training_job.status == "Failed"
    assert "algo-1-fake  | training in the container" in capsys.readouterr().out
    assert not isinstance(sys.stdout, local_docker_job._ThreadStdout)  # the job's routing of stdout is undone
