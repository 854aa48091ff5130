"""Bad estimator input gets a named error before any job starts (no job folder is created)."""

import pytest

from sagemaker_tc import (
    ChannelNotFoundError,
    ConfigError,
    EstimatorArgumentError,
    HyperparameterError,
    PyTorch,
    SourceNotFoundError,
    TrainingCompilerConfig,
    UnsupportedInstanceTypeError,
)
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.modes.request import request_for


def test_shell_entry_point_runs_without_the_compiler(make, source_dir):
    (source_dir / "run.sh").write_text("echo hi\n")
    assert make(entry_point="run.sh", compiler_config=None).entry_point == "run.sh"
    assert make(entry_point="run.sh", compiler_config=TrainingCompilerConfig(enabled=False))


def test_valid_arguments_build_an_estimator(make):
    estimator = make(hyperparameters={"lr": 0.1})
    assert estimator.hyperparameters()["lr"] == "0.1"
    assert make(PyTorch, framework_version="2.8", py_version="py312").framework_version == "2.8"


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"entry_point": None}, EstimatorArgumentError, "entry_point is required"),
        ({"entry_point": "missing.py"}, SourceNotFoundError, "was not found in source_dir"),
        ({"source_dir": "/nonexistent/src"}, SourceNotFoundError, "is not a folder"),
        ({"instance_type": "gpu-big"}, UnsupportedInstanceTypeError, "is not an instance type"),
        ({"instance_type": None}, UnsupportedInstanceTypeError, "is not an instance type"),
        ({"instance_type": "ml.trn1.32xlarge"}, UnsupportedInstanceTypeError, "Neuron compiler"),
        ({"instance_type": "ml.inf2.xlarge"}, UnsupportedInstanceTypeError, "Neuron compiler"),
        ({"instance_type": "ml.zz9.xlarge"}, UnsupportedInstanceTypeError, "not in sagemaker-tc's table"),
        (
            {"instance_type": "ml.p5.48xlarge", "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
            EstimatorArgumentError,
            "smdistributed.*not compatible",
        ),
        ({"instance_type": "ml.g5.xlarge", "distribution": {"mpi": {"enabled": True}}}, EstimatorArgumentError, "MPI"),
        ({"instance_type": "ml.g5.xlarge", "distribution": {"horovod": {}}}, EstimatorArgumentError, "unknown"),
        (
            {"instance_type": "ml.g5.xlarge", "distribution": {"torch_distributed": {}}},
            EstimatorArgumentError,
            "must be {'enabled': True or False}",
        ),
        (
            {"instance_type": "ml.g5.xlarge", "distribution": {"torch_distributed": {"enabled": True, "x": 1}}},
            EstimatorArgumentError,
            "must be {'enabled': True or False}",
        ),
        (
            {"distribution": {"torch_distributed": {"enabled": True}, "processes_per_host": 2}},
            EstimatorArgumentError,
            "distribution\\['processes_per_host'\\] belongs inside the strategy's dict",
        ),
        ({"checkpoint_local_path": "/opt/ml/checkpoints"}, EstimatorArgumentError, "needs checkpoint_s3_uri"),
        (
            {"distribution": {"torch_distributed": {"enabled": True, "processes_per_host": 0}}},
            EstimatorArgumentError,
            "processes_per_host must be a positive integer",
        ),
        ({"framework_version": "2.8"}, EstimatorArgumentError, "not framework_version"),
        ({"instance_type": "ml.g5.xlarge", "output_path": "out/local"}, EstimatorArgumentError, "s3:// URI"),
        ({"instance_count": 0}, UnsupportedInstanceTypeError, "positive integer"),
        ({"hyperparameters": {"lr": float("nan")}}, HyperparameterError, "cannot be JSON-encoded"),
        ({"hyperparameters": {"ids": {1, 2}}}, HyperparameterError, "cannot be JSON-encoded"),
        ({"compiler_config": {"enabled": True}}, ConfigError, "must be a sagemaker_tc.TrainingCompilerConfig"),
        ({"environment": {"X": 1}}, EstimatorArgumentError, "dict of str -> str"),
        ({"metric_definitions": [{"Name": "loss", "Regex": "loss=(["}]}, EstimatorArgumentError, "invalid Regex"),
        ({"base_job_name": "bad name!"}, EstimatorArgumentError, "base_job_name"),
        ({"entry_point": "run.sh"}, EstimatorArgumentError, "must be a .py file"),
        ({"output_path": "s3://bucket/out"}, EstimatorArgumentError, "local paths or file:// URIs only"),
    ],
)
def test_bad_estimator_arguments(make, source_dir, overrides, error, message):
    (source_dir / "run.sh").write_text("echo hi\n")
    with pytest.raises(error, match=message):
        make(**overrides)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"train": "/nonexistent/sst2"}, r"channel 'train': '/nonexistent/sst2' does not exist"),
        ({"train": "file:///nonexistent/sst2"}, r"does not exist"),
        ({"bad channel": "."}, r"channel name 'bad channel' is not accepted"),
        ({"..": "."}, r"channel name '..' is not accepted"),
        ({".": "."}, r"channel name '.' is not accepted"),
        ({"Train": ".", "train": "."}, r"'Train' and 'train' both become SM_CHANNEL_TRAIN"),
        ({"train": "s3://bucket/train"}, r"local paths or file:// URIs only"),
        (["train"], r"must be a dict"),
    ],
)
def test_bad_channels_fail_before_the_job_starts(make, tmp_path, inputs, message):
    estimator = make()
    with pytest.raises((ChannelNotFoundError, EstimatorArgumentError), match=message):
        estimator.fit(inputs)
    assert not (tmp_path / "out").exists()
    assert estimator.model_data is None


def test_request_runs_the_launcher_only_when_the_compiler_is_on(make):
    def request(estimator, job_name, submit_directory):
        output = local_path(estimator.output_path).as_uri()
        return request_for(estimator.spec, job_name, {}, submit_directory, output_path=output).to_api_dict()

    on = request(make(), "job-1", "/tmp/sourcedir.tar.gz")
    off = request(make(compiler_config=TrainingCompilerConfig(enabled=False)), "job-2", "/x")
    none = request(make(compiler_config=None), "job-3", "/x")
    assert on["HyperParameters"]["sagemaker_program"] == '"sagemaker_tc_launcher.py"'
    assert on["HyperParameters"]["sagemaker_training_compiler_enabled"] == "true"
    assert off["HyperParameters"]["sagemaker_program"] == '"echo.py"'
    assert off["HyperParameters"]["sagemaker_training_compiler_enabled"] == "false"
    assert none["HyperParameters"]["sagemaker_program"] == '"echo.py"'
    assert "sagemaker_training_compiler_enabled" not in none["HyperParameters"]
    metric_names = {m["Name"] for m in on["AlgorithmSpecification"]["MetricDefinitions"]}
    assert "compiler:samples_per_second" in metric_names
    assert "MetricDefinitions" not in none["AlgorithmSpecification"]
    assert on["ResourceConfig"] == {"InstanceType": "local_process", "InstanceCount": 1, "VolumeSizeInGB": 30}
    assert on["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400}
