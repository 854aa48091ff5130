"""SDK v3: sagemaker_tc.ModelTrainer (sagemaker-train's ModelTrainer with compiler_config) as a SageMaker
training job and a Pipelines step against moto's server, in sagemaker-train's own local container
runner (the stand-in docker CLI), and its driver reading back what the SDK wrote."""

import json

import boto3
import pytest
import yaml
from conftest import warned_from

from sagemaker_tc import ModelTrainer, TrainingCompilerConfig, contract
from sagemaker_tc.container import distributed, modeltrainer

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "tc-v3-bucket"
DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312"
HYPERPARAMETERS = {"greeting": "hello world", "quoted": "say \"hi\" and 'bye'", "epochs": 3, "lr": 3e-05, "flag": True}
# What ModelTrainer sends (strings as they are, other values as JSON) and so what the script gets.
SENT = {"greeting": "hello world", "quoted": "say \"hi\" and 'bye'", "epochs": "3", "lr": "3e-05", "flag": "true"}


@pytest.fixture
def account(aws, monkeypatch):
    """A bucket in moto's account; returns the execution role's ARN. sagemaker-train checks the role with
    IAM's SimulatePrincipalPolicy, which moto does not implement: sagemaker-core's documented switch
    SAGEMAKER_VALIDATE_ROLE=false skips that check (the role is still sent as given)."""
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    return ROLE


def cloud_trainer(source_dir, role, session=None, **overrides):
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.training.configs import Compute, OutputDataConfig, SourceCode

    kwargs = {
        "training_image": DLC,
        "source_code": SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
        "compute": Compute(instance_type="ml.g5.2xlarge", instance_count=1),
        "role": role,
        "hyperparameters": HYPERPARAMETERS,
        "output_data_config": OutputDataConfig(s3_output_path=f"s3://{BUCKET}/jobs"),
        "sagemaker_session": session
        or Session(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET),
        "compiler_config": TrainingCompilerConfig(debug=True),
    }
    kwargs.update(overrides)
    return ModelTrainer(**kwargs)


def s3_folder(uri: str) -> dict[str, bytes]:
    """Every object under an ``s3://bucket/prefix`` channel, by its path relative to the prefix."""
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    s3 = boto3.client("s3")
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    return {key[len(prefix) :].lstrip("/"): s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


def channels(body) -> dict[str, str]:
    return {item["ChannelName"]: item["DataSource"]["S3DataSource"]["S3Uri"] for item in body["InputDataConfig"]}


def check_drivers(files: dict[str, bytes]) -> dict:
    """The sm_drivers channel runs our driver, which ships the container side of sagemaker_tc; returns
    distributed.json (what reaches the container as SM_DISTRIBUTED_CONFIG)."""
    script = files["sm_train.sh"].decode()
    assert f"/opt/ml/input/data/sm_drivers/distributed_drivers/{contract.DRIVER_PROGRAM}" in script
    assert "basic_script_driver.py" not in script
    for name in (
        contract.DRIVER_PROGRAM,
        "sagemaker_tc/container/launcher.py",
        "sagemaker_tc/container/modeltrainer.py",
    ):
        assert f"distributed_drivers/{name}" in files, name
    assert not any(name.startswith("distributed_drivers/sagemaker_tc/sdk/") for name in files)
    return json.loads(files["distributed.json"])


def test_training_job_carries_driver_settings_image_and_channels(account, aws, source_dir):
    from sagemaker.core.training.configs import Compute, InputData
    from sagemaker.train.distributed import Torchrun

    trainer = cloud_trainer(
        source_dir,
        account,
        distributed=Torchrun(process_count_per_node=4),
        compute=Compute(instance_type="ml.p5.48xlarge", instance_count=2),
    )
    trainer.train(input_data_config=[InputData(channel_name="train", data_source="s3://data/train")], wait=False)

    (body,) = [body for target, body in aws() if target == "SageMaker.CreateTrainingJob"]
    spec = body["AlgorithmSpecification"]
    assert spec["TrainingImage"] == DLC and spec["ContainerEntrypoint"] == ["/bin/bash"]
    assert "sm_drivers/sm_train.sh" in spec["ContainerArguments"][-1]
    assert {"compiler:compile_seconds", "compiler:graph_breaks"} <= {item["Name"] for item in spec["MetricDefinitions"]}
    assert body["HyperParameters"] == SENT  # the user's, exactly: no sagemaker_* key
    settings = contract.settings_from_environment(body["Environment"])
    assert settings.entry_point == "echo.py" and settings.config == TrainingCompilerConfig(debug=True)
    assert body["ResourceConfig"]["InstanceCount"] == 2 and body["RoleArn"] == account
    uris = channels(body)
    assert set(uris) == {"train", "code", "sm_drivers"} and uris["train"] == "s3://data/train"
    # The user's code channel is theirs alone: the driver and sagemaker_tc travel in sm_drivers.
    assert set(s3_folder(uris["code"])) == {path.name for path in source_dir.iterdir() if path.is_file()}
    distributed_config = check_drivers(s3_folder(uris["sm_drivers"]))
    assert distributed_config == {contract.DRIVER_TORCHRUN: True, contract.DRIVER_PROCESSES: 4}


def test_the_driver_turns_what_the_sdk_sent_into_the_launchers_torchrun(tmp_path):
    """What the request above carries, as sm_train.sh hands it to the driver on the second of two hosts."""
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(SENT))
    environ = {
        contract.ENV_BASE_DIR: str(tmp_path),
        contract.ENV_SETTINGS: contract.encode_environment(TrainingCompilerConfig(), entry_point="echo.py")[
            contract.ENV_SETTINGS
        ],
        contract.ENV_DISTRIBUTED_CONFIG: json.dumps({contract.DRIVER_TORCHRUN: True, contract.DRIVER_PROCESSES: 4}),
        contract.ENV_HOSTS: json.dumps(["algo-1", "algo-2"]),
        contract.ENV_CURRENT_HOST: "algo-2",
        contract.ENV_PYTHONPATH: "/user/path",
    }
    entry_script, arguments = modeltrainer.prepare(environ, tmp_path / "drivers")
    assert entry_script == "echo.py"
    assert arguments == [part for name, text in SENT.items() for part in (f"--{name}", text)]
    assert environ[contract.ENV_PYTHONPATH].split(":") == [str(tmp_path / "drivers"), "/user/path"]
    command = distributed.torchrun_command("echo.py", arguments, environ)
    assert {"--nnodes=2", "--node_rank=1", "--nproc_per_node=4", "--master_addr=algo-1"} <= set(command)
    assert command[-len(arguments) - 1 :] == ["echo.py", *arguments]


def test_torchrun_without_a_count_runs_one_process_per_gpu_on_each_host(tmp_path):
    """Torchrun() on two 8-GPU hosts: SM_DISTRIBUTED_CONFIG gives no count, so the launcher takes SM_NUM_GPUS."""
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps({"epochs": "1"}))
    environ = {
        contract.ENV_BASE_DIR: str(tmp_path),
        **contract.encode_environment(TrainingCompilerConfig(), entry_point="train.py"),
        contract.ENV_DISTRIBUTED_CONFIG: json.dumps({contract.DRIVER_TORCHRUN: True, contract.DRIVER_PROCESSES: None}),
        contract.ENV_HOSTS: json.dumps(["algo-1", "algo-2"]),
        contract.ENV_CURRENT_HOST: "algo-1",
        contract.ENV_NUM_GPUS: "8",
    }
    entry_script, arguments = modeltrainer.prepare(environ, tmp_path / "drivers")
    assert json.loads(environ[contract.ENV_FRAMEWORK_PARAMS]) == {contract.HP_TORCH_DISTRIBUTED: True}
    command = distributed.torchrun_command(entry_script, arguments, environ)
    assert {"--nnodes=2", "--node_rank=0", "--nproc_per_node=8"} <= set(command)
    assert command[-3:] == ["train.py", "--epochs", "1"]


def test_pipeline_step_definition_runs_our_driver(account, aws, source_dir):
    from sagemaker.core.training.configs import InputData
    from sagemaker.core.workflow.pipeline_context import PipelineSession
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import TrainingStep

    session = PipelineSession(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET)
    trainer = cloud_trainer(source_dir, account, session=session)
    with pytest.warns(UserWarning, match="PipelineSession"):
        step_args = trainer.train(input_data_config=[InputData(channel_name="train", data_source="s3://data/train")])
    pipeline = Pipeline(
        name="tc-v3", steps=[TrainingStep(name="TrainCompiled", step_args=step_args)], sagemaker_session=session
    )

    (step,) = json.loads(pipeline.definition())["Steps"]
    arguments = step["Arguments"]
    assert step["Type"] == "Training" and arguments["AlgorithmSpecification"]["TrainingImage"] == DLC
    assert arguments["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    assert arguments["HyperParameters"] == SENT
    assert contract.settings_from_environment(arguments["Environment"]).config.debug is True
    assert check_drivers(s3_folder(channels(arguments)["sm_drivers"])) == {
        contract.DRIVER_TORCHRUN: False,
        contract.DRIVER_PROCESSES: None,
    }
    assert not [target for target, _ in aws() if target == "SageMaker.CreateTrainingJob"]


def test_local_container_runs_sm_train_with_our_driver(fake_docker, source_dir, tmp_path):
    from sagemaker.core.training.configs import Compute, InputData, SourceCode
    from sagemaker.train.model_trainer import Mode

    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.tsv").write_text("sentence\tlabel\n")
    (tmp_path / "root").mkdir()
    trainer = ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER,
        training_image="sagemaker-tc-test:latest",
        source_code=SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
        compute=Compute(instance_type="local_gpu", instance_count=1),
        hyperparameters=HYPERPARAMETERS,
        local_container_root=str(tmp_path / "root"),
        compiler_config=TrainingCompilerConfig(),
    )
    trainer.train(input_data_config=[InputData(channel_name="train", data_source=str(data))])

    run = fake_docker / "run"
    (service,) = yaml.safe_load((run / "docker-compose.yaml").read_text())["services"].values()
    assert service["image"] == "sagemaker-tc-test:latest" and service["entrypoint"][0] == "/bin/bash"
    assert service["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    environment = dict(item.split("=", 1) for item in service["environment"])
    assert contract.settings_from_environment(environment).entry_point == "echo.py"
    mounts = {volume.rsplit(":", 1)[1]: volume.rsplit(":", 1)[0] for volume in service["volumes"]}
    assert mounts["/opt/ml/input/data/code"] == str(source_dir) and mounts["/opt/ml/input/data/train"] == str(data)
    drivers = run / mounts["/opt/ml/input/data/sm_drivers"].rsplit("/", 1)[1]
    files = {path.relative_to(drivers).as_posix(): path.read_bytes() for path in drivers.rglob("*") if path.is_file()}
    assert check_drivers(files) == {contract.DRIVER_TORCHRUN: False, contract.DRIVER_PROCESSES: None}
    assert json.loads((run / "algo-1" / "input" / "config" / "hyperparameters.json").read_text()) == SENT


def test_local_container_without_docker_fails_before_anything_starts(fake_docker, source_dir, tmp_path, monkeypatch):
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    from sagemaker_tc import DockerNotAvailableError

    monkeypatch.setenv("NO_ENGINE", "1")
    (tmp_path / "root").mkdir()
    trainer = ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER,
        training_image="sagemaker-tc-test:latest",
        source_code=SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
        compute=Compute(instance_type="local_cpu"),
        local_container_root=str(tmp_path / "root"),
        compiler_config=TrainingCompilerConfig(),
    )
    with pytest.raises(DockerNotAvailableError, match="no Docker engine answers"):
        trainer.train()
    assert not (fake_docker / "command").exists()


def test_sagemaker_trains_default_cpu_instance_is_accepted_with_a_warning_at_the_users_line(account, source_dir):
    from sagemaker_tc import CpuInstanceWarning

    with pytest.warns(CpuInstanceWarning, match="ml.m5.xlarge is a CPU instance") as caught:
        trainer = cloud_trainer(source_dir, account, compute=None)  # sagemaker-train's default: ml.m5.xlarge
    assert warned_from(caught, CpuInstanceWarning) == [__file__] and trainer.compute.instance_type == "ml.m5.xlarge"
