"""Issue 34: the lines an SMTC-era notebook runs after the estimator, against moto's server (the
recorded endpoint), compared field by field with what SDK v2 sent and did."""

import json

import boto3
import pytest

from sagemaker_tc import EstimatorArgumentError, HuggingFace, PyTorch, TrainingCompilerConfig

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "tc-after-fit"


@pytest.fixture
def bucket(aws):
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/jobs"


def smtc_cell(source_dir, output_path=None, **overrides):
    """The estimator cell of Amazon's SMTC Hugging Face notebooks, only the import changed."""
    kwargs = {
        "source_dir": str(source_dir),
        "role": ROLE,
        "instance_type": "ml.p4d.24xlarge",
        "instance_count": 1,
        "transformers_version": "4.56",
        "pytorch_version": "2.8",
        "py_version": "py312",
        "hyperparameters": {"epochs": 1},
        "compiler_config": TrainingCompilerConfig(),
        "output_path": output_path,
    }
    kwargs.update(overrides)
    return HuggingFace("echo.py", **kwargs)


def created(recorded) -> list[dict]:
    return [body for target, body in recorded() if target == "SageMaker.CreateTrainingJob"]


def test_the_lines_after_fit_wait_false(aws, bucket, source_dir, capsys):
    """fit(wait=False); name; boto3's waiter / latest_training_job.wait(); model_data; logs; attach."""
    estimator = smtc_cell(source_dir, bucket)
    assert estimator.sagemaker_session is not None  # SDK v2 defaulted it to a session
    estimator.fit({"train": f"s3://{BUCKET}/train"}, wait=False, logs="All")
    name = estimator.latest_training_job.name
    assert name == estimator.latest_training_job.job_name and name.startswith("huggingface-pytorch-training-")
    waiter = estimator.sagemaker_session.sagemaker_client.get_waiter("training_job_completed_or_stopped")
    waiter.wait(TrainingJobName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 3})
    expected = f"{bucket}/{name}/output/model.tar.gz"
    assert estimator.model_data == expected  # read from the job, whatever waited for it
    estimator.latest_training_job.wait(logs=False)
    assert estimator.model_data == expected
    estimator.sagemaker_session.logs_for_job(name, wait=False)
    estimator.logs()  # follows the job to its end; moto has no log streams
    uploaded = estimator.sagemaker_session.upload_data(str(source_dir / "echo.py"), bucket=BUCKET, key_prefix="x")
    assert uploaded == f"s3://{BUCKET}/x/echo.py"


def test_model_data_is_none_before_fit_and_local_modes_need_no_session(source_dir, make):
    estimator = smtc_cell(source_dir)
    assert estimator.model_data is None
    local = make()
    assert local.sagemaker_session is None and local.model_data is None


@pytest.mark.parametrize("logs", ["All", "Training", "Rules", "None", None, False])
def test_sdk_v2_log_values_are_taken(aws, bucket, source_dir, logs):
    estimator = smtc_cell(source_dir, bucket)
    estimator.fit(None, wait=True, logs=logs)
    assert estimator.model_data.endswith("/output/model.tar.gz")


def test_a_bad_log_value_is_refused_before_the_job(aws, bucket, source_dir):
    with pytest.raises(EstimatorArgumentError, match=r"fit\(logs='Everything'\) is not accepted.*'All'"):
        smtc_cell(source_dir, bucket).fit(None, wait=True, logs="Everything")
    assert created(aws) == []


def test_experiment_config_reaches_the_request(aws, bucket, source_dir):
    config = {"ExperimentName": "smtc-exp", "TrialName": "trial-1", "RunName": "run-1"}
    smtc_cell(source_dir, bucket).fit(None, wait=False, experiment_config=config)
    (request,) = created(aws)
    assert request["ExperimentConfig"] == config  # as SDK v2 sent it
    with pytest.raises(EstimatorArgumentError, match=r"unknown keys \['Experiment'\]"):
        smtc_cell(source_dir, bucket).fit(None, wait=False, experiment_config={"Experiment": "x"})
    with pytest.raises(EstimatorArgumentError, match="ExperimentEntityName"):
        smtc_cell(source_dir, bucket).fit(None, wait=False, experiment_config={"ExperimentName": "a b"})
    assert len(created(aws)) == 1


def test_pytorch_estimator_has_the_same_surface(aws, bucket, source_dir):
    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        role=ROLE,
        instance_type="ml.g6.xlarge",
        framework_version="2.8",
        py_version="py312",
        output_path=bucket,
    )
    estimator.fit(None, wait=False)
    json.dumps(estimator.latest_training_job.describe(), default=str)
    assert estimator.model_data == f"{bucket}/{estimator.latest_training_job.name}/output/model.tar.gz"


RULE_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"


def test_rules_are_sent_as_sdk_v2_completed_them(aws, bucket, source_dir):
    """Rule.sagemaker / ProfilerRule.sagemaker (sagemaker-core's copies of SDK v2's classes): the
    region's rule image, a hook config on output_path with the rule's collections, a ProfilerConfig."""
    from sagemaker.core.debugger import rule_configs
    from sagemaker.core.debugger.debugger import ProfilerRule, Rule

    rules = [Rule.sagemaker(rule_configs.loss_not_decreasing()), ProfilerRule.sagemaker(rule_configs.ProfilerReport())]
    with pytest.warns(UserWarning, match="add overhead"):
        estimator = smtc_cell(source_dir, bucket, rules=rules)
    estimator.fit(None, wait=False)
    (request,) = created(aws)
    (debug_rule,) = request["DebugRuleConfigurations"]
    assert debug_rule["RuleEvaluatorImage"] == RULE_IMAGE
    assert debug_rule["RuleConfigurationName"] == "LossNotDecreasing"
    assert request["DebugHookConfig"] == {
        "S3OutputPath": bucket,
        "CollectionConfigurations": [{"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}}],
    }
    (profiler_rule,) = request["ProfilerRuleConfigurations"]
    assert profiler_rule["RuleEvaluatorImage"] == RULE_IMAGE
    assert request["ProfilerConfig"] == {"S3OutputPath": bucket}


def test_hook_and_profiler_configs_without_a_path_get_the_output_path(aws, bucket, source_dir):
    from sagemaker.core.debugger.debugger import CollectionConfig, DebuggerHookConfig
    from sagemaker.core.debugger.profiler_config import ProfilerConfig

    hook = DebuggerHookConfig(collection_configs=[CollectionConfig(name="weights")])
    with pytest.warns(UserWarning, match="add overhead"):
        estimator = smtc_cell(
            source_dir,
            bucket,
            debugger_hook_config=hook,
            profiler_config=ProfilerConfig(system_monitor_interval_millis=500),
        )
    estimator.fit(None, wait=False)
    (request,) = created(aws)
    assert request["DebugHookConfig"] == {
        "S3OutputPath": bucket,
        "CollectionConfigurations": [{"CollectionName": "weights"}],
    }
    assert request["ProfilerConfig"]["S3OutputPath"] == bucket
    assert request["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 500


def source_head(key: str) -> dict:
    return boto3.client("s3").head_object(Bucket=BUCKET, Key=key)


def test_default_bucket_prefix_holds_the_output_and_the_code(aws, bucket, source_dir):
    from sagemaker.core.helper.session_helper import Session

    session = Session(default_bucket=BUCKET, default_bucket_prefix="team-a")
    smtc_cell(source_dir, sagemaker_session=session).fit(None, wait=False, job_name="prefix-job")
    (request,) = created(aws)
    assert request["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/team-a/"  # as SDK v2
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    assert submit == f"s3://{BUCKET}/team-a/prefix-job/source/sourcedir.tar.gz"
    # a user's output_path is kept as given, and the code goes to <job>/source in its bucket (SDK v2)
    smtc_cell(source_dir, f"s3://{BUCKET}/mine", sagemaker_session=session).fit(None, wait=False, job_name="own")
    submit = json.loads(created(aws)[-1]["HyperParameters"]["sagemaker_submit_directory"])
    assert submit == f"s3://{BUCKET}/own/source/sourcedir.tar.gz"


def test_the_code_upload_is_encrypted_with_sse_kms(aws, bucket, source_dir):
    key_id = boto3.client("kms").create_key()["KeyMetadata"]["Arn"]
    smtc_cell(source_dir, bucket, output_kms_key=key_id).fit(None, wait=False, job_name="kms-job")
    (request,) = created(aws)
    assert request["OutputDataConfig"]["KmsKeyId"] == key_id
    head = source_head("kms-job/source/sourcedir.tar.gz")
    assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == key_id
    smtc_cell(source_dir, bucket).fit(None, wait=False, job_name="plain-job")  # SDK v2: aws:kms, AWS managed key
    assert source_head("plain-job/source/sourcedir.tar.gz")["ServerSideEncryption"] == "aws:kms"
    # code_location in another bucket: SDK v2 did not use output_kms_key there
    boto3.client("s3").create_bucket(Bucket="tc-code-elsewhere")
    smtc_cell(source_dir, bucket, output_kms_key=key_id, code_location="s3://tc-code-elsewhere/code").fit(
        None, wait=False, job_name="elsewhere"
    )
    head = boto3.client("s3").head_object(Bucket="tc-code-elsewhere", Key="code/elsewhere/source/sourcedir.tar.gz")
    assert head["ServerSideEncryption"] == "aws:kms" and "SSEKMSKeyId" not in head


TRCOMP_IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-trcomp-training:"
    "1.11.0-transformers4.21.1-gpu-py38-cu113-ubuntu20.04"
)


def test_smtc_trcomp_images_are_refused_with_the_compiler_on(source_dir):
    from sagemaker_tc import UnsupportedImageError

    with pytest.raises(UnsupportedImageError, match=r"image_uri '.*trcomp.*' carries PyTorch 1.11.*>= 2.7"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", image_uri=TRCOMP_IMAGE)
    # without the compiler the image is the user's to run, as in SDK v2
    assert smtc_cell(source_dir, f"s3://{BUCKET}/jobs", image_uri=TRCOMP_IMAGE, compiler_config=None).image_uri


def test_metric_definitions_count_the_compilers_own(source_dir):
    from sagemaker_tc.sdk.estimator import COMPILER_METRIC_DEFINITIONS

    added = len(COMPILER_METRIC_DEFINITIONS)
    mine = [{"Name": f"m{i}", "Regex": f"m{i}=([0-9.]+)"} for i in range(41 - added)]
    with pytest.raises(
        EstimatorArgumentError, match=rf"{41 - added} given \+ {added} the compiler adds = 41.*at most 40"
    ):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", metric_definitions=mine)
    smtc_cell(source_dir, f"s3://{BUCKET}/jobs", metric_definitions=mine[:-1])  # 40 in all is accepted
    smtc_cell(source_dir, f"s3://{BUCKET}/jobs", metric_definitions=mine, compiler_config=None)


def test_deploy_and_create_model_are_refused_with_the_way_to_do_it(source_dir):
    estimator = smtc_cell(source_dir, f"s3://{BUCKET}/jobs")
    for method in (estimator.deploy, estimator.create_model):
        with pytest.raises(
            EstimatorArgumentError, match=r"(?s)is not offered.*Model\.create.*EndpointConfig.*Endpoint\.create"
        ):
            method(initial_instance_count=1, instance_type="ml.g5.xlarge")


def test_first_version_error_lists_the_tested_stacks_and_s3_source_dir_says_why(source_dir):
    from sagemaker_tc import SourceNotFoundError, UnsupportedImageError

    with pytest.raises(UnsupportedImageError, match=r"pytorch_version='1.11.0'.*>= 2\.7; tested: .*torch 2\.8"):
        smtc_cell(source_dir, transformers_version="4.21.1", pytorch_version="1.11.0", py_version="py38")
    with pytest.raises(SourceNotFoundError, match="is an S3 URI: .* takes a local folder"):
        smtc_cell("s3://bucket/sourcedir.tar.gz")


def test_attach_returns_an_estimator_of_the_class(aws, bucket, source_dir):
    estimator = smtc_cell(source_dir, bucket)
    estimator.fit(None, wait=False, job_name="attach-me")
    attached = HuggingFace.attach("attach-me")
    assert type(attached) is HuggingFace
    assert attached.latest_training_job.name == "attach-me" and attached.model_data == estimator.model_data
    assert attached.role == ROLE and attached.instance_type == "ml.p4d.24xlarge" and attached.instance_count == 1
    assert attached.hyperparameters() == estimator.hyperparameters()
    assert attached.compiler_config == estimator.compiler_config and attached.output_path == bucket
    assert attached.sagemaker_session is not None
    attached.wait(logs=False)
    with pytest.raises(EstimatorArgumentError, match="attached to training job 'attach-me'.*build the estimator"):
        attached.fit(None)


def test_a_training_step_takes_pipeline_variables_as_inputs(aws, bucket, source_dir):
    """The processing step -> training step wiring: a ParameterString as a fit() input and as a
    TrainingInput's s3_data, sent as references in the definition."""
    from sagemaker.core.workflow.parameters import ParameterString
    from sagemaker.core.workflow.pipeline_context import PipelineSession
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import TrainingStep

    from sagemaker_tc import ChannelNotFoundError, TrainingInput

    session = PipelineSession(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET)
    train = ParameterString(name="TrainData", default_value=f"s3://{BUCKET}/train")
    validation = ParameterString(name="ValidationData")  # no default: a step's output is like this
    estimator = smtc_cell(source_dir, bucket, sagemaker_session=session)
    with pytest.warns(UserWarning, match="PipelineSession"):
        step_args = estimator.fit({"train": train, "validation": TrainingInput(validation, content_type="text/csv")})
    step = TrainingStep(name="Train", step_args=step_args)
    pipeline = Pipeline(name="tc-inputs", parameters=[train, validation], steps=[step], sagemaker_session=session)
    (train_step,) = json.loads(pipeline.definition())["Steps"]
    channels = {channel["ChannelName"]: channel for channel in train_step["Arguments"]["InputDataConfig"]}
    assert channels["train"]["DataSource"]["S3DataSource"]["S3Uri"] == {"Get": "Parameters.TrainData"}
    assert channels["validation"]["DataSource"]["S3DataSource"]["S3Uri"] == {"Get": "Parameters.ValidationData"}
    assert channels["validation"]["ContentType"] == "text/csv"
    # checked by its default value, and refused outside a pipeline with what to do
    with pytest.raises(ChannelNotFoundError, match="read s3:// URIs"):
        smtc_cell(source_dir, bucket).fit({"train": ParameterString(name="Bad", default_value="/local/data")})
    with pytest.raises(EstimatorArgumentError, match="input channel train: pipeline variables; build the step under"):
        smtc_cell(source_dir, bucket).fit({"train": train}, wait=False)
    assert created(aws) == []


def test_profiler_rules_with_the_profiler_off_are_refused(source_dir):
    from sagemaker.core.debugger import rule_configs
    from sagemaker.core.debugger.debugger import ProfilerRule

    rules = [ProfilerRule.sagemaker(rule_configs.ProfilerReport())]
    with pytest.raises(EstimatorArgumentError, match="ProfilerRule in rules and disable_profiler=True contradict"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", rules=rules, disable_profiler=True)


def test_pipeline_variables_as_hyperparameters(aws, bucket, source_dir, make):
    from sagemaker.core.workflow.parameters import ParameterInteger
    from sagemaker.core.workflow.pipeline_context import PipelineSession
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import TrainingStep

    from sagemaker_tc import HyperparameterError

    session = PipelineSession(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET)
    epochs = ParameterInteger(name="Epochs", default_value=3)
    estimator = smtc_cell(source_dir, bucket, sagemaker_session=session, hyperparameters={"epochs": epochs, "lr": 0.1})
    with pytest.warns(UserWarning, match="PipelineSession"):
        step = TrainingStep(name="Train", step_args=estimator.fit(None))
    pipeline = Pipeline(name="tc-hps", parameters=[epochs], steps=[step], sagemaker_session=session)
    (train_step,) = json.loads(pipeline.definition())["Steps"]
    hps = train_step["Arguments"]["HyperParameters"]
    assert hps["epochs"] == {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.Epochs"}]}}  # SDK v2's to_string()
    assert hps["lr"] == "0.1" and hps["sagemaker_training_compiler_enabled"] == "true"
    with pytest.raises(EstimatorArgumentError, match="hyperparameter epochs: pipeline variables"):
        smtc_cell(source_dir, bucket, hyperparameters={"epochs": epochs}).fit(None, wait=False)
    with pytest.raises(
        HyperparameterError, match="hyperparameters epochs: pipeline variables; pipelines run SageMaker"
    ):
        make(hyperparameters={"epochs": epochs})
    assert created(aws) == []


def test_pipeline_variable_output_path(aws, bucket, source_dir):
    from sagemaker.core.workflow.parameters import ParameterString
    from sagemaker.core.workflow.pipeline_context import PipelineSession
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import TrainingStep

    session = PipelineSession(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET)
    output = ParameterString(name="OutputPath", default_value=f"s3://{BUCKET}/out")
    estimator = smtc_cell(source_dir, output, sagemaker_session=session, output_kms_key="alias/team")
    with pytest.warns(UserWarning, match="PipelineSession"):
        step = TrainingStep(name="Train", step_args=estimator.fit(None))
    pipeline = Pipeline(name="tc-out", parameters=[output], steps=[step], sagemaker_session=session)
    (train_step,) = json.loads(pipeline.definition())["Steps"]
    assert train_step["Arguments"]["OutputDataConfig"]["S3OutputPath"] == {"Get": "Parameters.OutputPath"}
    submit = json.loads(train_step["Arguments"]["HyperParameters"]["sagemaker_submit_directory"])
    assert submit.startswith(f"s3://{BUCKET}/")  # SDK v2: the default bucket
    with pytest.raises(EstimatorArgumentError, match="output_path for SageMaker training jobs is an s3:// URI"):
        smtc_cell(source_dir, ParameterString(name="Bad", default_value="/tmp/out"))
    with pytest.raises(EstimatorArgumentError, match="output_path: pipeline variables; build the step"):
        smtc_cell(source_dir, output).fit(None, wait=False)


def test_a_session_the_user_passes_gets_logs_for_job(aws, bucket, source_dir):
    """SDK v2's Session had ``logs_for_job``; sagemaker-core's has not: a session the notebook made
    itself (here a plain sagemaker-core ``Session``) answers the same call after ``fit()``."""
    from sagemaker.core.helper.session_helper import Session

    session = Session(boto_session=boto3.Session())
    assert not hasattr(Session, "logs_for_job")
    estimator = smtc_cell(source_dir, bucket, sagemaker_session=session)
    estimator.fit({"train": f"s3://{BUCKET}/train"}, wait=False)
    assert estimator.sagemaker_session is session
    session.logs_for_job(estimator.latest_training_job.name, wait=True, poll=1)  # moto: no log streams
