"""Issue 33, the rest of the silently accepted inputs: a file-system channel without a VPC, a
read-only local checkpoint location, a bogus plan file in a checkpoint."""

from __future__ import annotations

import pytest

from sagemaker_tc import ChannelNotFoundError, FileSystemInput

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CLOUD = {"instance_type": "ml.g5.xlarge", "role": ROLE, "image_uri": "img", "output_path": "s3://tc-bucket/jobs"}
EFS = ("fs-0123456789abcdef0", "EFS", "/data/train")


def test_a_file_system_channel_without_subnets_is_refused_before_any_upload(make):
    with pytest.raises(ChannelNotFoundError, match="'train' is a file system .* pass subnets"):
        make(**CLOUD).fit({"train": FileSystemInput(*EFS)}, wait=False)  # refused before any AWS call


def test_a_file_system_channel_with_a_vpc_passes_the_check():
    from sagemaker_tc.sdk.channels import check_channels, check_file_system_vpc

    channels = check_channels({"train": FileSystemInput(*EFS), "val": "s3://tc-bucket/val"}, cloud=True)
    check_file_system_vpc(channels, ["subnet-0123abcd"])  # no error
    check_file_system_vpc({"val": channels["val"]}, None)  # S3 channels need no VPC


def test_modeltrainer_refuses_a_file_system_input_without_networking(source_dir, aws, monkeypatch):
    import boto3
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.shapes import FileSystemDataSource
    from sagemaker.core.training.configs import Compute, InputData, SourceCode

    from sagemaker_tc import ModelTrainer, TrainingCompilerConfig

    boto3.client("s3").create_bucket(Bucket="tc-round3b")
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")  # moto has no SimulatePrincipalPolicy
    trainer = ModelTrainer(
        training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312",
        source_code=SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
        compute=Compute(instance_type="ml.g5.2xlarge"),
        role=ROLE,
        compiler_config=TrainingCompilerConfig(),
        sagemaker_session=Session(boto_session=boto3.Session(region_name="us-east-1"), default_bucket="tc-round3b"),
    )
    efs = FileSystemDataSource(
        file_system_id=EFS[0], file_system_type=EFS[1], directory_path=EFS[2], file_system_access_mode="ro"
    )
    with pytest.raises(ChannelNotFoundError, match="'train' is a file system"):
        trainer.train(input_data_config=[InputData(channel_name="train", data_source=efs)], wait=False)
    assert not [target for target, _ in aws() if target.endswith("CreateTrainingJob")]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json {", "it is not a JSON object"),
        ('["regional"]', "it is not a JSON object"),
        ('{"requested": "../../etc/passwd"}', "it names no known plan"),
        ('{"requested": "turbo"}', "it names no known plan"),
        ('{"requested": "auto", "decision": "regional"}', "its decision names no known plan"),
        ('{"requested": "auto", "decision": {"chosen": "bogus"}}', "its decision names no known plan"),
    ],
)
def test_a_bogus_plan_file_is_ignored_with_a_warning(tmp_path, caplog, text, problem):
    from sagemaker_tc.checkpoints import PLAN_FILE
    from sagemaker_tc.compiler.resume import saved_plan

    checkpoint = tmp_path / "checkpoint-5"
    checkpoint.mkdir()
    (checkpoint / PLAN_FILE).write_text(text)
    with caplog.at_level("WARNING", logger="sagemaker_tc.compiler"):
        assert saved_plan(checkpoint) is None
    (message,) = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert problem in message and "chooses its compile plan as a new job does" in message


def test_a_plan_file_that_is_a_link_out_of_its_folder_is_not_followed(tmp_path, caplog):
    from sagemaker_tc.checkpoints import PLAN_FILE
    from sagemaker_tc.compiler.resume import saved_plan

    outside = tmp_path / "outside.json"
    outside.write_text('{"requested": "auto", "decision": {"chosen": "model"}}')
    checkpoint = tmp_path / "checkpoint-5"
    checkpoint.mkdir()
    (checkpoint / PLAN_FILE).symlink_to(outside)
    with caplog.at_level("WARNING", logger="sagemaker_tc.compiler"):
        assert saved_plan(checkpoint) is None
    assert "it is a link or not a file" in caplog.text


def test_a_plan_file_a_job_wrote_is_taken_with_its_known_fields_only(tmp_path):
    from sagemaker_tc.checkpoints import PLAN_FILE
    from sagemaker_tc.compiler.resume import saved_plan

    checkpoint = tmp_path / "checkpoint-5"
    checkpoint.mkdir()
    assert saved_plan(checkpoint) is None  # no plan file: nothing, and nothing to warn about
    (checkpoint / PLAN_FILE).write_text('{"requested": "auto", "decision": {"chosen": "eager", "extra": "/etc"}}')
    assert saved_plan(checkpoint) == {"requested": "auto", "decision": {"chosen": "eager"}}
    (checkpoint / PLAN_FILE).write_text('{"requested": "regional"}')
    assert saved_plan(checkpoint) == {"requested": "regional"}


def test_local_process_refuses_a_path_that_drops_this_machines_folders(make, monkeypatch):
    from sagemaker_tc import EstimatorArgumentError

    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    with pytest.raises(EstimatorArgumentError, match=r"leaves out 2 folder\(s\) of this machine's PATH") as raised:
        make(environment={"PATH": "/opt/secret-tools:/usr/bin"})
    assert "secret-tools" not in str(raised.value)  # the value is never shown
    assert make(environment={"PATH": "/opt/tools:/usr/local/bin:/usr/bin:/bin"}).environment["PATH"].startswith("/opt")
    # Docker local mode: the container's PATH, as on SageMaker
    make(environment={"PATH": "/opt/tools"}, instance_type="local", image_uri="img")


@pytest.mark.parametrize("name", ["", "job\n", None, 7])
def test_attach_names_a_bad_job_name_before_any_aws_call(name):
    from sagemaker_tc import EstimatorArgumentError, HuggingFace

    with pytest.raises(EstimatorArgumentError, match="is not a training job's name: SageMaker's job names are 1-63"):
        HuggingFace.attach(name)


def test_a_host_logs_last_exception_is_collected_as_it_streams(tmp_path):
    import io
    import sys

    from sagemaker_tc.sdk.local.hosts import HostCommand, run_hosts

    script = "def train():\n    raise ValueError('learning rate must be positive')\n\ntrain()\n"
    command = HostCommand([sys.executable, "-c", script], tmp_path, {})
    exceptions = {}
    codes = run_hosts({"algo-1": command}, {"algo-1": tmp_path}, {}, io.StringIO(), max_run=60, exceptions=exceptions)
    assert codes == {"algo-1": 1}
    assert exceptions["algo-1"].line == "ValueError: learning rate must be positive"


def test_a_failure_without_the_compiler_starts_with_the_scripts_exception(tmp_path):
    from sagemaker_training.errors import ExecuteUserScriptError

    from sagemaker_tc.sdk.local.process import _failure_reason

    toolkit = str(ExecuteUserScriptError(cmd="/usr/bin/python3 -- train.py", return_code=1, output=""))
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "failure").write_text(toolkit)  # what the toolkit writes: ErrorMessage ""
    exception = "ValueError: learning rate must be positive"
    assert _failure_reason(tmp_path, 1, exception) == f"{exception}\n{toolkit}"
    (tmp_path / "output" / "failure").write_text(f"{exception}\nTraceback ...")  # the compiler's launcher's
    assert _failure_reason(tmp_path, 1, exception) == f"{exception}\nTraceback ..."  # already led by it
