"""SageMaker Pipelines: under a PipelineSession, fit() gives a TrainingStep its arguments (moto-backed S3)."""

import json

import boto3
import pytest

from sagemaker_tc import HuggingFace, TrainingCompilerConfig

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "tc-pipeline-bucket"


def test_pipeline_definition_carries_image_compiler_and_launcher(aws, source_dir):
    from sagemaker.core.workflow.parameters import ParameterString
    from sagemaker.core.workflow.pipeline_context import PipelineSession
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import TrainingStep

    boto3.client("s3").create_bucket(Bucket=BUCKET)
    session = PipelineSession(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET)
    instance_type = ParameterString(name="TrainInstanceType", default_value="ml.p5.48xlarge")
    estimator = HuggingFace(
        "echo.py",
        source_dir=str(source_dir),
        role=ROLE,
        instance_type=instance_type,
        transformers_version="4.56",
        pytorch_version="2.8",
        py_version="py312",
        compiler_config=TrainingCompilerConfig(debug=True),
        output_path=f"s3://{BUCKET}/jobs",
        sagemaker_session=session,
    )
    with pytest.warns(UserWarning, match="PipelineSession"):
        step_args = estimator.fit({"train": "s3://bucket/train"})
    step = TrainingStep(name="TrainCompiled", step_args=step_args)
    pipeline = Pipeline(name="tc-pipeline", parameters=[instance_type], steps=[step], sagemaker_session=session)

    definition = json.loads(pipeline.definition())
    (train_step,) = definition["Steps"]
    arguments = train_step["Arguments"]
    assert train_step["Type"] == "Training"
    assert arguments["ResourceConfig"]["InstanceType"] == {"Get": "Parameters.TrainInstanceType"}
    assert "huggingface-pytorch-training:2.8" in arguments["AlgorithmSpecification"]["TrainingImage"]
    hps = arguments["HyperParameters"]
    assert hps["sagemaker_training_compiler_enabled"] == "true"
    assert hps["sagemaker_training_compiler_debug_mode"] == "true"
    assert json.loads(hps["sagemaker_training_compiler_settings"])["entry_point"] == "echo.py"
    assert hps["sagemaker_program"] == '"sagemaker_tc_launcher.py"'
    assert json.loads(hps["sagemaker_submit_directory"]).startswith(f"s3://{BUCKET}/")
    # Building the definition created no training job.
    assert not [target for target, _ in aws() if target == "SageMaker.CreateTrainingJob"]
    # The same code gives the same definition (the source is named by its content hash), so step
    # caching can match and rebuilding does not pile up copies in S3.
    assert json.loads(pipeline.definition()) == definition


def test_pipeline_parameter_instance_types_are_checked(aws, source_dir):
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.workflow.parameters import ParameterString

    from sagemaker_tc import EstimatorArgumentError, UnsupportedInstanceTypeError

    common = {"source_dir": str(source_dir), "role": ROLE, "image_uri": "img", "output_path": f"s3://{BUCKET}/jobs"}
    with pytest.raises(UnsupportedInstanceTypeError, match="must default to an ml.\\* instance type"):
        HuggingFace("echo.py", instance_type=ParameterString(name="T", default_value="local_process"), **common)
    with pytest.raises(UnsupportedInstanceTypeError, match="needs a default_value"):
        HuggingFace("echo.py", instance_type=ParameterString(name="T"), **common)
    plain = HuggingFace(
        "echo.py",
        instance_type=ParameterString(name="T", default_value="ml.g5.xlarge"),
        sagemaker_session=Session(boto_session=boto3.Session(region_name="us-east-1")),
        **common,
    )
    with pytest.raises(EstimatorArgumentError, match="build the step under a PipelineSession"):
        plain.fit({"train": "s3://bucket/train"}, wait=False)
    assert not [target for target, _ in aws() if target == "SageMaker.CreateTrainingJob"]
