"""Issue 24's migration path: an SMTC-era notebook's estimator cell, unchanged except the import
(notebooks/05_migrate_from_smtc.ipynb), runs as a local_process job and, against moto, sends every
argument to CreateTrainingJob as SDK v2 sent it."""

from __future__ import annotations

import re

import pytest
from test_notebooks import execute, kernel, sagemaker_account, text_of, workdir  # noqa: F401 - fixtures used by name

NOTEBOOK = "05_migrate_from_smtc.ipynb"
KMS = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

# SDK v2's mapping of the notebook's arguments (sagemaker 2.x EstimatorBase -> _Job -> Session.train),
# written down here rather than derived from our code: request field -> the value SDK v2 sends.
SDK_V2_FIELDS = {
    ("RetryStrategy", "MaximumRetryAttempts"): 15,
    ("Tags",): [{"Key": "team", "Value": "nlp"}, {"Key": "cost-center", "Value": "1234"}],
    ("VpcConfig", "Subnets"): ["subnet-0a1b2c3d"],
    ("VpcConfig", "SecurityGroupIds"): ["sg-0a1b2c3d"],
    ("ResourceConfig", "VolumeKmsKeyId"): KMS,
    ("OutputDataConfig", "KmsKeyId"): KMS,
    ("EnableInterContainerTrafficEncryption",): True,
    ("EnableManagedSpotTraining",): True,
    ("StoppingCondition", "MaxRuntimeInSeconds"): 3600,
    ("StoppingCondition", "MaxWaitTimeInSeconds"): 7200,
    ("CheckpointConfig", "S3Uri"): "s3://notebook-bucket/smtc-migration/checkpoints",
    ("ResourceConfig", "KeepAlivePeriodInSeconds"): 1800,
    ("ResourceConfig", "InstanceType"): "ml.g5.2xlarge",
    ("AlgorithmSpecification", "TrainingInputMode"): "FastFile",
    ("HyperParameters", "sagemaker_container_log_level"): "20",
    ("HyperParameters", "sagemaker_training_compiler_enabled"): "true",
    ("HyperParameters", "max_steps"): "10",
    ("TensorBoardOutputConfig", "S3OutputPath"): "s3://notebook-bucket/smtc-migration/tensorboard",
    ("Environment", "TOKENIZERS_PARALLELISM"): "false",
    ("OutputDataConfig", "S3OutputPath"): "s3://notebook-bucket/smtc-migration/jobs",
}


def _field(request: dict, path: tuple[str, ...]):
    value = request
    for key in path:
        value = value.get(key, "<missing>") if isinstance(value, dict) else "<missing>"
    return value


def test_migration_notebook_sends_every_argument_to_sagemaker(sagemaker_account, kernel, workdir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("INSTANCE_TYPE", "ml.g5.2xlarge")
    monkeypatch.setenv("SAGEMAKER_BUCKET", "notebook-bucket")
    monkeypatch.setenv("KMS_KEY", KMS)
    out = text_of(execute(NOTEBOOK, kernel, workdir))
    (job,) = [body for target, body in sagemaker_account() if target == "SageMaker.CreateTrainingJob"]
    wrong = {path: _field(job, path) for path, value in SDK_V2_FIELDS.items() if _field(job, path) != value}
    assert not wrong, f"fields that differ from SDK v2's: {wrong}"
    # Debugger and the profiler off, as SMTC sent them: no hook, no rules, profiling disabled.
    # False flags are left out, as SDK v2 leaves them out (Session._get_train_request sends only True).
    assert "EnableNetworkIsolation" not in job
    assert "DebugHookConfig" not in job and "DebugRuleConfigurations" not in job
    assert job["ProfilerConfig"]["DisableProfiler"] is True
    assert "status Completed" in out.replace("  ", " ")


@pytest.mark.slow
def test_migration_notebook_runs_as_a_local_process_job(kernel, workdir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("INSTANCE_TYPE", "local_process")
    out = text_of(execute(NOTEBOOK, kernel, workdir))
    assert re.search(r"^status Completed$", out, re.MULTILINE)
    model = re.search(r"^model  file://(\S+/model\.tar\.gz)$", out, re.MULTILINE)
    assert model and model.group(1).startswith(str(workdir))  # the job's output stays in the run's folder
    # Each cloud-only setting is accepted and named once in the log as SageMaker's alone.
    for name in ("subnets", "volume_kms_key", "use_spot_instances", "keep_alive_period_in_seconds"):
        assert len(re.findall(rf"{name}\b[^\n]*applies on SageMaker only", out)) == 1, name
