"""Bad inputs, second round (issue 22): the configuration, the estimators, BucketCollator and the CLI.

Each input is refused before any work with a named error that says what was wrong and what is
accepted, or accepted with one ConfigWarning (or ReservedEnvironmentWarning) that names it, or
accepted where it is valid.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from sagemaker_tc import (
    ConfigError,
    ConfigWarning,
    EstimatorArgumentError,
    HuggingFace,
    HyperparameterError,
    PyTorch,
    SourceNotFoundError,
    TrainingCompilerConfig,
    UnsupportedInstanceTypeError,
    contract,
)
from sagemaker_tc.errors import CollatorArgumentError, ReservedEnvironmentWarning

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CLOUD = {"instance_type": "ml.g5.xlarge", "role": ROLE, "image_uri": "img", "output_path": "s3://tc-bucket/jobs"}


def config_warnings(**fields) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TrainingCompilerConfig(**fields)
    return [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"lr_scaling": "sqrt"}, "lr_scaling does nothing"),
        ({"memory_budget_gib": 8.0}, "memory_budget_gib only steer batch_size='auto'"),
        ({"batch_size": 32, "memory_budget_gib": 8.0}, "only steer batch_size='auto' and do nothing here"),
        ({"expected_steps": 500, "plan": "regional"}, "only plan='auto' reads expected_steps"),
        ({"backend": "eager", "plan": "step"}, "backend='eager' wins, nothing is compiled and plan does nothing"),
        ({"dynamic": True, "buckets": [64, 128]}, "bucketing only adds padding"),
        ({"batch_size": 512, "max_batch_size": 256}, "batch_size=512 is above max_batch_size=256"),
        ({"batch_size": 100, "batch_size_multiple": 8}, "batch_size=100 is not a multiple of batch_size_multiple=8"),
        ({"compile_optimizer": True, "plan": "model"}, "only plan='step' compiles the optimizer update"),
    ],
)
def test_contradictions_warn_once_with_config_warning(fields, fragment):
    messages = config_warnings(**fields)
    assert len(messages) == 1 and fragment in messages[0], messages


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"batch_size": "auto", "memory_budget_gib": 8.0, "max_batch_size": 256, "batch_size_multiple": 8},
        {"batch_size": 64, "lr_scaling": "sqrt"},
        {"expected_steps": 500},
        {"plan": "step", "compile_optimizer": True},
        {"dynamic": True, "buckets": None},
        {"backend": "eager"},
        {"batch_size": 65536, "buckets": [2**20], "expected_steps": 10**9, "hang_grace_s": 1.0},
    ],
)
def test_consistent_configs_give_no_warning(fields):
    assert config_warnings(**fields) == []


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"buckets": [10**12]}, "at most 1048576"),
        ({"expected_steps": 10**30}, "expected_steps: Input should be less than or equal to 1000000000"),
        ({"batch_size": 10**9}, "a per-device batch is at most 65536"),
        ({"hang_grace_s": 1e-9}, "hang_grace_s: Input should be greater than or equal to 1"),
        ({"hang_grace_s": 10.0**9}, "hang_grace_s: Input should be less than or equal to 2419200"),
        ({"tune_seq_len": 10**12}, "tune_seq_len: Input should be less than or equal to 1048576"),
        ({"cache": "/tmp/cache\x00x"}, "holds a control character"),
    ],
)
def test_out_of_bounds_values_are_config_errors(fields, fragment):
    with pytest.raises(ConfigError, match="Invalid TrainingCompilerConfig") as raised:
        TrainingCompilerConfig(**fields)
    assert fragment in str(raised.value)


def test_a_built_config_refuses_assignment_with_config_error():
    config = TrainingCompilerConfig()
    with pytest.raises(ConfigError, match="TrainingCompilerConfig is frozen: cannot set 'plan'"):
        config.plan = "step"
    with pytest.raises(ConfigError, match="cannot delete 'plan'"):
        del config.plan
    assert config.plan == "auto"


def test_model_validate_raises_config_error_and_accepts_a_good_dict():
    with pytest.raises(ConfigError, match=r"Invalid TrainingCompilerConfig: backend: .*'bogus'"):
        TrainingCompilerConfig.model_validate({"backend": "bogus"})
    with pytest.raises(ConfigError, match="unknown field 'compile'"):
        TrainingCompilerConfig.model_validate_json('{"compile": true}')
    assert TrainingCompilerConfig.model_validate({"plan": "step"}).plan == "step"


def test_bucket_collator_checks_its_arguments_like_the_config():
    from sagemaker_tc import BucketCollator

    with pytest.raises(CollatorArgumentError, match="wraps a collate function"):
        BucketCollator(None)
    with pytest.raises(CollatorArgumentError, match="strictly increasing"):
        BucketCollator(list, buckets=[128, 64])
    with pytest.raises(ConfigError, match="strictly increasing"):
        TrainingCompilerConfig(buckets=[128, 64])
    with pytest.raises(CollatorArgumentError, match="max_length must be positive"):
        BucketCollator(list, max_length=0)
    for pad_token_id in ("0", 1.5, True, None):  # refused when built, not at the first padded batch
        with pytest.raises(CollatorArgumentError, match=rf"BucketCollator\(pad_token_id={pad_token_id!r}\): give"):
            BucketCollator(list, pad_token_id=pad_token_id)
    assert BucketCollator(list, buckets=(32, 64)).buckets == [32, 64]


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"entry_point": 123}, EstimatorArgumentError, "entry_point must be the path of your training script as a"),
        ({"entry_point": "."}, SourceNotFoundError, "is a folder, not a script"),
        ({"output_path": ""}, EstimatorArgumentError, r"output_path='' is empty: give .* or leave output_path out"),
        ({"output_path": "/proc/x"}, EstimatorArgumentError, "output_path '/proc/x' cannot be written"),
        ({"source_dir": ""}, EstimatorArgumentError, "source_dir='' is empty"),
        ({"instance_count": 0}, UnsupportedInstanceTypeError, "positive integer"),
        ({**CLOUD, "instance_count": 10**6}, UnsupportedInstanceTypeError, "more than sagemaker-tc accepts"),
        ({"max_run": 28 * 86400 + 1}, EstimatorArgumentError, "a training job runs at most 28 days"),
        ({"hyperparameters": {f"h{i}": i for i in range(91)}}, HyperparameterError, "which leaves 90"),
        ({"hyperparameters": {"lr": float("nan")}}, HyperparameterError, "cannot be JSON-encoded"),
        ({"environment": {"SM_MODEL_DIR": "/x"}}, EstimatorArgumentError, "'SM_MODEL_DIR' is reserved"),
        ({"environment": {"SAGEMAKER_BASE_DIR": "/x"}}, EstimatorArgumentError, "'SAGEMAKER_BASE_DIR' is reserved"),
        ({"environment": {contract.ENV_SETTINGS: "{}"}}, EstimatorArgumentError, "is reserved: sagemaker-tc sets"),
        ({"environment": {"SM_CHANNEL_TRAIN": "/x"}}, EstimatorArgumentError, "'SM_CHANNEL_TRAIN' is reserved"),
    ],
)
def test_estimator_inputs_are_refused_before_any_work(make, tmp_path, overrides, error, message):
    with pytest.raises(error, match=message):
        make(**overrides)
    assert not (tmp_path / "out").exists()


def test_an_empty_image_uri_is_not_an_image(make):
    with pytest.raises(EstimatorArgumentError, match=r"image_uri='' is empty: give an image URI string"):
        make(**{**CLOUD, "instance_type": "ml.c5.xlarge", "image_uri": ""})


def test_pytorch_estimator_takes_the_same_checks(make):
    with pytest.raises(EstimatorArgumentError, match="'SM_OUTPUT_DATA_DIR' is reserved"):
        make(PyTorch, environment={"SM_OUTPUT_DATA_DIR": "/x"})


def test_valid_edge_inputs_are_accepted(make, tmp_path):
    estimator = make(
        hyperparameters={f"h{i}": i for i in range(90)},
        environment={"TORCH_LOGS": "recompiles", contract.ENV_HANG_GRACE: "60"},
        max_run=28 * 86400,
    )
    assert estimator.max_run == 28 * 86400
    assert not (tmp_path / "out").exists()  # probing the output folder leaves nothing behind
    assert isinstance(make(entry_point="echo.py"), HuggingFace)


def test_a_torchrun_name_in_environment_warns_once(make):
    with pytest.warns(ReservedEnvironmentWarning, match="'RANK' is one torchrun sets") as caught:
        make(environment={"RANK": "0"})
    assert len([w for w in caught if issubclass(w.category, ReservedEnvironmentWarning)]) == 1


def test_malformed_settings_in_the_environment_name_that_variable():
    with pytest.raises(ConfigError, match=rf"^{contract.ENV_SETTINGS} must be JSON"):
        contract.settings_from_environment({contract.ENV_SETTINGS: "{not json"})
    with pytest.raises(ConfigError, match=rf"^{contract.ENV_SETTINGS}.config must be a JSON object"):
        contract.settings_from_environment({contract.ENV_SETTINGS: json.dumps({"config": "x"})})


def test_launch_without_a_script_names_only_the_script(capsys):
    from sagemaker_tc.cli import main

    with pytest.raises(SystemExit) as raised:
        main(["launch"])
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert "the following arguments are required: script" in error and "args" not in error.splitlines()[-1]


def test_bench_out_that_cannot_be_written_is_refused_before_any_benchmark(tmp_path):
    from sagemaker_tc_bench.commands import check_out_folder
    from sagemaker_tc_bench.errors import BenchError

    with pytest.raises(BenchError, match="--out '/proc/x' cannot be written"):
        check_out_folder(Path("/proc/x"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(BenchError, match="is a file"):
        check_out_folder(tmp_path / "file" / "out")
    check_out_folder(tmp_path / "new" / "out")
    assert not (tmp_path / "new").exists()


def test_sdk_side_refusals_need_no_torch(source_dir, tmp_path):
    script = f"""
import sys
sys.modules["torch"] = None  # any import of torch fails
from sagemaker_tc import HuggingFace, TrainingCompilerConfig, ConfigError, EstimatorArgumentError
for fields in ({{"buckets": [10**12]}}, {{"cache": "a\\x00b"}}, {{"batch_size": 10**9}}):
    try:
        TrainingCompilerConfig(**fields)
    except ConfigError:
        pass
for kwargs in ({{"environment": {{"SM_MODEL_DIR": "/x"}}}}, {{"output_path": ""}}, {{"max_run": 10**9}}):
    try:
        HuggingFace("echo.py", source_dir={str(source_dir)!r}, instance_type="local_process",
                    compiler_config=TrainingCompilerConfig(), **kwargs)
    except EstimatorArgumentError:
        pass
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
