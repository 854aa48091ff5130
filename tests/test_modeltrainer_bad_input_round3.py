"""sagemaker_tc.ModelTrainer refuses what the estimators refuse since issue 33 (bad inputs, third
round): foreign or malformed checkpoint URIs in local modes, checkpoint folders overlapping the
job's own, tags AWS would refuse, names with a control character. All before any job starts."""

from __future__ import annotations

import pytest

from sagemaker_tc import EstimatorArgumentError, ModelTrainer, TrainingCompilerConfig

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture
def build(source_dir, tmp_path):
    """A ModelTrainer for ``echo.py``: ``local=True`` is ``local_process`` (jobs under
    ``tmp_path/root``), else a SageMaker GPU job; ``overrides`` replace arguments."""
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    def _build(local=True, **overrides):
        kwargs = {
            "training_image": DLC,
            "source_code": SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
            "compute": Compute(instance_type="local_process" if local else "ml.g5.2xlarge"),
            "role": ROLE,
            "local_container_root": str(tmp_path / "root"),
            "compiler_config": TrainingCompilerConfig(),
            **({"training_mode": Mode.LOCAL_CONTAINER} if local else {}),
            **overrides,
        }
        return ModelTrainer(**kwargs)

    return _build


def _checkpoints(s3_uri=None, local_path=None):
    from sagemaker.core.training.configs import CheckpointConfig

    return CheckpointConfig(s3_uri=s3_uri, local_path=local_path)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("ftp://host/ck", "local_process takes a local folder, a file:// URI or an s3:// URI"),
        ("gs://bucket/ck", "local_process takes a local folder, a file:// URI or an s3:// URI"),
        ("s3://", "the bucket name '' breaks S3's naming rules"),
        ("file://ckpt", "names the host 'ckpt'"),
        ("/proc/ck", "nothing can be created in '/proc'"),  # as a read-only folder: probed before the job
    ],
)
def test_local_process_refuses_a_foreign_or_malformed_checkpoint_uri(build, uri, message):
    with pytest.raises(EstimatorArgumentError, match=message):
        build(checkpoint_config=_checkpoints(uri))


@pytest.mark.parametrize("local", [True, False])
@pytest.mark.parametrize("folder", ["/opt/ml/input/data/train", "/opt/ml/code", "/opt/ml/model", "/opt/ml"])
def test_a_checkpoint_folder_overlapping_the_jobs_folders_is_refused(build, tmp_path, local, folder):
    uri = str(tmp_path / "ck") if local else "s3://bucket/ck"
    with pytest.raises(EstimatorArgumentError, match="overlaps the job's /opt/ml/"):
        build(local=local, checkpoint_config=_checkpoints(uri, folder))


def test_a_checkpoint_location_holding_the_code_or_the_output_is_refused(build, source_dir, tmp_path):
    with pytest.raises(EstimatorArgumentError, match="is or holds source_dir"):
        build(checkpoint_config=_checkpoints(str(source_dir)))
    with pytest.raises(EstimatorArgumentError, match="is or holds the output folder"):
        build(checkpoint_config=_checkpoints(str(tmp_path)))  # holds source_dir and local_container_root


def test_a_cloud_checkpoint_uri_is_an_s3_uri_apart_from_the_output(build):
    from sagemaker.core.training.configs import OutputDataConfig

    with pytest.raises(EstimatorArgumentError, match="must be an s3:// URI, got 'gs://b/ck'"):
        build(local=False, checkpoint_config=_checkpoints("gs://b/ck"))
    with pytest.raises(EstimatorArgumentError, match="is output_path"):
        build(
            local=False,
            checkpoint_config=_checkpoints("s3://bucket/out/"),
            output_data_config=OutputDataConfig(s3_output_path="s3://bucket/out"),
        )


def test_local_process_with_the_compiler_off_checks_its_checkpoints_at_train(build, tmp_path):
    trainer = build(compiler_config=None, checkpoint_config=_checkpoints("ftp://host/ck"))
    with pytest.raises(EstimatorArgumentError, match="local_process takes a local folder"):
        trainer.train(dry_run=True)


@pytest.mark.parametrize("local", [True, False])
@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ([{"key": "aws:team", "value": "x"}], "starts with 'aws:'"),
        ([{"key": "AWS:team", "value": "x"}], "starts with 'aws:'"),
        ([{"key": "team", "value": "a"}, {"key": "team", "value": "b"}], "is given twice"),
        ([{"key": "team\n", "value": "a"}], r"TagKey"),
    ],
)
def test_tags_aws_would_refuse_are_refused(build, local, tags, message):
    with pytest.raises(EstimatorArgumentError, match=message):
        build(local=local, tags=tags)


def test_names_ending_in_a_control_character_are_refused(build):
    from sagemaker.core.training.configs import Networking, OutputDataConfig

    with pytest.raises(EstimatorArgumentError, match=r"base_job_name 'x\\n' is not accepted"):
        build(base_job_name="x\n")
    with pytest.raises(EstimatorArgumentError, match="full IAM role ARN"):
        build(local=False, role=ROLE + "\n")
    with pytest.raises(EstimatorArgumentError, match=r"KmsKeyId"):
        build(local=False, output_data_config=OutputDataConfig(s3_output_path="s3://b/o", kms_key_id="key\n"))
    with pytest.raises(EstimatorArgumentError, match=r"SubnetId"):
        build(local=False, networking=Networking(subnets=["subnet-1\n"], security_group_ids=["sg-1"]))


def test_local_process_refuses_a_path_that_drops_this_machines_folders(build, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(EstimatorArgumentError, match=r"leaves out 1 folder\(s\) of this machine's PATH"):
        build(environment={"PATH": "/usr/bin"})
    build(environment={"PATH": "/opt/tools:/usr/bin:/bin"})


def test_sdk_v2_tag_dicts_get_the_sdk_v3_form_in_the_refusal(build):
    from sagemaker_tc import ModelTrainerArgumentError

    with pytest.raises(
        ModelTrainerArgumentError, match=r"tags: got dict.*sagemaker.core.shapes.Tag\(key=..., value=...\)"
    ):
        build(local=False, tags=[{"Key": "team", "Value": "ml"}])


@pytest.mark.parametrize("inputs", ["s3://bucket/train", {"train": "s3://bucket/train"}])
def test_train_inputs_that_are_not_a_list_are_refused_by_name(build, inputs):
    from sagemaker_tc import ModelTrainerArgumentError

    with pytest.raises(ModelTrainerArgumentError, match=r"input_data_config must be a list of InputData or Channel"):
        build().train(input_data_config=inputs)
