"""What a new user's first jobs ran into (the fifth round's follow-ups): a local job refuses what a
SageMaker job refuses (a channel field CreateTrainingJob refuses, an SMTC-era PyTorch version with the
compiler on) before its folder is made; a local channel that is neither a folder nor a file, an
environment key that is not a string and a missing AWS region are named for what they are. Real
``local_process`` estimators of a tiny script; AWS calls (none expected) would go to moto."""

from __future__ import annotations

from types import SimpleNamespace

import boto3
import pytest

from sagemaker_tc import PyTorch, TrainingCompilerConfig, TrainingInput
from sagemaker_tc.errors import ChannelNotFoundError, EstimatorArgumentError, UnsupportedImageError

SCRIPT = "import os, pathlib\npathlib.Path(os.environ['SM_MODEL_DIR'], 'w.txt').write_text('trained')\n"


def estimator(tmp_path, **arguments) -> PyTorch:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(SCRIPT)
    given = {
        "source_dir": str(code),
        "instance_type": "local_process",
        "output_path": str(tmp_path / "out"),
        "compiler_config": TrainingCompilerConfig(enabled=False),
        **arguments,
    }
    return PyTorch("train.py", **given)


def test_a_channel_distribution_sagemaker_refuses_is_refused_locally_before_the_job_folder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    refused = r"S3DataDistributionType='Sharded'.*FullyReplicated, ShardedByS3Key"
    with pytest.raises(ChannelNotFoundError, match=refused):
        estimator(tmp_path).fit({"train": TrainingInput(str(data), distribution="Sharded")}, logs=False)
    with pytest.raises(ChannelNotFoundError, match=r"InputMode='Stream'"):
        estimator(tmp_path).fit({"train": TrainingInput(str(data), input_mode="Stream")}, logs=False)
    assert not (tmp_path / "out").exists()
    job = estimator(tmp_path)
    job.fit({"train": TrainingInput(str(data), distribution="ShardedByS3Key")}, logs=False, job_name="sharded-ok")
    assert (tmp_path / "out" / "sharded-ok" / "output" / "model.tar.gz").is_file()


def test_channel_attribute_names_and_seed_beyond_the_apis_limits_are_refused(tmp_path):
    """Refused when our TrainingInput is built, and at fit() for a channel object built elsewhere
    (SDK v2's TrainingInput keeps the same ``config``)."""
    data = tmp_path / "data"
    data.mkdir()
    cases = {"0 to 16 entries, got 17": [f"a{i}" for i in range(17)], "1 to 256 characters, got 300": ["a" * 300]}
    for message, names in cases.items():
        with pytest.raises(ChannelNotFoundError, match=rf"attribute_names=...\) is not accepted: {message}"):
            TrainingInput(str(data), attribute_names=names)
        source = {"S3DataType": "AugmentedManifestFile", "S3Uri": str(data), "AttributeNames": names}
        elsewhere = SimpleNamespace(config={"DataSource": {"S3DataSource": source}})
        with pytest.raises(ChannelNotFoundError, match=rf"channel 'train': AttributeNames is not accepted: {message}"):
            estimator(tmp_path).fit({"train": elsewhere}, logs=False)
    with pytest.raises(ChannelNotFoundError, match=r"shuffle_config=...\): 1180591620717411303424 .*64-bit seed"):
        TrainingInput(str(data), shuffle_config=2**70)
    assert not (tmp_path / "out").exists()


def test_a_pipe_mode_channel_runs_locally_as_files_and_says_so(tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    estimator(tmp_path).fit({"train": TrainingInput(str(data), input_mode="Pipe")}, logs=False, job_name="piped")
    assert "channel 'train': input_mode='Pipe' applies on SageMaker only" in caplog.text
    assert (tmp_path / "out" / "piped" / "output" / "model.tar.gz").is_file()


def test_a_channel_that_cannot_be_read_is_named(tmp_path):
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    with pytest.raises(ChannelNotFoundError, match=r"channel 'train': '.*loop-a' cannot be read \("):
        estimator(tmp_path).fit({"train": str(tmp_path / "loop-a")}, logs=False)
    assert not (tmp_path / "out").exists()


def test_a_device_as_a_local_channel_is_named_for_what_it_is(tmp_path):
    with pytest.raises(ChannelNotFoundError, match=r"'/dev/null'.* is neither a folder nor a file"):
        estimator(tmp_path).fit({"train": "/dev/null"}, logs=False)
    with pytest.raises(ChannelNotFoundError, match=r"does not exist"):
        estimator(tmp_path).fit({"train": str(tmp_path / "missing")}, logs=False)
    assert not (tmp_path / "out").exists()


def test_an_environment_key_that_is_not_a_string_is_named_as_the_key(tmp_path):
    with pytest.raises(EstimatorArgumentError, match=r"a key is of type int; variable names are strings") as key:
        estimator(tmp_path, environment={1: "secret-value"})
    with pytest.raises(EstimatorArgumentError, match=r"'PORT' has a value of type int") as value:
        estimator(tmp_path, environment={"PORT": 4321})
    assert "secret-value" not in str(key.value) and "4321" not in str(value.value)


SMTC_ERA = [{"framework_version": "1.13", "py_version": "py39"}, {"framework_version": "2.6"}]


@pytest.mark.parametrize("versions", SMTC_ERA)
def test_an_smtc_era_torch_is_refused_locally_with_the_compiler_on_only(tmp_path, versions):
    with pytest.raises(UnsupportedImageError, match=r"framework_version='.*': .*needs PyTorch >= 2\.7"):
        estimator(tmp_path, compiler_config=TrainingCompilerConfig(), **versions)
    off = estimator(tmp_path, **versions)  # the compiler off: the versions are the user's business
    assert off.framework_version == versions["framework_version"]
    untested = estimator(tmp_path, compiler_config=TrainingCompilerConfig(), framework_version="2.99")
    assert untested.framework_version == "2.99"  # local_process runs this machine's torch


@pytest.fixture
def no_region(tmp_path, monkeypatch):
    """An AWS configuration that names no region (no variables, an empty config file, no default session)."""
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "aws-config"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


def test_an_empty_region_is_no_region(tmp_path, no_region, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "")
    with pytest.raises(EstimatorArgumentError, match=r"cannot attach to training job 'my-job': no AWS region"):
        PyTorch.attach("my-job")


def test_a_version_that_is_no_number_names_its_argument(tmp_path):
    with pytest.raises(UnsupportedImageError, match=r"^framework_version: 'latest' is not a version number"):
        estimator(tmp_path, compiler_config=TrainingCompilerConfig(), framework_version="latest")


def test_attach_and_a_sagemaker_fit_without_a_region_say_what_to_set(tmp_path, no_region):
    with pytest.raises(EstimatorArgumentError, match=r"cannot attach to training job 'my-job': no AWS region") as error:
        PyTorch.attach("my-job")
    assert "a local job's files are in its output_path" in str(error.value)
    cloud = estimator(
        tmp_path,
        instance_type="ml.g5.xlarge",
        role="arn:aws:iam::111122223333:role/SageMakerRole",
        output_path="s3://bucket/out",
        framework_version="2.8",
        py_version="py312",
    )
    with pytest.raises(EstimatorArgumentError, match=r"^no AWS region is configured.*AWS_DEFAULT_REGION"):
        cloud.fit("s3://bucket/data", wait=False)
