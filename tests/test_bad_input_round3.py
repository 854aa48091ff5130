"""Bad inputs, third round (issue 33): no checkpoint sync, cache or archive touches what it does not
own, no secret value in an error, and each refusal comes before any work."""

from __future__ import annotations

import pytest

from sagemaker_tc import EstimatorArgumentError

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CLOUD = {"instance_type": "ml.g5.xlarge", "role": ROLE, "image_uri": "img", "output_path": "s3://tc-bucket/jobs"}


@pytest.mark.parametrize(
    "local_path",
    ["/opt/ml/input/data/train", "/opt/ml/input", "/opt/ml/code", "/opt/ml/model/ck", "/opt/ml/output", "/opt/ml"],
)
@pytest.mark.parametrize("cloud", [False, True])
def test_checkpoint_folder_may_not_overlap_the_jobs_channels_code_model_or_output(make, tmp_path, local_path, cloud):
    where = {"checkpoint_s3_uri": "s3://tc-bucket/ck", **CLOUD} if cloud else {"checkpoint_s3_uri": str(tmp_path / "c")}
    with pytest.raises(EstimatorArgumentError, match=r"checkpoint_local_path=.*overlaps the job's /opt/ml/"):
        make(checkpoint_local_path=local_path, **where)


def test_checkpoint_location_may_not_be_the_output_path_or_source_dir(make, tmp_path, source_dir):
    with pytest.raises(EstimatorArgumentError, match=r"is or holds the output folder"):
        make(checkpoint_s3_uri=str(tmp_path / "out"))
    with pytest.raises(EstimatorArgumentError, match=r"is or holds the output folder"):
        make(checkpoint_s3_uri=str(tmp_path))
    with pytest.raises(EstimatorArgumentError, match=r"is or holds source_dir"):
        make(checkpoint_s3_uri=f"file://{source_dir}")
    with pytest.raises(EstimatorArgumentError, match=r"is output_path"):
        make(checkpoint_s3_uri="s3://tc-bucket/jobs/", **CLOUD)
    make(checkpoint_s3_uri=str(tmp_path / "out-checkpoints"))  # a folder of its own is fine


@pytest.mark.parametrize("where", ["is", "lies inside", "holds"])
def test_a_checkpoint_location_overlapping_a_channel_is_refused_before_the_job(make, tmp_path, where):
    """The sync copies both ways: a location that is, lies inside or holds a fit() channel's folder
    would write checkpoints into the user's data. Refused at fit(), before any job folder is made."""
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    (data / "rows.tsv").write_text("sentence\tlabel\n")
    location = {"is": data, "lies inside": data / "ckpt", "holds": tmp_path / "data"}[where]
    estimator = make(checkpoint_s3_uri=str(location))
    with pytest.raises(EstimatorArgumentError, match=rf"{where} the 'train' channel's folder"):
        estimator.fit({"train": str(data)})
    assert sorted(path.name for path in data.rglob("*")) == ["rows.tsv"]  # the data is as it was
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("file", r"cannot be a checkpoint folder: '.*file' is a file"),
        ("/proc/ck", r"cannot be a checkpoint folder: nothing can be created in '/proc'"),
        ("file://ckpt", r"names the host 'ckpt'"),
        ("ftp://host/ck", r"local_process takes a local folder, a file:// URI or an s3:// URI"),
        ("gs://bucket/ck", r"local_process takes a local folder"),
        ("s3://", r"breaks S3's naming rules"),
        ("s3://Bad_Bucket/x", r"breaks S3's naming rules"),
    ],
)
def test_checkpoint_location_that_cannot_be_a_folder_is_refused_at_construction(make, tmp_path, uri, message):
    (tmp_path / "file").write_text("x")
    uri = str(tmp_path / "file") if uri == "file" else uri
    with pytest.raises(EstimatorArgumentError, match=message):
        make(checkpoint_s3_uri=uri)
    assert not (tmp_path / "out").exists()


SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "environment",
    [
        {"AWS_SECRET_ACCESS_KEY": SECRET, "PORT": 8080},
        {"AWS_SECRET_ACCESS_KEY": SECRET, 7: "x"},
        [("AWS_SECRET_ACCESS_KEY", SECRET)],
    ],
)
def test_an_environment_error_names_the_key_and_type_never_a_value(make, environment):
    with pytest.raises(EstimatorArgumentError, match=r"dict of str -> str") as caught:
        make(environment=environment)
    assert SECRET not in str(caught.value)


def test_a_hyperparameter_warning_never_echoes_the_value(make):
    from sagemaker_tc import HyperparameterWarning

    with pytest.warns(HyperparameterWarning) as caught:
        make(hyperparameters={"db_password": "-" + SECRET})
    assert all(SECRET not in str(item.message) for item in caught)


@pytest.mark.parametrize(
    "environment", [{"AWS_SECRET_ACCESS_KEY": SECRET, "PORT": 8080}, [("AWS_SECRET_ACCESS_KEY", SECRET)]]
)
def test_modeltrainer_argument_errors_never_echo_an_environment_value(environment):
    from sagemaker_tc import ModelTrainer
    from sagemaker_tc.errors import ModelTrainerArgumentError

    with pytest.raises(ModelTrainerArgumentError) as caught:
        ModelTrainer(training_image="img", role=ROLE, environment=environment)
    assert "environment" in str(caught.value) and SECRET not in str(caught.value)


class _Channel:
    def __init__(self, config):
        self.config = config


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (_Channel({"DataSource": {}}), r"holds nothing; it takes exactly one of 'S3DataSource'"),
        (_Channel({"DataSource": {"S3DataSource": {}}}), r"needs 'S3Uri'"),
        (_Channel({"DataSource": {"S3DataSource": {"S3Uri": "s3://tc-bucket/x"}}}), r"needs 'S3DataType'"),
        (_Channel({"DataSource": {"FileSystemDataSource": {"FileSystemId": "fs-1"}}}), r"needs 'FileSystemType'"),
        ("s3://", r"is not an S3 URI"),
        ("s3:///k", r"is not an S3 URI"),
        ("s3://Bad_Bucket/x", r"is not an S3 URI"),
    ],
)
def test_a_malformed_cloud_channel_is_refused_before_the_source_upload(make, value, message):
    from sagemaker_tc import ChannelNotFoundError
    from sagemaker_tc.sdk.channels import check_channels

    with pytest.raises(ChannelNotFoundError, match=message):
        check_channels({"train": value}, cloud=True)
    with pytest.raises(ChannelNotFoundError):
        make(**CLOUD).fit({"train": value}, wait=False)  # refused before any AWS call


@pytest.mark.parametrize("name", ["db_password", "HF_TOKEN", "token", "api_key", "aws_secret", "passwd"])
def test_a_hyperparameter_named_like_a_secret_is_warned_about(make, name):
    from sagemaker_tc import HyperparameterWarning

    with pytest.warns(
        HyperparameterWarning, match=rf"hyperparameter '{name}' looks like a secret.*environment variable"
    ):
        make(hyperparameters={name: "x"})


def test_ordinary_hyperparameter_names_are_not_taken_for_secrets(make):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(hyperparameters={"max_tokens": 8, "tokenizer_name": "bert", "key_column": "id", "epochs": 1})


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"environment": {"DEBUG\n": "1"}}, "EstimatorArgumentError"),
        ({"base_job_name": "job\n"}, "EstimatorArgumentError"),
        ({"role": ROLE + "\n", **{k: v for k, v in CLOUD.items() if k != "role"}}, "EstimatorArgumentError"),
        (
            {"role": "arn:aws:iam::123456789012:role/Rôle", **{k: v for k, v in CLOUD.items() if k != "role"}},
            "EstimatorArgumentError",
        ),  # at construction (issue 43)
        ({**CLOUD, "instance_type": "ml.g5.xlarge\n"}, "UnsupportedInstanceTypeError"),
        ({**CLOUD, "output_path": "s3://tc-bucket\n/jobs"}, "EstimatorArgumentError"),
        ({**CLOUD, "tags": [{"Key": "team", "Value": "ml\n"}]}, "EstimatorArgumentError"),
        ({**CLOUD, "output_kms_key": "key\n"}, "EstimatorArgumentError"),
    ],
)
def test_a_trailing_newline_passes_no_name_check(make, overrides, error):
    import sagemaker_tc

    if error == "fit":  # the role is checked at fit(), before any AWS call
        with pytest.raises(EstimatorArgumentError, match="role must be a full IAM role ARN"):
            make(**overrides).fit(wait=False)
        return
    with pytest.raises(getattr(sagemaker_tc, error)):
        make(**overrides)


@pytest.mark.parametrize("name", ["x\n", "x\t", "x\x00"])
def test_a_job_name_with_a_control_character_is_refused(make, tmp_path, name):
    with pytest.raises(EstimatorArgumentError, match="job_name .* is not accepted"):
        make().fit(job_name=name, wait=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["train\n", "train\t"])
def test_a_channel_name_with_a_control_character_is_refused(tmp_path, name):
    from sagemaker_tc import ChannelNotFoundError
    from sagemaker_tc.sdk.channels import check_channels

    with pytest.raises(ChannelNotFoundError):
        check_channels({name: str(tmp_path)}, cloud=False)


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ([{"Key": "aws:team", "Value": "x"}], r"starts with 'aws:'"),
        ({"AWS:Team": "x"}, r"starts with 'aws:'"),
        ([{"Key": "team", "Value": "a"}, {"Key": "team", "Value": "b"}], r"'team' is given twice"),
        ([{"Key": "team", "Value": "a", "Propagate": True}], r"'Key' and 'Value' only.*Propagate"),
    ],
)
def test_tags_aws_will_refuse_are_refused_at_construction(make, tags, message):
    with pytest.raises(EstimatorArgumentError, match=message):
        make(**CLOUD, tags=tags)


@pytest.mark.parametrize(
    "definition",
    [
        {"Name": "", "Regex": "loss=(.*)"},
        {"Name": "loss", "Regex": ""},
        {"Name": "x" * 256, "Regex": "a(.*)"},
        {"Name": "loss", "Regex": "a" * 501 + "(.*)"},
        {"Name": "loss", "Regex": 5},
    ],
)
def test_metric_definitions_outside_the_apis_lengths_are_refused(make, definition):
    with pytest.raises(EstimatorArgumentError, match=r"metric_definitions: (Name|Regex) must be a string of 1-"):
        make(**CLOUD, metric_definitions=[definition])


def test_the_documented_checkpoints_spelling_works_after_import_sagemaker_tc(tmp_path):
    import subprocess
    import sys

    code = (
        "import sagemaker_tc, sys\n"
        f"with sagemaker_tc.checkpoints.writing({str(tmp_path)!r}, 3) as target:\n"
        "    (target / 'state').write_text('x')\n"
        f"print(sagemaker_tc.checkpoints.latest_complete({str(tmp_path)!r}).name)\n"
        "assert 'torch' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout.strip()) == (0, "checkpoint-3"), result.stderr


@pytest.mark.parametrize("step", [1.5, True, "3", -1])
def test_a_checkpoint_step_that_is_not_an_int_is_refused(tmp_path, step):
    from sagemaker_tc import CheckpointArgumentError, checkpoints

    with pytest.raises(CheckpointArgumentError, match=r"step=.* is an int >= 0"):
        with checkpoints.writing(tmp_path, step):
            pass
    assert list(tmp_path.iterdir()) == []


def test_latest_complete_never_follows_a_link_nor_takes_a_name_with_a_newline(tmp_path):
    from sagemaker_tc import checkpoints

    folder, outside = tmp_path / "ckpt", tmp_path / "elsewhere"
    with checkpoints.writing(folder, 2):
        pass
    with checkpoints.writing(outside, 9):
        pass
    (folder / "checkpoint-9").symlink_to(outside / "checkpoint-9")
    with checkpoints.writing(folder, 5):
        pass
    (folder / "checkpoint-5").rename(folder / "checkpoint-7\n")
    assert checkpoints.latest_complete(folder) == folder / "checkpoint-2"


@pytest.mark.parametrize("cache", ["file", "/dev/null", "/proc/sagemaker-tc-cache", " /tmp/x"])
def test_a_local_cache_that_cannot_be_a_folder_is_refused_at_construction(make, tmp_path, cache):
    from sagemaker_tc import TrainingCompilerConfig

    (tmp_path / "file").write_text("x")
    cache = str(tmp_path / "file") if cache == "file" else cache
    with pytest.raises(EstimatorArgumentError, match=r"compiler_config.cache=.*(cannot be a cache folder|whitespace)"):
        make(compiler_config=TrainingCompilerConfig(cache=cache))


@pytest.mark.parametrize("value", ["soon", "-1", "0", "inf"])
def test_a_bad_hang_grace_in_the_environment_is_refused_at_construction(make, value):
    with pytest.raises(EstimatorArgumentError, match=r"SM_TC_HANG_GRACE_S=.* is not a grace period"):
        make(environment={"SM_TC_HANG_GRACE_S": value})


@pytest.mark.parametrize("wait", ["no", 0, None])
def test_fit_wait_must_be_a_bool(make, tmp_path, wait):
    with pytest.raises(EstimatorArgumentError, match=r"wait must be True or False"):
        make().fit(wait=wait)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("checkpoint", ["", "missing", "file", None])
def test_resume_from_a_path_that_is_not_a_checkpoint_folder_is_refused(tmp_path, monkeypatch, checkpoint):
    from sagemaker_tc import CheckpointArgumentError, resume_from

    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointArgumentError, match=r"resume_from\(.*\): give the path of an existing checkpoint"):
        resume_from(checkpoint)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"attribute_names": "label"}, r"attribute_names=\.\.\.\) is a list of strings, got str"),
        ({"attribute_names": [1]}, r"is a list of strings"),
        ({"shuffle_config": "7"}, r"takes an int seed.*got str"),
        ({"shuffle_config": True}, r"takes an int seed.*got bool"),
    ],
)
def test_training_input_arguments_of_the_wrong_type_are_refused(arguments, message):
    from sagemaker_tc import ChannelNotFoundError, TrainingInput

    with pytest.raises(ChannelNotFoundError, match=message):
        TrainingInput("s3://tc-bucket/data", s3_data_type="AugmentedManifestFile", **arguments)


def test_resume_auto_skips_a_checkpoint_whose_trainer_state_is_corrupt(tmp_path, caplog):
    from sagemaker_tc import checkpoints
    from sagemaker_tc.compiler.resume import checkpoint_to_resume

    for step, state in ((10, '{"global_step": 10}'), (20, '{"global_st')):
        with checkpoints.writing(tmp_path, step) as target:
            (target / "trainer_state.json").write_text(state)
    assert checkpoint_to_resume(None, tmp_path, "auto") == tmp_path / "checkpoint-10"
    assert checkpoint_to_resume(True, tmp_path, None) == tmp_path / "checkpoint-10"
    assert "checkpoint-20: its trainer_state.json is not a JSON object" in caplog.text


def test_resume_auto_with_the_compiler_off_is_warned_about():
    from sagemaker_tc import ConfigWarning, TrainingCompilerConfig

    with pytest.warns(ConfigWarning, match=r"enabled=False, resume='auto'\): enabled=False wins"):
        TrainingCompilerConfig(enabled=False, resume="auto")
