"""Docker local mode through sagemaker-core's local engine. No Docker engine runs on the CI machine,
so a stand-in ``docker`` command on PATH (conftest's ``fake_docker``) answers ``docker info`` /
``docker compose version`` and, for ``docker compose -f FILE up``, keeps a copy of the folder the real
engine wrote (compose file and config files) instead of starting containers."""

import json
import os

import pytest
import yaml

from sagemaker_tc import DockerNotAvailableError, PyTorch, TrainingCompilerConfig


def estimator(source_dir, tmp_path, instance_type):
    return PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type=instance_type,
        image_uri="sagemaker-tc-test:latest",
        hyperparameters={"greeting": "hello world"},
        compiler_config=TrainingCompilerConfig(),
        output_path=str(tmp_path / "out"),
    )


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


def test_local_cpu_has_no_gpu_reservation(fake_docker, source_dir, tmp_path):
    estimator(source_dir, tmp_path, "local").fit()
    compose = yaml.safe_load((fake_docker / "run" / "docker-compose.yaml").read_text())
    (service,) = compose["services"].values()
    assert "deploy" not in service


def test_compose_command_is_found_the_way_sagemaker_core_finds_it(fake_docker):
    """The one private sagemaker-core call Docker local mode makes, through sagemaker_tc.sdk._internals."""
    from sagemaker_tc.sdk import _internals

    assert _internals.docker_compose_command() == ["docker", "compose"]
