"""Bad inputs, third round, re-measured (issue 33): what the closing count still found silently
accepted, each refused before any work."""

from __future__ import annotations

import pytest

from sagemaker_tc import ConfigError, EstimatorArgumentError, TrainingCompilerConfig

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CLOUD = {
    "instance_type": "ml.g5.xlarge",
    "role": ROLE,
    "transformers_version": "4.56",
    "pytorch_version": "2.8",
    "py_version": "py312",
    "output_path": "s3://tc-bucket/jobs",
}


@pytest.mark.parametrize(
    ("overrides", "cloud"),
    [
        ({"output_path": "out\n"}, False),
        ({"checkpoint_s3_uri": "ck\t"}, False),
        ({"checkpoint_s3_uri": "s3://tc-bucket/ck\n"}, True),
        ({"checkpoint_s3_uri": "s3://tc-bucket/ck", "checkpoint_local_path": "/opt/ml/checkpoints\n"}, True),
        ({"output_path": "s3://tc-bucket/jobs\r"}, True),
    ],
)
def test_a_path_or_uri_with_a_control_character_is_refused(make, tmp_path, overrides, cloud):
    if not cloud and "output_path" in overrides:
        overrides = {"output_path": str(tmp_path / overrides["output_path"])}
    with pytest.raises(EstimatorArgumentError, match=r"control character"):
        make(**({**CLOUD, **overrides} if cloud else overrides))
    assert not (tmp_path / "out\n").exists()


def test_a_cache_with_a_control_character_is_refused():
    with pytest.raises(ConfigError, match=r"control character"):
        TrainingCompilerConfig(cache="/tmp/cache\n")
    with pytest.raises(ConfigError, match=r"control character"):
        TrainingCompilerConfig(cache="s3://tc-bucket/cache\n")


def test_a_metric_name_with_a_control_character_is_refused(make):
    with pytest.raises(EstimatorArgumentError, match=r"no control character"):
        make(metric_definitions=[{"Name": "loss\n", "Regex": "loss=(.*)"}])


def test_a_channel_uri_with_a_control_character_is_refused_before_the_upload(make):
    estimator = make(**CLOUD)
    with pytest.raises(EstimatorArgumentError, match=r"control character"):
        estimator.fit({"train": "s3://tc-bucket/train\n"}, wait=False)


def test_a_cloud_job_with_no_storage_volume_is_refused(make):
    with pytest.raises(EstimatorArgumentError, match=r"volume_size.*VolumeSizeInGB"):
        make(volume_size=0, **CLOUD)
    from sagemaker_tc import JobSettingWarning

    with pytest.warns(JobSettingWarning, match=r"volume_size=0 would be refused on SageMaker .*VolumeSizeInGB"):
        make(volume_size=0)  # local modes only record it, and say SageMaker would refuse it


def test_more_channels_than_a_sagemaker_job_takes_are_refused_before_the_upload(make):
    from sagemaker_tc import ChannelNotFoundError

    estimator = make(**CLOUD)
    with pytest.raises(ChannelNotFoundError, match=r"21 channels; a SageMaker training job takes at most 20"):
        estimator.fit({f"c{i}": "s3://tc-bucket/x" for i in range(21)}, wait=False)


def test_a_local_job_with_more_channels_than_sagemaker_takes_runs_and_says_so(tmp_path):
    from sagemaker_tc import JobSettingWarning
    from sagemaker_tc.sdk.channels import check_channels

    inputs = {f"c{i}": str(tmp_path) for i in range(21)}
    with pytest.warns(JobSettingWarning, match=r"inputs \(a list of 21\) would be refused on SageMaker"):
        channels = check_channels(inputs, cloud=False)
    assert len(channels) == 21


# --- A local compile cache apart from the job's folders -------------------------------------------


@pytest.mark.parametrize(
    ("cache", "checkpoint", "message"),
    [
        ("out", None, r"is the output folder"),
        (".", None, r"holds the output folder"),  # tmp_path holds out/ (and src/)
        ("src", None, r"is source_dir"),
        ("ck", "ck", r"is the checkpoint location"),
        ("ck/cache", "ck", r"lies inside the checkpoint location"),
        ("cache", "cache/ck", r"holds the checkpoint location"),
    ],
)
def test_a_cache_overlapping_the_jobs_folders_is_refused(make, tmp_path, cache, checkpoint, message):
    extra = {"checkpoint_s3_uri": str(tmp_path / checkpoint)} if checkpoint else {}
    with pytest.raises(EstimatorArgumentError, match=rf"compiler_config.cache=.* {message} .*of its own"):
        make(compiler_config=TrainingCompilerConfig(cache=str(tmp_path / cache)), **extra)


def test_a_cache_inside_source_dir_or_the_output_folder_is_accepted_and_never_packed(make, tmp_path):
    from sagemaker_tc.sdk.source_tree import source_entries

    for cache in (tmp_path / "out" / "cache", tmp_path / "src" / "cache"):
        config = TrainingCompilerConfig(cache=str(cache))
        estimator = make(compiler_config=config, checkpoint_s3_uri=str(tmp_path / "ck"))
        assert estimator.compiler_config.cache == str(cache)
    (tmp_path / "src" / "cache").mkdir()  # the last estimator's cache
    (tmp_path / "src" / "cache" / "meta.json").write_text("{}")
    names = [entry.arcname for entry in source_entries(estimator.source.root, excluded=estimator.source.excluded)]
    assert "echo.py" in names and not any(name.startswith("cache") for name in names)


@pytest.mark.parametrize("cache", ["root", "src", "ck", "ck/cache"])
def test_a_model_trainer_cache_overlapping_its_folders_is_refused(source_dir, tmp_path, cache):
    from sagemaker.core.training.configs import CheckpointConfig, Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    from sagemaker_tc import ModelTrainer

    with pytest.raises(EstimatorArgumentError, match=r"compiler_config.cache=.*(is|lies inside) (the|source_dir)"):
        ModelTrainer(
            training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312",
            source_code=SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
            compute=Compute(instance_type="local_process"),
            training_mode=Mode.LOCAL_CONTAINER,
            local_container_root=str(tmp_path / "root"),
            checkpoint_config=CheckpointConfig(s3_uri=str(tmp_path / "ck")),
            compiler_config=TrainingCompilerConfig(cache=str(tmp_path / cache)),
        )


# --- checkpoints.writing / latest_complete check their folder -------------------------------------


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        (None, r"writing\(folder=\.\.\.\) got NoneType"),
        (5, r"writing\(folder=\.\.\.\) got int"),
        ("", r"writing\(folder=''\)"),
        ("/proc/sagemaker-tc-ck", r"writing\(folder='/proc/sagemaker-tc-ck'\) cannot hold checkpoints: nothing can"),
    ],
)
def test_writing_refuses_a_folder_that_cannot_hold_checkpoints(folder, message):
    from sagemaker_tc.checkpoints import writing
    from sagemaker_tc.errors import CheckpointArgumentError

    with pytest.raises(CheckpointArgumentError, match=message), writing(folder, 1):
        pytest.fail("the block ran")


def test_writing_and_latest_complete_refuse_a_file(tmp_path):
    from sagemaker_tc.checkpoints import latest_complete, writing
    from sagemaker_tc.errors import CheckpointArgumentError

    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(CheckpointArgumentError, match=r"writing\(folder=.*afile'\) is a file"), writing(afile, 1):
        pytest.fail("the block ran")
    with pytest.raises(CheckpointArgumentError, match=r"is a file"), writing(afile / "sub", 1):
        pytest.fail("the block ran")
    with pytest.raises(CheckpointArgumentError, match=r"latest_complete\(folder=.*afile'\) is a file"):
        latest_complete(afile)


@pytest.mark.parametrize("folder", [None, 5, "", "  "])
def test_latest_complete_refuses_what_is_not_a_folder_path(folder):
    from sagemaker_tc.checkpoints import latest_complete
    from sagemaker_tc.errors import CheckpointArgumentError

    with pytest.raises(CheckpointArgumentError, match=r"latest_complete\(folder=.*a checkpoint folder is a path"):
        latest_complete(folder)


# --- ModelTrainer.train(wait=...) -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [("wait", "no"), ("logs", "All"), ("dry_run", "yes"), ("wait", 0)])
def test_model_trainer_train_refuses_a_flag_that_is_not_a_bool(source_dir, tmp_path, name, value):
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    from sagemaker_tc import ModelTrainer

    trainer = ModelTrainer(
        training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312",
        source_code=SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
        compute=Compute(instance_type="local_process"),
        training_mode=Mode.LOCAL_CONTAINER,
        local_container_root=str(tmp_path / "root"),
        compiler_config=TrainingCompilerConfig(),
    )
    with pytest.raises(EstimatorArgumentError, match=rf"{name} must be True or False"):
        trainer.train(**{name: value})
    assert not (tmp_path / "root").exists()


# --- tags: each a {"Key": str, "Value": str} ------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ([{"Key": "team"}], r"tags\[0\] has no 'Value'"),
        ([{"Key": "a", "Value": "b"}, {"Value": "secret-ish"}], r"tags\[1\] has no 'Key'"),
        ([{"Key": "team", "Value": 5}], r"tags\[0\]\['Value'\] is a int"),
        ([("team", "nlp")], r"tags\[0\] is a tuple"),
        ({"team": None}, r"tags\[0\]\['Value'\] is a NoneType"),
    ],
)
@pytest.mark.parametrize("cloud", [False, True])
def test_a_tag_without_a_string_key_and_value_is_refused_by_index(make, tags, message, cloud):
    accepted = r"each tag is \{'Key': str, 'Value': str\}"
    with pytest.raises(EstimatorArgumentError, match=rf"{message}: {accepted}") as caught:
        make(tags=tags, **(CLOUD if cloud else {}))
    assert "secret-ish" not in str(caught.value)


# --- keyword-only arguments given by position -----------------------------------------------------


def test_a_positional_argument_to_the_config_is_refused_with_the_keyword_form():
    with pytest.raises(ConfigError, match=r"keyword arguments only.*TrainingCompilerConfig\(enabled=True\)"):
        TrainingCompilerConfig(True)


def test_a_grace_given_to_stop_by_position_is_refused_before_anything_is_signalled():
    from sagemaker_tc.sdk.local.job import LocalJob

    # Checked first: the job itself is never touched.
    with pytest.raises(EstimatorArgumentError, match=r"stop\(\) takes no positional argument.*stop\(grace_s=30\)"):
        LocalJob.stop(object(), 5)
