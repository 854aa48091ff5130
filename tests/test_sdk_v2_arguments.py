"""Issue 24: SDK v2's estimator arguments, as SMTC-era notebooks pass them, reach CreateTrainingJob.

Each argument set is accepted and read back from moto's recording of the real request. The expected
fields are SDK v2's mapping (sagemaker 2.x ``EstimatorBase`` -> ``_Job`` -> ``Session.train``),
written down here rather than derived from our code.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import boto3
import pytest

from sagemaker_tc import (
    ChannelNotFoundError,
    EstimatorArgumentError,
    FileSystemInput,
    HuggingFace,
    JobSettingWarning,
    PyTorch,
    TrainingCompilerConfig,
    TrainingInput,
)
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.modes.request import request_for

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "tc-test-bucket"
KMS_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
LAMBDA_ARN = "arn:aws:lambda:us-east-1:123456789012:function:registry-auth"
PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/my-reserved-plan"
LOG_LEVEL = "sagemaker_container_log_level"
# A file-system channel config with a type the API refuses (SDK v2's own class refuses it when built).
NFS_CHANNEL = {
    "DataSource": {
        "FileSystemDataSource": {
            "FileSystemId": "fs-0123456789abcdef0",
            "FileSystemType": "NFS",
            "DirectoryPath": "/d",
            "FileSystemAccessMode": "ro",
        }
    }
}

# (SDK v2 arguments, the request fields SDK v2 sends for them). Each set is one SMTC-era notebook's.
ARGUMENT_SETS = {
    "smtc-integration-tests": (
        {"debugger_hook_config": False, "max_retry_attempts": 15},
        {"RetryStrategy": {"MaximumRetryAttempts": 15}},
    ),
    "disable-profiler": ({"disable_profiler": True}, {"ProfilerConfig": {"DisableProfiler": True}}),
    "tags": (
        {"tags": [{"Key": "team", "Value": "nlp"}, {"Key": "cost-center", "Value": "1234"}]},
        {"Tags": [{"Key": "team", "Value": "nlp"}, {"Key": "cost-center", "Value": "1234"}]},
    ),
    "vpc": (
        {"subnets": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]},
        {"VpcConfig": {"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]}},
    ),
    "kms": (
        {"volume_kms_key": KMS_ARN, "output_kms_key": "alias/training-output"},
        {"ResourceConfig": {"VolumeKmsKeyId": KMS_ARN}, "OutputDataConfig": {"KmsKeyId": "alias/training-output"}},
    ),
    "spot": (
        {"use_spot_instances": True, "max_wait": 7200, "max_run": 3600, "checkpoint_s3_uri": f"s3://{BUCKET}/ckpt"},
        {
            "EnableManagedSpotTraining": True,
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
            "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/ckpt"},
        },
    ),
    "warm-pool": ({"keep_alive_period_in_seconds": 1800}, {"ResourceConfig": {"KeepAlivePeriodInSeconds": 1800}}),
    "network-isolation": ({"enable_network_isolation": True}, {"EnableNetworkIsolation": True}),
    "fastfile": ({"input_mode": "FastFile"}, {"AlgorithmSpecification": {"TrainingInputMode": "FastFile"}}),
    "pipe": ({"input_mode": "Pipe"}, {"AlgorithmSpecification": {"TrainingInputMode": "Pipe"}}),
    "log-level": ({"container_log_level": logging.DEBUG}, {"HyperParameters": {LOG_LEVEL: "10"}}),
    "tensorboard": (
        {"tensorboard_output_config": {"S3OutputPath": f"s3://{BUCKET}/tb", "LocalPath": "/opt/ml/output/tb"}},
        {"TensorBoardOutputConfig": {"S3OutputPath": f"s3://{BUCKET}/tb", "LocalPath": "/opt/ml/output/tb"}},
    ),
    "no-compression": ({"disable_output_compression": True}, {"OutputDataConfig": {"CompressionType": "NONE"}}),
    "inter-container-encryption": (
        {"encrypt_inter_container_traffic": True},
        {"EnableInterContainerTrafficEncryption": True},
    ),
    "environment-and-metrics": (
        {"environment": {"HF_HOME": "/tmp/hf"}, "metric_definitions": [{"Name": "loss", "Regex": "loss=(\\S+)"}]},
        {"Environment": {"HF_HOME": "/tmp/hf"}},
    ),
    "private-registry": (
        {"training_repository_access_mode": "Vpc", "training_repository_credentials_provider_arn": LAMBDA_ARN},
        {
            "AlgorithmSpecification": {
                "TrainingImageConfig": {
                    "TrainingRepositoryAccessMode": "Vpc",
                    "TrainingRepositoryAuthConfig": {"TrainingRepositoryCredentialsProviderArn": LAMBDA_ARN},
                }
            }
        },
    ),
    "job-flags": (
        {"enable_infra_check": True, "enable_remote_debug": True, "enable_session_tag_chaining": True},
        {
            "InfraCheckConfig": {"EnableInfraCheck": True},
            "RemoteDebugConfig": {"EnableRemoteDebug": True},
            "SessionChainingConfig": {"EnableSessionTagChaining": True},
        },
    ),
    "training-plan": ({"training_plan": PLAN_ARN}, {"ResourceConfig": {"TrainingPlanArn": PLAN_ARN}}),
    "metrics-time-series": (
        {"enable_sagemaker_metrics": True},
        {"AlgorithmSpecification": {"EnableSageMakerMetricsTimeSeries": True}},
    ),
    "model-uri": (
        {"model_uri": f"s3://{BUCKET}/pretrained/model.tar.gz", "model_channel_name": "pretrained"},
        {
            "InputDataConfig": [
                {
                    "ChannelName": "pretrained",
                    "DataSource": {
                        "S3DataSource": {
                            "S3DataType": "S3Prefix",
                            "S3Uri": f"s3://{BUCKET}/pretrained/model.tar.gz",
                            "S3DataDistributionType": "FullyReplicated",
                        }
                    },
                    "ContentType": "application/x-sagemaker-model",
                    "InputMode": "File",
                }
            ]
        },
    ),
}


@pytest.fixture
def bucket(aws):
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/jobs"


def huggingface(source_dir, bucket, **overrides):
    """An SMTC-style HuggingFace estimator for a cloud job, with ``overrides``."""
    kwargs = {
        "source_dir": str(source_dir),
        "role": ROLE,
        "instance_type": "ml.g5.2xlarge",
        "transformers_version": "4.56",
        "pytorch_version": "2.8",
        "py_version": "py312",
        "compiler_config": TrainingCompilerConfig(),
        "output_path": bucket,
    }
    kwargs.update(overrides)
    return HuggingFace("echo.py", **kwargs)


def created(aws) -> dict:
    (request,) = [body for target, body in aws() if target == "SageMaker.CreateTrainingJob"]
    return request


def assert_contains(actual, expected, where="request"):
    """Every field of ``expected`` is in ``actual`` with that value (dicts compared field by field)."""
    if isinstance(expected, dict):
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            assert_contains(actual[key], value, f"{where}.{key}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


@pytest.mark.parametrize("name", sorted(ARGUMENT_SETS))
def test_each_sdk_v2_argument_set_reaches_the_request(aws, bucket, source_dir, name):
    arguments, expected = ARGUMENT_SETS[name]
    expected = dict(expected)
    huggingface(source_dir, bucket, **arguments).fit({"train": f"s3://{BUCKET}/train"}, wait=False)
    request = created(aws)
    if "InputDataConfig" in expected:  # the model channel follows the fit() inputs
        assert request["InputDataConfig"][0]["ChannelName"] == "train"
        assert request["InputDataConfig"][1:] == expected.pop("InputDataConfig") and expected == {}
    assert_contains(request, expected)
    # Unset stays out of the request, as in SDK v2; disable_profiler=True is SDK v2's disabled ProfilerConfig.
    for field in ("DebugHookConfig", "ProfilerConfig", "DebugRuleConfigurations"):
        assert field not in request or (field == "ProfilerConfig" and name == "disable-profiler")
    if name != "log-level":
        assert request["HyperParameters"][LOG_LEVEL] == "20"


def test_training_input_fields_reach_input_data_config(aws, bucket, source_dir):
    train = TrainingInput(
        f"s3://{BUCKET}/train",
        distribution="ShardedByS3Key",
        content_type="text/csv",
        compression="Gzip",
        record_wrapping="RecordIO",
        input_mode="Pipe",
        shuffle_config=7,
    )
    efs = FileSystemInput("fs-0123456789abcdef0", "EFS", "/data/val", content_type="application/json")
    vpc = {"subnets": ["subnet-0123abcd"], "security_group_ids": ["sg-0123abcd"]}  # an EFS channel needs its VPC
    huggingface(source_dir, bucket, **vpc).fit({"train": train, "validation": efs}, wait=False)
    channels = created(aws)["InputDataConfig"]
    assert channels == [
        {
            "ChannelName": "train",
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": f"s3://{BUCKET}/train",
                    "S3DataDistributionType": "ShardedByS3Key",
                }
            },
            "ContentType": "text/csv",
            "CompressionType": "Gzip",
            "RecordWrapperType": "RecordIO",
            "InputMode": "Pipe",
            "ShuffleConfig": {"Seed": 7},
        },
        {
            "ChannelName": "validation",
            "DataSource": {
                "FileSystemDataSource": {
                    "FileSystemId": "fs-0123456789abcdef0",
                    "FileSystemAccessMode": "ro",
                    "FileSystemType": "EFS",
                    "DirectoryPath": "/data/val",
                }
            },
            "ContentType": "application/json",
        },
    ]


def test_a_bare_training_input_is_the_training_channel_and_sdk_v2_objects_are_duck_typed(aws, bucket, source_dir):
    class SdkV2TrainingInput:  # what sagemaker.inputs.TrainingInput keeps: the API's Channel fields
        config = {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/x"}}}

    huggingface(source_dir, bucket).fit(SdkV2TrainingInput(), wait=False)
    (channel,) = created(aws)["InputDataConfig"]
    assert channel["ChannelName"] == "training" and channel["DataSource"]["S3DataSource"]["S3Uri"].endswith("/x")


@pytest.mark.parametrize(
    "channel, message",
    [
        (
            TrainingInput(f"s3://{BUCKET}/t", distribution="Sharded"),
            "S3DataDistributionType='Sharded'.*FullyReplicated",
        ),
        (TrainingInput(f"s3://{BUCKET}/t", input_mode="Stream"), "InputMode='Stream'.*Pipe, File, FastFile"),
        (TrainingInput("/local/data"), "read s3:// URIs"),
        (FileSystemInput("fs-1", "EFS", "/d"), r"FileSystemId='fs-1'"),
        (SimpleNamespace(config=NFS_CHANNEL), "FileSystemType='NFS'.*EFS, FSxLustre"),
    ],
)
def test_a_bad_channel_field_is_refused_before_any_upload(aws, bucket, source_dir, channel, message):
    with pytest.raises(ChannelNotFoundError, match=message):
        huggingface(source_dir, bucket).fit({"train": channel}, wait=False)
    assert "Contents" not in boto3.client("s3").list_objects_v2(Bucket=BUCKET)


def test_file_system_input_refuses_an_unknown_type_when_built_as_sagemaker_core_does():
    """FileSystemInput is sagemaker-core's (SDK v2's) class: an unknown type is refused when built,
    with a named error; a config carrying one from elsewhere is refused at fit() (above)."""
    from sagemaker.core.inputs import FileSystemInput as CoreFileSystemInput

    with pytest.raises(ChannelNotFoundError, match="Unrecognized file system type: NFS"):
        FileSystemInput("fs-0123456789abcdef0", "NFS", "/d")
    with pytest.raises(ChannelNotFoundError, match="Unrecognized file system access mode: rx"):
        FileSystemInput("fs-0123456789abcdef0", "EFS", "/d", file_system_access_mode="rx")
    assert isinstance(FileSystemInput("fs-0123456789abcdef0", "EFS", "/d"), CoreFileSystemInput)


def test_code_location_puts_the_source_under_its_prefix(aws, bucket, source_dir):
    estimator = huggingface(source_dir, bucket, code_location=f"s3://{BUCKET}/team-a/code")
    estimator.fit(None, wait=False, job_name="code-location-job")
    submit = json.loads(created(aws)["HyperParameters"]["sagemaker_submit_directory"])
    assert submit == f"s3://{BUCKET}/team-a/code/code-location-job/source/sourcedir.tar.gz"
    keys = [item["Key"] for item in boto3.client("s3").list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys == ["team-a/code/code-location-job/source/sourcedir.tar.gz"]


def test_debugger_objects_pass_through_with_one_warning(aws, bucket, source_dir):
    class DebuggerHookConfig:  # SDK v2's sagemaker.debugger objects turn themselves into API fields
        def _to_request_dict(self):
            return {"S3OutputPath": f"s3://{BUCKET}/debug", "CollectionConfigurations": [{"CollectionName": "losses"}]}

    class Rule:
        def to_debugger_rule_config_dict(self):
            return {"RuleConfigurationName": "LossNotDecreasing", "RuleEvaluatorImage": "rule-image"}

    class ProfilerRule:
        def to_profiler_rule_config_dict(self):
            return {"RuleConfigurationName": "ProfilerReport", "RuleEvaluatorImage": "rule-image"}

    with pytest.warns(JobSettingWarning, match="add overhead to compiled training") as caught:
        estimator = huggingface(
            source_dir,
            bucket,
            debugger_hook_config=DebuggerHookConfig(),
            rules=[Rule(), ProfilerRule()],
            profiler_config={"S3OutputPath": f"s3://{BUCKET}/profile"},
        )
    assert len([w for w in caught if w.category is JobSettingWarning]) == 1
    estimator.fit(None, wait=False)
    request = created(aws)
    assert request["DebugHookConfig"]["CollectionConfigurations"] == [{"CollectionName": "losses"}]
    assert request["DebugRuleConfigurations"][0]["RuleConfigurationName"] == "LossNotDecreasing"
    assert request["ProfilerRuleConfigurations"][0]["RuleConfigurationName"] == "ProfilerReport"
    assert request["ProfilerConfig"] == {"S3OutputPath": f"s3://{BUCKET}/profile"}


def test_spot_without_a_checkpoint_location_warns(source_dir):
    with pytest.warns(JobSettingWarning, match="use_spot_instances=True without checkpoint_s3_uri"):
        huggingface(source_dir, "s3://tc-test-bucket/jobs", use_spot_instances=True, max_wait=86400)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            {"volume_kms_key": "not a key!"},
            r"volume_kms_key='not a key!' is not accepted by CreateTrainingJob \(KmsKeyId\)",
        ),
        ({"output_kms_key": "k" * 2049}, r"output_kms_key=.*0 to 2048 characters"),
        ({"subnets": ["subnet 1"], "security_group_ids": ["sg-1"]}, r"subnets='subnet 1'.*\(SubnetId\)"),
        ({"subnets": ["subnet-1"], "security_group_ids": ["sg-" + "1" * 40]}, r"security_group_ids=.*0 to 32"),
        ({"subnets": ["subnet-1"]}, "subnets and security_group_ids go together"),
        ({"subnets": "subnet-1", "security_group_ids": ["sg-1"]}, "subnets must be a list of strings"),
        ({"tags": [{"Key": "k" * 129, "Value": "v"}]}, r"tags: a key=.*\(TagKey\): 1 to 128 characters"),
        ({"tags": [{"Key": "", "Value": "v"}]}, r"\(TagKey\): 1 to 128 characters, got 0"),
        ({"tags": {"team": "a;b"}}, r"tags: the value of 'team'='a;b'.*\(TagValue\)"),
        ({"tags": {f"k{i}": "v" for i in range(51)}}, r"\(TagList\): 0 to 50 entries, got 51"),
        ({"tags": ["team"]}, r"tags\[0\] is a str: each tag is \{'Key': str, 'Value': str\}"),
        ({"use_spot_instances": True, "max_wait": 3600, "max_run": 7200}, "max_wait=3600 is less than max_run=7200"),
        ({"use_spot_instances": True}, "use_spot_instances=True needs max_wait"),
        ({"max_wait": 7200}, "max_wait applies to managed spot training only"),
        ({"use_spot_instances": "yes", "max_wait": 90000}, "use_spot_instances must be True or False"),
        ({"max_retry_attempts": 31}, r"max_retry_attempts=31 .*\(MaximumRetryAttempts\): between 1 and 30"),
        ({"keep_alive_period_in_seconds": 21601}, r"\(KeepAlivePeriodInSeconds\): between 0 and 21600"),
        ({"input_mode": "Stream"}, r"input_mode='Stream' .*one of Pipe, File, FastFile"),
        ({"training_plan": "my-plan"}, r"training_plan='my-plan' .*\(TrainingPlanArn\)"),
        ({"training_repository_access_mode": "Private"}, r"\(TrainingRepositoryAccessMode\): one of Platform, Vpc"),
        ({"code_location": "code/here"}, "code_location='code/here' is not an S3 URI"),
        ({"container_log_level": "DEBUG"}, "container_log_level must be a logging level"),
        ({"debugger_hook_config": True}, "debugger_hook_config takes False"),
        ({"profiler_config": 3}, "profiler_config must be SDK v2's object"),
        ({"disable_profiler": True, "profiler_config": {}}, "profiler_config and disable_profiler=True contradict"),
        ({"container_entry_point": ["python", "x.py"]}, "container_entry_point replaces the training toolkit"),
        ({"model_channel_name": "bad name"}, r"model_channel_name='bad name' .*\(ChannelName\)"),
    ],
)
def test_bad_settings_are_refused_at_construction_with_the_api_limit(source_dir, arguments, message):
    with pytest.raises(EstimatorArgumentError, match=message):
        huggingface(source_dir, "s3://tc-test-bucket/jobs", **arguments)


def test_cloud_only_settings_are_accepted_locally_and_logged_once(source_dir, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="sagemaker_tc")
    estimator = HuggingFace(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        output_path=str(tmp_path / "out"),
        tags={"team": "nlp"},
        subnets=["subnet-1"],
        security_group_ids=["sg-1"],
        volume_kms_key=KMS_ARN,
        use_spot_instances=True,
        max_wait=90000,
        checkpoint_s3_uri=f"s3://{BUCKET}/ckpt",
        keep_alive_period_in_seconds=600,
        max_retry_attempts=2,
        enable_network_isolation=True,
        input_mode="FastFile",
        debugger_hook_config=False,
        disable_profiler=True,
        container_log_level=logging.DEBUG,
    )
    logged = [record.getMessage() for record in caplog.records if "applies on SageMaker only" in record.getMessage()]
    assert logged == [
        "tags, subnets, security_group_ids, volume_kms_key, use_spot_instances, max_wait, "
        "keep_alive_period_in_seconds, max_retry_attempts, enable_network_isolation, input_mode, checkpoint_s3_uri: "
        "applies on SageMaker only "
        "(ml.* instance types); this local job runs without it"
    ]
    output = local_path(estimator.output_path).as_uri()
    request = request_for(estimator.spec, "local-job", {}, "file:///code", output_path=output)
    assert request.hyper_parameters[LOG_LEVEL] == "10"  # the toolkit reads it locally too
    assert request.vpc_config is None and request.tags is None
    assert request.algorithm_specification.training_input_mode == "File"


def test_sdk_v2_positional_order(source_dir):
    pytorch = PyTorch("echo.py", "2.8", "py312", str(source_dir), instance_type="local_process")
    assert (pytorch.framework_version, pytorch.py_version, pytorch.entry_point) == ("2.8", "py312", "echo.py")
    hf = HuggingFace("py312", "echo.py", "4.56", None, "2.8", str(source_dir), instance_type="local_process")
    assert (hf.py_version, hf.entry_point, hf.transformers_version, hf.pytorch_version) == (
        "py312",
        "echo.py",
        "4.56",
        "2.8",
    )
    hf = HuggingFace("py312", entry_point="echo.py", source_dir=str(source_dir), instance_type="local_process")
    assert hf.py_version == "py312"
    assert HuggingFace("echo.py", source_dir=str(source_dir), instance_type="local_process").entry_point == "echo.py"
    with pytest.raises(
        TypeError, match="takes at most 8 positional arguments, in SDK v2's order .*pass the others by keyword"
    ):
        PyTorch("echo.py", "2.8", "py312", str(source_dir), None, None, None, None, "extra")
    with pytest.raises(TypeError, match="got py_version both by position and by keyword"):
        PyTorch("echo.py", "2.8", "py312", py_version="py311")


def test_refused_sdk_v2_arguments_still_say_what_to_do(source_dir):
    with pytest.raises(EstimatorArgumentError) as raised:
        HuggingFace(
            "echo.py",
            source_dir=str(source_dir),
            instance_type="local_process",
            git_config={"repo": "r"},
            tags={"a": "b"},
        )
    message = str(raised.value)
    assert "does not take 1 of the arguments given: git_config (check the repository out locally" in message
    assert "tags" in message.split("The arguments it takes:")[1]  # listed as taken


def test_the_same_cell_runs_in_local_process_with_training_input_and_model_uri(source_dir, tmp_path, capsys):
    """The notebook's cloud settings stay in the cell; locally a TrainingInput is its folder and
    model_uri is the model channel, as in SDK v2's local mode."""
    import tarfile

    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "rows.txt").write_text("1\n")
    (tmp_path / "pretrained").mkdir()
    (tmp_path / "pretrained" / "weights.bin").write_text("w")
    estimator = HuggingFace(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        output_path=str(tmp_path / "out"),
        compiler_config=TrainingCompilerConfig(),
        model_uri=str(tmp_path / "pretrained"),
        tags={"team": "nlp"},
        use_spot_instances=True,
        max_wait=90000,
        debugger_hook_config=False,
        disable_profiler=True,
    )
    estimator.fit({"train": TrainingInput(str(tmp_path / "train"), distribution="ShardedByS3Key")})
    capsys.readouterr()
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        echo = json.loads(tar.extractfile("echo.json").read())
    assert echo["channels"] == {"SM_CHANNEL_MODEL": ["weights.bin"], "SM_CHANNEL_TRAIN": ["rows.txt"]}
    with pytest.raises(ChannelNotFoundError, match="FileSystemInput .* locally pass the folder's path"):
        estimator.fit({"train": FileSystemInput("fs-0123456789abcdef0", "EFS", "/data")})


def test_training_input_is_sagemaker_cores_class_and_takes_its_arguments():
    """sagemaker_tc.TrainingInput is sagemaker-core's TrainingInput (SDK v2's signature): its
    config is the library's, its extra arguments (hub_access_config, ...) are taken."""
    from sagemaker.core.inputs import ShuffleConfig
    from sagemaker.core.inputs import TrainingInput as CoreTrainingInput

    ours = TrainingInput(f"s3://{BUCKET}/t", "ShardedByS3Key", shuffle_config=ShuffleConfig(3))
    assert isinstance(ours, CoreTrainingInput)
    assert (
        ours.config == CoreTrainingInput(f"s3://{BUCKET}/t", "ShardedByS3Key", shuffle_config=ShuffleConfig(3)).config
    )
    hub = TrainingInput(f"s3://{BUCKET}/t", hub_access_config={"HubContentArn": "arn:hub"})
    assert hub.config["DataSource"]["S3DataSource"]["HubAccessConfig"] == {"HubContentArn": "arn:hub"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"instance_groups": ["group-a"]}, r"channel 'train': InstanceGroupNames is given: heterogeneous clusters"),
        ({"attribute_names": "label"}, r"channel 'train': AttributeNames is a list of strings, got str"),
        ({"shuffle_config": SimpleNamespace(seed="7")}, r"channel 'train': ShuffleConfig.Seed takes an int seed"),
    ],
)
def test_sagemaker_cores_own_training_input_is_checked_at_fit(aws, bucket, source_dir, arguments, message):
    """What sagemaker-core's class builds unchecked is refused at fit(), before any upload."""
    from sagemaker.core.inputs import TrainingInput as CoreTrainingInput

    with pytest.raises(ChannelNotFoundError, match=message):
        huggingface(source_dir, bucket).fit({"train": CoreTrainingInput(f"s3://{BUCKET}/t", **arguments)}, wait=False)
    assert "Contents" not in boto3.client("s3").list_objects_v2(Bucket=BUCKET)
