"""sagemaker_tc.ModelTrainer takes the estimators' argument checks (issue 22): the same inputs are
refused with the same named errors, before sagemaker-train's defaults call AWS."""

from __future__ import annotations

import pytest

from sagemaker_tc import (
    EstimatorArgumentError,
    HyperparameterError,
    ModelTrainer,
    ModelTrainerArgumentError,
    SourceNotFoundError,
    TrainingCompilerConfig,
    UnsupportedInstanceTypeError,
)
from sagemaker_tc.errors import ReservedEnvironmentWarning

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture
def build(source_dir, tmp_path):
    """A compiler ModelTrainer for ``echo.py`` on a SageMaker GPU instance; ``source`` updates the
    SourceCode fields, other ``overrides`` replace arguments."""
    from sagemaker.core.training.configs import Compute, SourceCode

    def _build(**overrides):
        source = {"source_dir": str(source_dir), "entry_script": "echo.py", **overrides.pop("source", {})}
        kwargs = {
            "training_image": DLC,
            "source_code": SourceCode(**source),
            "compute": Compute(instance_type="ml.g5.2xlarge"),
            "role": ROLE,
            "local_container_root": str(tmp_path),
            "compiler_config": TrainingCompilerConfig(),
            **overrides,
        }
        return ModelTrainer(**kwargs)

    return _build


def cases():
    from sagemaker.core.shapes import StoppingCondition
    from sagemaker.core.training.configs import Compute

    return [
        ({"source": {"entry_script": "../outside.py"}}, SourceNotFoundError, "must be inside source_dir"),
        ({"source": {"entry_script": "/etc/outside.py"}}, SourceNotFoundError, "must be inside source_dir"),
        ({"source": {"entry_script": "missing.py"}}, SourceNotFoundError, "was not found in source_dir"),
        (
            {"compute": Compute(instance_type="ml.g5.2xlarge", instance_count=0)},
            UnsupportedInstanceTypeError,
            "positive integer, got 0",
        ),
        (
            {"compute": Compute(instance_type="ml.g5.2xlarge", instance_count=10**6)},
            UnsupportedInstanceTypeError,
            "more than sagemaker-tc accepts",
        ),
        ({"hyperparameters": {"lr": float("nan")}}, HyperparameterError, "cannot be JSON-encoded"),
        ({"hyperparameters": {"lr": float("inf")}}, HyperparameterError, "cannot be JSON-encoded"),
        ({"hyperparameters": {f"h{i}": i for i in range(101)}}, HyperparameterError, "which leaves 100"),
        ({"environment": {"SM_MODEL_DIR": "/x"}}, EstimatorArgumentError, "'SM_MODEL_DIR' is reserved"),
        ({"environment": {"SAGEMAKER_BASE_DIR": "/x"}}, EstimatorArgumentError, "'SAGEMAKER_BASE_DIR' is reserved"),
        (
            {"environment": {f"V{i}": "1" for i in range(100)}},
            EstimatorArgumentError,
            "adds SM_TRAINING_COMPILER_SETTINGS",
        ),
        (
            {"stopping_condition": StoppingCondition(max_runtime_in_seconds=28 * 86400 + 1)},
            EstimatorArgumentError,
            "at most 28 days",
        ),
        ({"training_image": 123}, ModelTrainerArgumentError, r"training_image: got int 123, accepted: Input should be"),
        ({"compute": "ml.g5.2xlarge"}, ModelTrainerArgumentError, r"ModelTrainer arguments not accepted: compute"),
    ]


@pytest.mark.parametrize("case", range(14))
def test_the_estimators_checks_refuse_the_same_inputs(build, case):
    overrides, error, message = cases()[case]
    with pytest.raises(error, match=message):
        build(**overrides)


def test_wrong_types_are_named_with_the_compiler_off_too(build):
    with pytest.raises(
        ModelTrainerArgumentError, match=r"training_image: got int 123, accepted: .*valid string"
    ) as raised:
        build(training_image=123, compute=7, compiler_config=None)
    assert "compute: got int 7, accepted: " in str(raised.value)  # every argument, one line each


def test_an_entry_script_that_is_a_folder_is_named(build, source_dir):
    (source_dir / "pkg.py").mkdir()
    with pytest.raises(SourceNotFoundError, match="is a folder, not a script"):
        build(source={"entry_script": "pkg.py"})


def test_valid_edges_are_accepted_and_a_torchrun_name_warns(build, aws, monkeypatch):
    import boto3
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.shapes import StoppingCondition

    boto3.client("s3").create_bucket(Bucket="tc-round2")
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")  # moto has no SimulatePrincipalPolicy
    session = Session(boto_session=boto3.Session(region_name="us-east-1"), default_bucket="tc-round2")

    with pytest.warns(ReservedEnvironmentWarning, match="'MASTER_PORT' is one torchrun sets"):
        trainer = build(
            hyperparameters={f"h{i}": i for i in range(100)},
            environment={"MASTER_PORT": "29500"},
            stopping_condition=StoppingCondition(max_runtime_in_seconds=28 * 86400),
            sagemaker_session=session,
        )
    assert trainer.compiler_enabled and trainer.environment["MASTER_PORT"] == "29500"
