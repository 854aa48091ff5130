"""sagemaker_tc.ModelTrainer ships no file from outside SourceCode.source_dir (issue 22): a symbolic link
that leads outside it is refused with SourceLinkError, by the estimators' rules
(sagemaker_tc.sdk.source_tree), on each path that ships code: a training job's S3 upload (moto's
server), Docker local mode (the stand-in docker CLI), local_process, and the driver folder."""

import shutil

import boto3
import pytest

from sagemaker_tc import ModelTrainer, SourceLinkError, TrainingCompilerConfig
from sagemaker_tc.sdk.source import runtime_entries, write_driver_folder

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "tc-links-bucket"
OUTSIDE = r"link 'passwd' points to '.*credentials', outside source_dir '.*src': .* copy what the job needs into"


@pytest.fixture
def secret(tmp_path):
    """A file outside source_dir that must never be shipped (a stand-in for ~/.aws/credentials)."""
    folder = tmp_path / "home" / ".aws"
    folder.mkdir(parents=True)
    path = folder / "credentials"
    path.write_text("[default]\naws_secret_access_key = not-for-the-job\n")
    return path


def source_code(source_dir, **fields):
    from sagemaker.core.training.configs import SourceCode

    return SourceCode(source_dir=str(source_dir), entry_script="echo.py", **fields)


def local_trainer(source_dir, root, instance_type, **overrides):
    from sagemaker.core.training.configs import Compute
    from sagemaker.train.model_trainer import Mode

    kwargs = {
        "training_mode": Mode.LOCAL_CONTAINER,
        "training_image": DLC,
        "source_code": source_code(source_dir),
        "compute": Compute(instance_type=instance_type),
        "local_container_root": str(root),
        "compiler_config": TrainingCompilerConfig(),
        **overrides,
    }
    return ModelTrainer(**kwargs)


def test_local_process_refuses_a_link_outside_when_built_and_before_the_job_folder(source_dir, tmp_path, secret):
    root = tmp_path / "jobs"
    (source_dir / "passwd").symlink_to(secret)
    with pytest.raises(SourceLinkError, match=OUTSIDE):
        local_trainer(source_dir, root, "local_process")

    (source_dir / "passwd").unlink()
    trainer = local_trainer(source_dir, root, "local_process")
    uncompiled = local_trainer(source_dir, root, "local_process", compiler_config=None)
    (source_dir / "passwd").symlink_to(secret)  # appears after the trainers were built
    for job in (trainer, uncompiled):  # local_process copies the code with or without the compiler
        with pytest.raises(SourceLinkError, match=OUTSIDE):
            job.train()
    assert not root.exists() or not any(root.iterdir())  # no job folder was made


@pytest.mark.slow
def test_local_process_ships_links_inside_source_dir_as_files_and_leaves_out_ignored_names(
    source_dir, tmp_path, secret
):
    (source_dir / "helpers").mkdir()
    (source_dir / "helpers" / "util.py").write_text("VALUE = 1\n")
    (source_dir / "util_link.py").symlink_to(source_dir / "helpers" / "util.py")
    (source_dir / "helpers_link").symlink_to("helpers", target_is_directory=True)
    (source_dir / "private.env").symlink_to(secret)  # matched by an ignore pattern: not shipped, not refused
    code = source_code(source_dir, ignore_patterns=["*.env", "__pycache__"])
    trainer = local_trainer(source_dir, tmp_path / "jobs", "local_process", source_code=code)

    trainer.train(logs=False)

    shipped = trainer.latest_local_job.job_dir / "input" / "data" / "code"
    assert (shipped / "util_link.py").read_text() == "VALUE = 1\n" and not (shipped / "util_link.py").is_symlink()
    assert (shipped / "helpers_link" / "util.py").is_file() and not (shipped / "helpers_link").is_symlink()
    assert not (shipped / "private.env").exists()


def test_docker_local_mode_refuses_a_link_outside_before_compose_runs(fake_docker, source_dir, tmp_path, secret):
    root = tmp_path / "root"
    root.mkdir()
    (source_dir / "passwd").symlink_to(secret)
    with pytest.raises(SourceLinkError, match=OUTSIDE):
        local_trainer(source_dir, root, "local_cpu")

    (source_dir / "passwd").unlink()
    trainer = local_trainer(source_dir, root, "local_gpu")
    (source_dir / "passwd").symlink_to(secret)
    with pytest.raises(SourceLinkError, match=OUTSIDE):
        trainer.train()
    assert not (fake_docker / "command").exists() and not any(root.iterdir())


def test_a_training_job_refuses_a_link_outside_before_anything_is_uploaded(aws, monkeypatch, source_dir, secret):
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.training.configs import Compute, OutputDataConfig

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")  # moto has no SimulatePrincipalPolicy
    kwargs = {
        "training_image": DLC,
        "source_code": source_code(source_dir),
        "compute": Compute(instance_type="ml.g5.2xlarge"),
        "role": ROLE,
        "output_data_config": OutputDataConfig(s3_output_path=f"s3://{BUCKET}/jobs"),
        "sagemaker_session": Session(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET),
        "compiler_config": TrainingCompilerConfig(),
    }
    (source_dir / "passwd").symlink_to(secret)
    with pytest.raises(SourceLinkError, match=OUTSIDE):
        ModelTrainer(**kwargs)

    (source_dir / "passwd").unlink()
    trainer = ModelTrainer(**kwargs)
    (source_dir / "passwd").symlink_to(secret)
    with pytest.raises(SourceLinkError, match=OUTSIDE):
        trainer.train(wait=False)
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0
    assert not [target for target, _ in aws() if target == "SageMaker.CreateTrainingJob"]


def test_the_driver_folder_ships_no_link_leading_outside_the_package(tmp_path, secret):
    import sagemaker_tc

    package = tmp_path / "package"
    shutil.copytree(
        sagemaker_tc.__file__.rsplit("/", 1)[0], package, ignore=shutil.ignore_patterns("__pycache__", "sdk")
    )
    (package / "container" / "passwd").symlink_to(secret)
    with pytest.raises(SourceLinkError, match=r"the sagemaker_tc package link 'container/passwd' points to"):
        write_driver_folder(tmp_path / "drivers", package_dir=package)
    assert not (tmp_path / "drivers").exists()

    written = write_driver_folder(tmp_path / "real")  # the installed package: regular files, no SDK
    files = [path for path in written.rglob("*") if path.is_file()]
    assert files and not [path for path in written.rglob("*") if path.is_symlink()]
    assert len(files) == 1 + sum(not entry.is_dir for entry in runtime_entries())  # the driver script + package
    assert not (written / "sagemaker_tc" / "sdk").exists()
