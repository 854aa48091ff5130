"""SageMaker training jobs against moto's server: the real CreateTrainingJob request and S3 upload."""

import io
import json
import tarfile
import warnings

import boto3
import pytest

from sagemaker_tc import CpuInstanceWarning, HuggingFace, PyTorch, TrainingCompilerConfig, UnsupportedImageError

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "tc-test-bucket"


@pytest.fixture
def bucket(aws):
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/jobs"


def pytorch(source_dir, bucket, **overrides):
    """A compiler-enabled PyTorch estimator for a cloud job (PyTorch 2.8 DLC), with ``overrides``."""
    kwargs = {
        "source_dir": str(source_dir),
        "role": ROLE,
        "instance_type": "ml.g6.xlarge",
        "framework_version": "2.8",
        "py_version": "py312",
        "compiler_config": TrainingCompilerConfig(),
        "output_path": bucket,
    }
    kwargs.update(overrides)
    return PyTorch("echo.py", **kwargs)


def create_requests(recorded):
    return [body for target, body in recorded() if target == "SageMaker.CreateTrainingJob"]


def source_archive(request):
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    bucket, key = submit.removeprefix("s3://").split("/", 1)
    data = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getnames()


def test_huggingface_p5_job_carries_the_compiler_and_the_launcher(aws, bucket, source_dir):
    estimator = HuggingFace(
        "echo.py",
        source_dir=str(source_dir),
        role=ROLE,
        instance_type="ml.p5.48xlarge",
        transformers_version="4.56",
        pytorch_version="2.8",
        py_version="py312",
        hyperparameters={"epochs": 2, "greeting": "hello world"},
        compiler_config=TrainingCompilerConfig(),
        output_path=bucket,
    )
    estimator.fit({"train": "s3://bucket/train"}, wait=False)

    (request,) = create_requests(aws)
    hps = request["HyperParameters"]
    assert hps["sagemaker_training_compiler_enabled"] == "true"
    assert hps["sagemaker_training_compiler_debug_mode"] == "false"
    settings = json.loads(hps["sagemaker_training_compiler_settings"])
    assert settings["config"]["backend"] == "inductor" and settings["entry_point"] == "echo.py"
    assert hps["sagemaker_program"] == '"sagemaker_tc_launcher.py"'
    assert hps["epochs"] == "2" and hps["greeting"] == '"hello world"'
    assert json.loads(hps["sagemaker_region"]) == "us-east-1"
    image = request["AlgorithmSpecification"]["TrainingImage"]
    assert image.startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.8")
    assert "gpu-py312" in image
    assert request["ResourceConfig"]["InstanceType"] == "ml.p5.48xlarge"
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://bucket/train"
    assert request["OutputDataConfig"]["S3OutputPath"] == bucket
    assert request["RoleArn"] == ROLE
    names = source_archive(request)
    assert {"echo.py", "sagemaker_tc_launcher.py", "sagemaker_tc/container/launcher.py"} <= set(names)
    # model_data reads the job (SDK v2): moto's jobs are Completed at once, so it is set without a wait
    job = estimator.latest_training_job
    assert job.status == "Completed" and estimator.model_data == f"{bucket}/{job.name}/output/model.tar.gz"


def test_waited_job_sets_model_data_and_attach_finds_it(aws, bucket, source_dir):
    estimator = pytorch(
        source_dir, bucket, checkpoint_s3_uri=f"{bucket}/checkpoints", checkpoint_local_path="/opt/ml/checkpoints"
    )
    estimator.fit(None, logs=False)
    (request,) = create_requests(aws)
    assert request["CheckpointConfig"] == {"S3Uri": f"{bucket}/checkpoints", "LocalPath": "/opt/ml/checkpoints"}
    job_name = estimator.latest_training_job.job_name
    assert estimator.model_data == f"{bucket}/{job_name}/output/model.tar.gz"
    attached = PyTorch.attach(job_name)  # an estimator, as SDK v2's attach returned
    assert isinstance(attached, PyTorch) and attached.latest_training_job.status == "Completed"
    assert attached.model_data == estimator.model_data


def test_cpu_instances_are_accepted_with_a_warning(aws, bucket, source_dir):
    with pytest.warns(CpuInstanceWarning, match="gains there are model-dependent"):
        estimator = pytorch(source_dir, bucket, instance_type="ml.m5.xlarge")
    estimator.fit(None, wait=False)
    (request,) = create_requests(aws)
    assert request["AlgorithmSpecification"]["TrainingImage"].endswith("pytorch-training:2.8-cpu-py312")


def test_warnings_point_at_the_users_call(source_dir):
    """Python shows a DeprecationWarning by default only when it points at __main__/user code."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PyTorch("echo.py", source_dir=str(source_dir), role=ROLE, instance_type="ml.c5.xlarge", image_uri="img")
        HuggingFace(
            "echo.py",
            source_dir=str(source_dir),
            role=ROLE,
            instance_type="ml.g5.xlarge",
            image_uri="img",
            distribution={"pytorchxla": {"enabled": True}},
        )
    assert [w.category for w in caught] == [CpuInstanceWarning, DeprecationWarning]
    assert all(w.filename == __file__ for w in caught)


def test_smtc_pytorchxla_is_an_alias_for_torchrun(aws, bucket, source_dir):
    with pytest.warns(DeprecationWarning, match="pytorchxla"):
        estimator = pytorch(
            source_dir,
            bucket,
            instance_type="ml.p4d.24xlarge",
            instance_count=2,
            distribution={"pytorchxla": {"enabled": True}},
        )
    estimator.fit(None, wait=False)
    (request,) = create_requests(aws)
    assert request["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert request["ResourceConfig"]["InstanceCount"] == 2


def test_image_uri_overrides_and_bad_versions_fail_before_any_request(aws, bucket, source_dir):
    common = {"source_dir": str(source_dir), "role": ROLE, "instance_type": "ml.g5.2xlarge", "output_path": bucket}
    old = PyTorch("echo.py", framework_version="1.13", py_version="py39", **common)
    with pytest.raises(UnsupportedImageError, match="needs PyTorch >= 2.7"):
        old.fit(None, wait=False)
    with pytest.raises(UnsupportedImageError, match="Supported"):
        PyTorch("echo.py", framework_version="2.8", py_version="py38", **common).fit(None, wait=False)
    assert create_requests(aws) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        custom = PyTorch("echo.py", image_uri="123.dkr.ecr.us-east-1.amazonaws.com/mine:1", **common)
    custom.fit(None, wait=False)
    (request,) = create_requests(aws)
    assert request["AlgorithmSpecification"]["TrainingImage"] == "123.dkr.ecr.us-east-1.amazonaws.com/mine:1"


def test_cloud_inputs_must_be_s3_and_role_is_required(aws, bucket, source_dir, tmp_path):
    from sagemaker_tc import ChannelNotFoundError, EstimatorArgumentError

    common = {"source_dir": str(source_dir), "instance_type": "ml.g5.2xlarge", "output_path": bucket}
    with pytest.raises(ChannelNotFoundError, match="read s3:// URIs"):
        PyTorch("echo.py", role=ROLE, image_uri="img", **common).fit({"train": str(tmp_path)}, wait=False)
    with pytest.raises(EstimatorArgumentError, match="role is required"):
        PyTorch("echo.py", image_uri="img", **common).fit(None, wait=False)
    with pytest.raises(EstimatorArgumentError, match="full IAM role ARN"):
        PyTorch("echo.py", role="SageMakerRole", image_uri="img", **common).fit(None, wait=False)
    with pytest.raises(EstimatorArgumentError, match="job_name 'bad_name!' is not accepted"):
        PyTorch("echo.py", role=ROLE, image_uri="img", **common).fit(None, wait=False, job_name="bad_name!")
    assert create_requests(aws) == []
    assert "Contents" not in boto3.client("s3").list_objects_v2(Bucket=BUCKET)  # nothing uploaded either


def test_sourcedir_in_s3_holds_links_inside_as_files_and_nothing_from_outside(aws, bucket, source_dir, tmp_path):
    """Issue 15: read sourcedir.tar.gz back from S3. Links inside source_dir are packed as what they
    point to; one outside is refused before anything is uploaded, unless the user opted in."""
    from sagemaker_tc import SourceLinkError

    secrets = tmp_path / "home" / ".aws"
    secrets.mkdir(parents=True)
    (secrets / "credentials").write_text("[default]\naws_secret_access_key = hunter2\n")
    (source_dir / "helpers").mkdir()
    (source_dir / "helpers" / "util.py").write_text("VALUE = 1\n")
    (source_dir / "helpers_link").symlink_to("helpers", target_is_directory=True)
    (source_dir / "echo_link.py").symlink_to(source_dir / "echo.py")

    estimator = pytorch(source_dir, bucket)
    (source_dir / "awsdir").symlink_to(secrets)  # appears after the estimator was built
    with pytest.raises(SourceLinkError, match=r"link 'awsdir' points to '.*\.aws', outside source_dir"):
        estimator.fit(None, wait=False)
    assert create_requests(aws) == [] and "Contents" not in boto3.client("s3").list_objects_v2(Bucket=BUCKET)

    (source_dir / "awsdir").unlink()
    estimator.fit(None, wait=False)
    (request,) = create_requests(aws)
    names = source_archive(request)
    assert {"helpers/util.py", "helpers_link/util.py", "echo_link.py"} <= set(names)
    assert not any(name.startswith("awsdir") for name in names)
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key=submit.split(f"{BUCKET}/", 1)[1])["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert tar.getmember("echo_link.py").isfile() and tar.getmember("helpers_link").isdir()
        assert tar.extractfile("echo_link.py").read() == (source_dir / "echo.py").read_bytes()

    (source_dir / "awsdir").symlink_to(secrets)
    pytorch(source_dir, bucket, allow_symlinks_outside_source_dir=True).fit(None, wait=False)
    shipped = source_archive(create_requests(aws)[-1])
    assert "awsdir/credentials" in shipped  # the documented opt-in ships it
