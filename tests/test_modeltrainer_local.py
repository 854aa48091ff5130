"""SDK v3's ModelTrainer with the compiler, docker-free (Compute(instance_type="local_process")): the same
driver a SageMaker job runs, in local_process's job layout, training real tiny transformers models."""

import json
import tarfile

import pytest
from conftest import REPO, TRICKY_HYPERPARAMETERS, sst2_tiny_hyperparameters, write_sst2_slice

from sagemaker_tc import ModelTrainer, TrainingCompilerConfig, TrainingJobFailedError
from sagemaker_tc.container.launcher import LOG_CONFIGURING, LOG_FOUND

pytestmark = pytest.mark.slow

# The estimators' tricky values, plus a dict: ModelTrainer sends it as JSON, which reaches the script as is.
TRICKY = {**TRICKY_HYPERPARAMETERS, "nested": {"a": 1}}
# What the script's command line gets: ModelTrainer sends strings as they are, other values as JSON.
ARGUMENTS = {f"--{name}": value if isinstance(value, str) else json.dumps(value) for name, value in TRICKY.items()}


def trainer(source_dir, tmp_path, entry_script="echo.py", *, instance_count=1, **overrides) -> ModelTrainer:
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    kwargs = {
        "training_mode": Mode.LOCAL_CONTAINER,
        "training_image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-cpu-py312",
        "source_code": SourceCode(source_dir=str(source_dir), entry_script=entry_script),
        "compute": Compute(instance_type="local_process", instance_count=instance_count),
        "local_container_root": str(tmp_path / "jobs"),
        "compiler_config": TrainingCompilerConfig(plan="regional"),
    }
    kwargs.update(overrides)
    return ModelTrainer(**kwargs)


def member(archive_uri: str, name: str) -> str:
    with tarfile.open(archive_uri.removeprefix("file://")) as tar:
        return tar.extractfile(name).read().decode()


def train(model_trainer: ModelTrainer, capsys, inputs=None) -> str:
    """Run train(); returns the job log it streamed to stdout."""
    try:
        model_trainer.train(input_data_config=inputs)
    finally:
        log = capsys.readouterr().out
    return log


def test_hyperparameters_reach_the_script_exactly_and_no_sagemaker_key_does(source_dir, tmp_path, capsys):
    from sagemaker.core.training.configs import InputData

    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.tsv").write_text("sentence\tlabel\n")
    job = trainer(source_dir, tmp_path, hyperparameters=TRICKY)
    log = train(job, capsys, [InputData(channel_name="train", data_source=str(data))])
    result = job.latest_local_job
    echo = json.loads(member(result.output_artifacts, "echo.json"))

    assert dict(zip(echo["argv"][::2], echo["argv"][1::2], strict=True)) == ARGUMENTS
    assert echo["hps"] == TRICKY  # SM_HPS, as ModelTrainer's environment.py decodes it
    assert echo["main"] == "__main__" and echo["job_name"] == result.job_name
    assert echo["channels"]["SM_CHANNEL_TRAIN"] == ["rows.tsv"]
    assert "echo.py" in echo["channels"]["SM_CHANNEL_CODE"]
    assert echo["framework_params"] == {}  # no sagemaker_* hyperparameter, no torchrun
    assert echo["env"]["SM_TRAINING_COMPILER_CONFIGURED"] == "1"
    assert LOG_FOUND in log and LOG_CONFIGURING in log and "sagemaker-tc driver: running echo.py" in log
    assert member(result.model_artifacts, "weights.txt") == "trained"
    assert json.loads(member(result.output_artifacts, "compiler/report.json"))["steps"] == 0
    assert (result.job_dir / "input" / "data" / "code" / "echo.py").is_file()


def test_a_failing_script_fails_the_job_with_its_message(source_dir, tmp_path, capsys):
    job = trainer(source_dir, tmp_path, environment={"ECHO_FAIL_WITH": "learning rate 42 is too high"})
    with pytest.raises(TrainingJobFailedError, match="ValueError: learning rate 42 is too high"):
        train(job, capsys)
    failure = job.latest_local_job.job_dir / "output" / "failure"
    assert failure.read_text().startswith("ValueError: learning rate 42 is too high")


def test_two_hosts_run_torchrun_through_the_driver(source_dir, tmp_path, capsys):
    from sagemaker.train.distributed import Torchrun

    job = trainer(source_dir, tmp_path, instance_count=2, distributed=Torchrun(), hyperparameters={"epochs": 1})
    log = train(job, capsys)
    assert "--nnodes=2" in log and "--node_rank=1" in log and "--nproc_per_node=1" in log
    for host, job_dir in job.latest_local_job.host_dirs.items():
        echo = json.loads((job_dir / "output" / "data" / "echo.json").read_text())
        assert echo["argv"] == ["--epochs", "1"], host
        assert echo["framework_params"] == {"sagemaker_torch_distributed_enabled": True}, host


def test_a_hf_trainer_script_trains_compiled_under_torchrun_and_writes_the_report(tmp_path, tiny_bert_dir, capsys):
    from sagemaker.core.training.configs import InputData
    from sagemaker.train.distributed import Torchrun

    write_sst2_slice(tmp_path / "train", "train", 96)
    write_sst2_slice(tmp_path / "validation", "validation", 32)
    job = trainer(
        REPO / "examples" / "sst2" / "code",
        tmp_path,
        "train.py",
        distributed=Torchrun(process_count_per_node=2),
        hyperparameters=sst2_tiny_hyperparameters(tiny_bert_dir),
    )
    inputs = [
        InputData(channel_name="train", data_source=str(tmp_path / "train")),
        InputData(channel_name="validation", data_source=str(tmp_path / "validation")),
    ]
    log = train(job, capsys, inputs)
    result = job.latest_local_job
    report = json.loads(member(result.output_artifacts, "compiler/report.json"))
    assert report["compiled"] is True and report["integration"] == "transformers" and report["steps"] == 6
    assert "[sagemaker-tc] compile_seconds=" in log and "--nproc_per_node=2" in log
    with tarfile.open(result.model_artifacts.removeprefix("file://")) as tar:
        assert "model.safetensors" in tar.getnames()


def test_an_earlier_job_folder_in_source_dir_is_never_shipped(source_dir, tmp_path, capsys):
    """Issue 33, worse item 2, for ModelTrainer: with the job folders inside ``source_dir`` (as with
    ``source_dir="."`` and the default ``local_container_root``, the current folder), the second job's
    code holds the script and not the first job's folder (its hyperparameters included)."""
    secret = {"db_password": "hunter2"}
    first = trainer(source_dir, tmp_path, local_container_root=str(source_dir), hyperparameters=secret)
    train(first, capsys)
    earlier = first.latest_local_job.job_dir.parent  # <local_container_root>/<job name>/opt_ml
    assert earlier.parent == source_dir and (earlier / "opt_ml" / "input" / "data" / "code" / "echo.py").is_file()

    second = trainer(source_dir, tmp_path, local_container_root=str(source_dir))
    assert earlier.name in second.source_code.ignore_patterns  # what sagemaker-train uploads or mounts leaves it out
    train(second, capsys)
    code = second.latest_local_job.job_dir / "input" / "data" / "code"
    shipped = {path.relative_to(code).as_posix() for path in code.rglob("*")}
    assert "echo.py" in shipped and not any(name.startswith(earlier.name) for name in shipped), sorted(shipped)
    assert not any("hunter2" in path.read_text(errors="ignore") for path in code.rglob("*") if path.is_file())
