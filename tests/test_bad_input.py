"""Every bad input is refused up front (issue 15): a named error before any work starts (no job
folder, no upload), naming what was wrong and what is accepted; or, where the input is legal but
probably not meant, a warning that names it."""

from __future__ import annotations

import json
import warnings

import pytest
from conftest import warned_from

from sagemaker_tc import (
    ChannelNotFoundError,
    ConfigError,
    ConfigWarning,
    CpuInstanceWarning,
    EstimatorArgumentError,
    HuggingFace,
    HyperparameterError,
    HyperparameterWarning,
    PyTorch,
    TrainingCompilerConfig,
    UnsupportedImageError,
    UnsupportedInstanceTypeError,
)
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.modes.request import request_for

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CLOUD = {"instance_type": "ml.g5.xlarge", "role": ROLE, "image_uri": "img", "output_path": "s3://tc-bucket/jobs"}


def settings_of(estimator) -> dict:
    """The compiler settings as the job receives them (the wire format's JSON)."""
    output = local_path(estimator.output_path).as_uri()
    request = request_for(estimator.spec, "job-1", {}, "/tmp/sourcedir.tar.gz", output_path=output).to_api_dict()
    return json.loads(request["HyperParameters"]["sagemaker_training_compiler_settings"])


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        # Hyperparameter names become --NAME and SM_HP_NAME in the job.
        ({"hyperparameters": {"epochs=100": 1}}, HyperparameterError, r"name 'epochs=100' is not accepted.*'='"),
        ({"hyperparameters": {"learning rate": 1}}, HyperparameterError, r"name 'learning rate' is not accepted"),
        ({"hyperparameters": {"--lr": 1}}, HyperparameterError, r"name '--lr' is not accepted.*start with '-'"),
        ({"hyperparameters": {"-": 1}}, HyperparameterError, r"name '-' is not accepted"),
        ({"hyperparameters": {"tab\tname": 1}}, HyperparameterError, r"is not accepted"),
        # A dict reaches the script's command line as 'k=v,...' or a Python repr, never JSON.
        ({"hyperparameters": {"optim": {"lr": 1}}}, HyperparameterError, r"'optim' is or holds a dict.*json.dumps"),
        ({"hyperparameters": {"layers": [1, {"a": 2}]}}, HyperparameterError, r"'layers' is or holds a dict"),
        # Environment: CreateTrainingJob's name rule in every mode, no NUL byte anywhere.
        ({"environment": {"A=B": "1"}}, EstimatorArgumentError, r"variable name 'A=B' is not accepted"),
        ({"environment": {"1ST": "1"}}, EstimatorArgumentError, r"variable name '1ST' is not accepted"),
        ({"environment": {"": "1"}}, EstimatorArgumentError, r"variable name '' is not accepted"),
        ({"environment": {"X": "a\x00b"}}, EstimatorArgumentError, r"'X' holds a NUL byte"),
        ({**CLOUD, "environment": {"X": "v" * 513}}, EstimatorArgumentError, r"at most 512 characters"),
        (
            {**CLOUD, "environment": {f"V{i}": "1" for i in range(101)}},
            EstimatorArgumentError,
            r"101 variables; SageMaker training jobs take at most 100",
        ),
        # Arguments of the wrong type are named.
        ({"source_dir": 123}, EstimatorArgumentError, r"source_dir must be a folder path, got int 123"),
        ({"base_job_name": 123}, EstimatorArgumentError, r"base_job_name must be a string, got int"),
        ({"output_path": 123}, EstimatorArgumentError, r"output_path must be a folder path or an s3:// URI, got int"),
        ({"role": 42}, EstimatorArgumentError, r"role must be an IAM role ARN string"),
        ({"transformers_version": 4.56}, EstimatorArgumentError, r"transformers_version must be a version string"),
        ({"allow_symlinks_outside_source_dir": "yes"}, EstimatorArgumentError, r"must be True or False"),
        # Limits refused before any upload.
        ({**CLOUD, "volume_size": "big"}, EstimatorArgumentError, r"volume_size must be a whole number of GB"),
        ({"volume_size": -1}, EstimatorArgumentError, r"volume_size must be a whole number of GB"),
        ({"max_run": True}, EstimatorArgumentError, r"max_run must be a positive number of seconds, got True"),
        # local_process runs every host on this machine.
        ({"instance_count": 200}, UnsupportedInstanceTypeError, r"would start 200 training processes.*at most 8"),
        # S3 URIs are checked where they are given.
        ({**CLOUD, "output_path": "s3://My_Bucket/out"}, EstimatorArgumentError, r"bucket name 'My_Bucket'"),
        (
            {**CLOUD, "checkpoint_s3_uri": "s3://a/ckpt"},
            EstimatorArgumentError,
            r"checkpoint_s3_uri='s3://a/ckpt' is not an S3 URI",
        ),
        # A local compile cache is refused where the job cannot see it.
        (
            {**CLOUD, "compiler_config": TrainingCompilerConfig(cache="cache")},
            EstimatorArgumentError,
            r"cache='cache' is a local folder.*SageMaker training job runs on other machines.*s3://",
        ),
        (
            {"instance_type": "local", "image_uri": "img", "compiler_config": TrainingCompilerConfig(cache="/c")},
            EstimatorArgumentError,
            r"Docker local mode mounts only the code and the channels",
        ),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, tmp_path, overrides, error, message):
    with pytest.raises(error, match=message):
        make(**overrides)
    assert not (tmp_path / "out").exists()


def test_every_unsupported_argument_is_named_at_once_with_what_to_do(make):
    with pytest.raises(EstimatorArgumentError) as raised:
        make(
            instance_groups=[{"InstanceGroupName": "a"}],
            git_config={"repo": "r"},
            instance_typ="ml.g5.xlarge",
            tensorflow_version="2.11",
        )
    message = str(raised.value)
    assert message.startswith(
        "HuggingFace does not take 4 of the arguments given: instance_groups (heterogeneous clusters are not supported"
    )
    assert "git_config (check the repository out locally and pass its folder as source_dir)" in message
    assert "instance_typ (unknown: did you mean instance_type?)" in message
    assert "tensorflow_version (sagemaker-tc compiles PyTorch" in message
    assert "The arguments it takes: entry_point, transformers_version, pytorch_version, source_dir" in message
    with pytest.raises(EstimatorArgumentError, match="HuggingFace takes transformers_version and pytorch_version"):
        make(framework_version="2.8")
    with pytest.raises(EstimatorArgumentError, match="PyTorch takes framework_version"):
        make(PyTorch, transformers_version="4.56")


def test_a_flag_like_value_is_sent_with_a_warning_naming_it(make, source_dir):
    with pytest.warns(HyperparameterWarning, match=r"'v' has a value starting with '-'.*read as an option") as caught:
        estimator = HuggingFace(
            "echo.py", source_dir=str(source_dir), instance_type="local_process", hyperparameters={"v": "--help"}
        )
    assert warned_from(caught, HyperparameterWarning) == [__file__]  # points at the user's line
    assert estimator.hyperparameters()["v"] == '"--help"'
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(hyperparameters={"lr": "-1e-05", "offset": "-3", "name": "a-b"})  # numbers and inner dashes are fine


@pytest.mark.parametrize("job_name", ["../escape", "/tmp/absolute", "bad name", "", 7])
@pytest.mark.parametrize("instance_type", ["local_process", "local"])
def test_job_names_follow_sagemakers_rule_in_every_mode(make, tmp_path, job_name, instance_type):
    estimator = make(instance_type=instance_type, image_uri="img")
    with pytest.raises(EstimatorArgumentError, match=r"job_name .* is not accepted: 1-63 letters, digits and '-'"):
        estimator.fit(None, job_name=job_name)
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape").exists()


@pytest.mark.parametrize("inputs", [{"train": ""}, {"train": "   "}, ""])
def test_an_empty_channel_is_refused(make, tmp_path, inputs):
    with pytest.raises(ChannelNotFoundError, match=r"channel 'train(ing)?': the path is empty"):
        make().fit(inputs)
    assert not (tmp_path / "out").exists()


def test_output_path_that_is_a_file_is_refused(make, tmp_path):
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(EstimatorArgumentError, match=r"output_path '.*notes.txt' cannot be a folder: .* is a file"):
        make(output_path=str(tmp_path / "notes.txt"))
    with pytest.raises(EstimatorArgumentError, match=r"cannot be a folder: '.*notes.txt' is a file"):
        make(output_path=str(tmp_path / "notes.txt" / "out"))


def test_a_relative_cache_is_resolved_against_the_callers_folder(make, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    estimator = make(compiler_config=TrainingCompilerConfig(cache="caches/bert"))
    assert estimator.compiler_config.cache == str(tmp_path / "caches" / "bert")
    assert settings_of(estimator)["config"]["cache"] == str(tmp_path / "caches" / "bert")  # absolute on the wire
    s3 = make(**CLOUD, compiler_config=TrainingCompilerConfig(cache="s3://tc-bucket/cache"))
    assert s3.compiler_config.cache == "s3://tc-bucket/cache"


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        ("s3:/bucket/p", r"not an s3://bucket/prefix URI: it must start with 's3://'"),
        ("S3://bucket/p", r"accepted: a local folder or an s3://bucket/prefix URI"),
        ("s3://my bucket/p", r"the bucket name 'my bucket' breaks S3's naming rules"),
        ("s3://ab/p", r"the bucket name 'ab' breaks"),
    ],
)
def test_malformed_s3_cache_uris_are_refused(cache, message):
    with pytest.raises(ConfigError, match=message):
        TrainingCompilerConfig(cache=cache)


def test_config_fields_that_do_nothing_together_say_which_wins():
    with pytest.warns(ConfigWarning, match=r"enabled=False wins.*debug mode does nothing") as caught:
        TrainingCompilerConfig(enabled=False, debug=True)
    assert warned_from(caught, ConfigWarning) == [__file__]
    with pytest.warns(ConfigWarning, match=r"backend='eager' wins.*mode does nothing"):
        TrainingCompilerConfig(backend="eager", mode="max-autotune")
    with pytest.raises(ConfigError, match=r"batch_size_multiple: Value error, must be at most max_batch_size \(8\)"):
        TrainingCompilerConfig(batch_size_multiple=16, max_batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainingCompilerConfig(enabled=False, backend="eager", batch_size_multiple=8, max_batch_size=8)


def test_cpu_instances_have_one_story(make):
    """An ml.* CPU type runs where a CPU image exists (PyTorch: a warning), and is refused at
    construction where none does (the Hugging Face DLCs are GPU-only), not at fit()."""
    with pytest.raises(UnsupportedImageError, match=r"HuggingFace on ml.m5.xlarge: the stock huggingface .*GPU-only"):
        make(**{**CLOUD, "image_uri": None, "instance_type": "ml.m5.xlarge"})
    with pytest.raises(UnsupportedImageError, match=r"HuggingFace on local: .*GPU-only"):
        make(instance_type="local")
    with pytest.warns(CpuInstanceWarning):
        assert make(**{**CLOUD, "instance_type": "ml.m5.xlarge"}).image_uri == "img"  # your own image: accepted
    with pytest.warns(CpuInstanceWarning):
        pytorch = make(
            PyTorch,
            **{**CLOUD, "image_uri": None, "instance_type": "ml.m5.xlarge"},
            framework_version="2.8",
            py_version="py312",
        )
    assert pytorch.training_image_uri("us-east-1").endswith("pytorch-training:2.8-cpu-py312")


def test_full_versions_are_accepted(make):
    estimator = make(
        **{**CLOUD, "image_uri": None}, transformers_version="4.56.0", pytorch_version="2.8.0", py_version="py312"
    )
    image = estimator.training_image_uri("us-east-1")
    assert "huggingface-pytorch-training:2.8.0-transformers4.56.2-gpu-py312" in image  # the DLC for 4.56
    pytorch = make(PyTorch, **{**CLOUD, "image_uri": None}, framework_version="2.8.1", py_version="py312")
    assert pytorch.training_image_uri("us-east-1").endswith("pytorch-training:2.8-gpu-py312")


def test_training_image_uri_takes_the_default_region_as_sdk_v2_does(monkeypatch, tmp_path):
    """SDK v2's ``training_image_uri(region=None)``: without a SageMaker session, the AWS default region."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    (tmp_path / "train.py").write_text("")
    local = PyTorch(
        "train.py", source_dir=str(tmp_path), instance_type="local_process", framework_version="2.8", py_version="py312"
    )
    assert local.training_image_uri().startswith("763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.8-")
    assert ".us-east-1." in local.training_image_uri("us-east-1")


@pytest.mark.parametrize(
    ("versions", "message"),
    [
        ({"transformers_version": "4.21.1", "pytorch_version": "2.8"}, r"'4.21.1' has no Hugging Face training image"),
        ({"transformers_version": "4.49", "pytorch_version": "2.8"}, r"'4.49' has no image with pytorch_version='2.8'"),
        ({"transformers_version": "4.21.1", "pytorch_version": "1.11"}, r"needs PyTorch >= 2.7"),
    ],
)
def test_smtc_versions_get_the_list_of_what_is_supported(make, versions, message):
    """SMTC's versions: with the compiler on they are refused when built (below the floor, or no tested
    stack); with it off, the image lookup lists the DLCs that exist."""
    with pytest.raises(UnsupportedImageError, match=r"needs PyTorch >= 2.7|matches no tested sagemaker-tc stack"):
        make(**{**CLOUD, "image_uri": None}, py_version="py38", **versions)
    off = {**CLOUD, "image_uri": None, "compiler_config": TrainingCompilerConfig(enabled=False)}
    estimator = make(**off, py_version="py38", **versions)
    with pytest.raises(UnsupportedImageError, match=message) as raised:
        estimator.training_image_uri("us-east-1")
    text = str(raised.value)
    assert "version_aliases" not in text and "4.4.2" not in text and "4.46" not in text
    if "has no" in text:
        assert "PyTorch >= 2.7" in text or "supported: transformers 4.55 with PyTorch 2.7" in text
        assert "transformers 4.56 with PyTorch 2.8" in text
