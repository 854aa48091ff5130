"""Issue 24 on SDK v3: sagemaker_tc.ModelTrainer users set VPC, KMS, spot, warm pools, checkpoints, tags
and retries through sagemaker-train's own config objects, and each reaches the CreateTrainingJob
request (moto's recording) next to the compiler's driver."""

import pytest
from sagemaker.core.shapes import CheckpointConfig, RetryStrategy, StoppingCondition, Tag
from sagemaker.core.training.configs import Compute, Networking, OutputDataConfig
from test_modeltrainer import BUCKET, account, cloud_trainer  # noqa: F401 (account is a fixture)

KMS_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"

# (ModelTrainer arguments, the request fields sagemaker-train sends for them).
SETTINGS = {
    "spot-warm-pool-kms": (
        lambda: {
            "compute": Compute(
                instance_type="ml.g5.2xlarge",
                instance_count=1,
                volume_kms_key_id=KMS_ARN,
                keep_alive_period_in_seconds=1800,
                enable_managed_spot_training=True,
            ),
            "stopping_condition": StoppingCondition(max_runtime_in_seconds=3600, max_wait_time_in_seconds=7200),
            "checkpoint_config": CheckpointConfig(s3_uri=f"s3://{BUCKET}/ckpt", local_path="/opt/ml/checkpoints"),
        },
        {
            "ResourceConfig": {"VolumeKmsKeyId": KMS_ARN, "KeepAlivePeriodInSeconds": 1800},
            "EnableManagedSpotTraining": True,
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
            "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/ckpt", "LocalPath": "/opt/ml/checkpoints"},
        },
    ),
    "vpc-isolation-encryption": (
        lambda: {
            "networking": Networking(
                subnets=["subnet-0a1b2c3d"],
                security_group_ids=["sg-0a1b2c3d"],
                enable_network_isolation=True,
                enable_inter_container_traffic_encryption=True,
            )
        },
        {
            "VpcConfig": {"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]},
            "EnableNetworkIsolation": True,
            "EnableInterContainerTrafficEncryption": True,
        },
    ),
    "tags": (lambda: {"tags": [Tag(key="team", value="nlp")]}, {"Tags": [{"Key": "team", "Value": "nlp"}]}),
    "output-kms-no-compression": (
        lambda: {
            "output_data_config": OutputDataConfig(
                s3_output_path=f"s3://{BUCKET}/jobs", kms_key_id="alias/out", compression_type="NONE"
            )
        },
        {"OutputDataConfig": {"KmsKeyId": "alias/out", "CompressionType": "NONE"}},
    ),
    "input-mode": (
        lambda: {"training_input_mode": "FastFile"},
        {"AlgorithmSpecification": {"TrainingInputMode": "FastFile"}},
    ),
}


def assert_contains(actual, expected, where="request"):
    if isinstance(expected, dict):
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            assert_contains(actual[key], value, f"{where}.{key}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_setting_reaches_the_request(account, aws, source_dir, name):  # noqa: F811
    arguments, expected = SETTINGS[name]
    trainer = cloud_trainer(source_dir, account, **arguments())
    trainer.train(wait=False)
    (body,) = [body for target, body in aws() if target == "SageMaker.CreateTrainingJob"]
    assert_contains(body, expected)
    assert "SM_TRAINING_COMPILER_SETTINGS" in body["Environment"]  # the compiler rides along


def test_retries_reach_the_request(account, aws, source_dir):  # noqa: F811
    trainer = cloud_trainer(source_dir, account).with_retry_strategy(RetryStrategy(maximum_retry_attempts=15))
    trainer.train(wait=False)
    (body,) = [body for target, body in aws() if target == "SageMaker.CreateTrainingJob"]
    assert body["RetryStrategy"] == {"MaximumRetryAttempts": 15}
