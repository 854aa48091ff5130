"""SDK v3: a sagemaker_tc.ModelTrainer with managed spot training, a max wait and a checkpoint
location sends them in CreateTrainingJob (moto's server records the request) as sagemaker-train
does without the compiler; in ``local_process`` a local CheckpointConfig is synced as the
estimators' ``checkpoint_s3_uri`` is (sagemaker_tc.sdk.local.checkpoints)."""

import logging

import pytest
from test_modeltrainer import BUCKET, account, cloud_trainer  # noqa: F401  (account is a fixture)
from test_modeltrainer_local import member, train
from test_modeltrainer_local import trainer as local_trainer

from sagemaker_tc.errors import EstimatorArgumentError

CHECKPOINTS = f"s3://{BUCKET}/checkpoints/run-1"


def created(aws) -> dict:
    (body,) = [body for target, body in aws() if target == "SageMaker.CreateTrainingJob"]
    return body


def test_spot_max_wait_and_checkpoint_config_reach_create_training_job(account, aws, source_dir):  # noqa: F811
    from sagemaker.core.training.configs import CheckpointConfig, Compute, StoppingCondition

    trainer = cloud_trainer(
        source_dir,
        account,
        compute=Compute(instance_type="ml.g5.2xlarge", instance_count=2, enable_managed_spot_training=True),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=3600, max_wait_time_in_seconds=7200),
        checkpoint_config=CheckpointConfig(s3_uri=CHECKPOINTS, local_path="/opt/ml/checkpoints/tc"),
    )
    trainer.train(wait=False)

    body = created(aws)
    assert body["EnableManagedSpotTraining"] is True
    assert body["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert body["CheckpointConfig"] == {"S3Uri": CHECKPOINTS, "LocalPath": "/opt/ml/checkpoints/tc"}
    assert body["ResourceConfig"]["InstanceCount"] == 2
    assert "SM_TRAINING_COMPILER_SETTINGS" in body["Environment"]  # the compiler is on in the same request


def test_without_spot_the_request_carries_no_spot_field(account, aws, source_dir):  # noqa: F811
    cloud_trainer(source_dir, account).train(wait=False)

    body = created(aws)
    assert not body.get("EnableManagedSpotTraining") and "MaxWaitTimeInSeconds" not in body["StoppingCondition"]
    assert "CheckpointConfig" not in body


# Lists what the job's checkpoint folder held at start, then saves a checkpoint of its own there.
RESUMING_SCRIPT = """
import os
from pathlib import Path

checkpoints = Path("/opt/ml/checkpoints/tc")
found = sorted(path.name for path in checkpoints.iterdir())
Path(os.environ["SM_MODEL_DIR"], "found.txt").write_text(",".join(found))
(checkpoints / "step-2.txt").write_text("saved by the job")
"""


@pytest.mark.slow
def test_local_process_syncs_a_local_checkpoint_config_like_the_estimators(tmp_path, capsys):
    from sagemaker.core.training.configs import CheckpointConfig

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(RESUMING_SCRIPT)
    location = tmp_path / "checkpoints"
    location.mkdir()
    (location / "step-1.txt").write_text("from an earlier job")
    job = local_trainer(
        code,
        tmp_path,
        "train.py",
        checkpoint_config=CheckpointConfig(s3_uri=location.as_uri(), local_path="/opt/ml/checkpoints/tc"),
    )
    train(job, capsys)

    result = job.latest_local_job
    assert member(result.model_artifacts, "found.txt") == "step-1.txt"  # copied in before the script started
    copied_out = ["step-1.txt", "step-2.txt"]  # and the marker that keeps the location out of later jobs' code
    assert sorted(path.name for path in location.iterdir()) == [".sagemaker-tc-job", *copied_out]
    assert (location / "step-2.txt").read_text() == "saved by the job"


def test_local_process_refuses_a_checkpoint_folder_outside_opt_ml_before_anything_starts(source_dir, tmp_path):
    from sagemaker.core.training.configs import CheckpointConfig

    with pytest.raises(EstimatorArgumentError, match="checkpoint_local_path='/tmp/c'.*under /opt/ml"):
        local_trainer(  # refused when built, as the estimators refuse it
            source_dir, tmp_path, checkpoint_config=CheckpointConfig(s3_uri=str(tmp_path / "ckpt"), local_path="/tmp/c")
        )
    assert not (tmp_path / "jobs").exists() and not (tmp_path / "ckpt").exists()


def test_local_process_says_spot_and_an_s3_checkpoint_location_apply_on_sagemaker_only(source_dir, tmp_path, caplog):
    from sagemaker.core.training.configs import CheckpointConfig, Compute, StoppingCondition

    job = local_trainer(
        source_dir,
        tmp_path,
        compute=Compute(instance_type="local_process", enable_managed_spot_training=True),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=600, max_wait_time_in_seconds=1200),
        checkpoint_config=CheckpointConfig(s3_uri=CHECKPOINTS),
    )
    with caplog.at_level(logging.WARNING, logger="sagemaker_tc.sdk.v3.local"):
        job.train(dry_run=True)
    (message,) = [record.getMessage() for record in caplog.records if record.name == "sagemaker_tc.sdk.v3.local"]
    assert "enable_managed_spot_training=True" in message and "max_wait_time_in_seconds" in message
    assert CHECKPOINTS in message and "applies on SageMaker only" in message
