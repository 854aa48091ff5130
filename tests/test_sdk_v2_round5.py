"""Issue 44: what SMTC-era notebooks with SDK v2 habits still tripped on, against moto's server (the
recorded endpoint) where AWS is involved."""

import json

import boto3
import pytest

from sagemaker_tc import EstimatorArgumentError, HuggingFace, MemberNotOfferedError, PyTorch, TrainingCompilerConfig

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "tc-round5"
HF_IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:"
    "2.8.0-transformers4.56.2-gpu-py312-cu129-ubuntu22.04"
)


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


def default_session():
    from sagemaker.core.helper.session_helper import Session

    return Session(boto_session=boto3.Session(), default_bucket=BUCKET)


def created(recorded) -> list[dict]:
    return [body for target, body in recorded() if target == "SageMaker.CreateTrainingJob"]


# 1. output_path after fit()


def test_output_path_is_filled_after_fit_when_none_was_given(aws, bucket, source_dir):
    estimator = smtc_cell(source_dir, sagemaker_session=default_session())
    assert estimator.output_path is None
    estimator.fit(None, wait=True, logs=False, job_name="filled-1")
    (request,) = created(aws)
    assert estimator.output_path == request["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/"
    assert estimator._current_job_name == "filled-1"
    # the notebook's own model path now names the real artifact
    assert f"{estimator.output_path}{estimator._current_job_name}/output/model.tar.gz" == estimator.model_data
    # a second fit() resolves the default again (and the code goes where the first job's went)
    estimator.fit(None, wait=False, job_name="filled-2")
    second = created(aws)[-1]
    assert second["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/"
    assert json.loads(second["HyperParameters"]["sagemaker_submit_directory"]) == (
        f"s3://{BUCKET}/filled-2/source/sourcedir.tar.gz"
    )
    assert estimator._current_job_name == "filled-2"


def test_a_given_output_path_is_kept(aws, bucket, source_dir):
    estimator = smtc_cell(source_dir, bucket)
    estimator.fit(None, wait=False, job_name="given")
    assert estimator.output_path == bucket and estimator._current_job_name == "given"


# 2. attach() reports the user's entry point and the image's versions


def test_attach_reports_the_users_entry_point_and_the_image_versions(aws, bucket, source_dir):
    smtc_cell(source_dir, bucket).fit(None, wait=False, job_name="attach-versions")
    attached = HuggingFace.attach("attach-versions")
    assert attached.entry_point == "echo.py"  # not the compiler's launcher
    tag = attached.image_uri.rsplit(":", 1)[1]  # e.g. 2.8-transformers4.56.2-gpu-py312-cu129-ubuntu22.04
    assert tag.startswith(f"{attached.pytorch_version}-transformers{attached.transformers_version}-gpu-py312")
    assert attached.pytorch_version.startswith("2.8") and attached.transformers_version.startswith("4.56")
    assert attached.py_version == "py312"
    assert attached.source_dir.endswith("attach-versions/source/sourcedir.tar.gz")
    assert attached._current_job_name == "attach-versions"


def test_attach_a_pytorch_job_and_one_without_the_compiler(aws, bucket, source_dir):
    PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        role=ROLE,
        instance_type="ml.g6.xlarge",
        framework_version="2.8",
        py_version="py312",
        output_path=bucket,
        compiler_config=None,
    ).fit(None, wait=False, job_name="attach-plain")
    attached = PyTorch.attach("attach-plain")
    assert attached.entry_point == "echo.py" and attached.compiler_config is None
    assert attached.image_uri.rsplit(":", 1)[1].startswith(f"{attached.framework_version}-gpu-py312")
    assert attached.framework_version.startswith("2.8") and attached.py_version == "py312"


# 5. wait() takes SDK v2's log strings


def test_wait_takes_sdk_v2_log_strings(aws, bucket, source_dir):
    estimator = smtc_cell(source_dir, bucket)
    estimator.fit(None, wait=False)
    estimator.wait(logs="All")
    estimator.wait(logs="None")
    job = estimator.latest_training_job
    job.wait(logs="None")
    job.wait("Training")  # SDK v2's _Job.wait(logs="All") took it by position too
    assert job.wait(logs="Rules") == estimator.model_data
    for wait in (estimator.wait, job.wait):
        with pytest.raises(EstimatorArgumentError, match=r"wait\(logs='Everything'\) is not accepted.*'All'"):
            wait(logs="Everything")


def test_a_local_jobs_wait_takes_sdk_v2_log_strings_and_answers_rule_job_summary(make, capsys):
    """A local_process job's handle takes what fit(logs=...) takes, as the SageMaker job's does:
    "None" shows no log, "All" / "Rules" show it; rule_job_summary() is the empty list that the
    SageMaker handle answers for a job without rules."""
    estimator = make(compiler_config=None)
    estimator.fit(None, wait=False, job_name="local-logs")
    job = estimator.latest_training_job
    capsys.readouterr()
    model = job.wait(logs="None")
    assert "algo-1 | " not in capsys.readouterr().out
    assert job.wait(logs="All") == model == estimator.model_data
    shown = capsys.readouterr().out
    assert "algo-1 | " in shown
    job.wait("Rules")
    assert capsys.readouterr().out == shown  # the whole log again, from the start
    with pytest.raises(EstimatorArgumentError, match=r"wait\(logs='Everything'\) is not accepted.*'All'"):
        job.wait(logs="Everything")
    assert job.rule_job_summary() == []


# 4. SDK v2 members that were a bare AttributeError


def test_sdk_v2_attributes_read_the_settings_and_members_not_offered_are_named(make):
    """SDK v2 kept each argument as an attribute; the ones sagemaker-tc does not offer say what to
    use instead, and stay AttributeErrors for hasattr()."""
    from sagemaker_tc import MemberNotOfferedError
    from sagemaker_tc.sdk.after_fit import NOT_OFFERED

    estimator = make(compiler_config=None, tags=[{"Key": "team", "Value": "a"}], max_retry_attempts=2)
    assert estimator.tags == [{"Key": "team", "Value": "a"}] and estimator.max_retry_attempts == 2
    assert estimator.subnets is None and estimator.use_spot_instances is None  # not given
    assert estimator.enable_network_isolation() is False  # SDK v2's method
    assert not hasattr(estimator, "jobs") and getattr(estimator, "no_such_member", "default") == "default"
    for name in (name for name in NOT_OFFERED if not name.endswith("()")):
        with pytest.raises(MemberNotOfferedError, match=rf"HuggingFace\.{name} \(SDK v2's\) is not offered"):
            getattr(estimator, name)
    with pytest.raises(MemberNotOfferedError, match="TransformJob.create"):
        estimator.transformer(1, "ml.m5.xlarge")
    with pytest.raises(MemberNotOfferedError, match=r"enable_remote_debug\(\) \(SDK v2's\).*enable_remote_debug=True"):
        estimator.enable_remote_debug()  # a method in SDK v2, not the setting's value
    assert estimator.metric_definitions is None
    defined = make(compiler_config=None, metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}])
    assert defined.metric_definitions == [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
    with pytest.raises(AttributeError, match="has no attribute 'no_such_member'") as raised:
        estimator.no_such_member  # noqa: B018
    assert not isinstance(raised.value, MemberNotOfferedError)


def test_artifact_paths_and_rule_summary_read_the_job(aws, bucket, source_dir):
    from sagemaker.core.debugger import rule_configs
    from sagemaker.core.debugger.debugger import ProfilerRule, Rule, TensorBoardOutputConfig

    rules = [Rule.sagemaker(rule_configs.loss_not_decreasing()), ProfilerRule.sagemaker(rule_configs.ProfilerReport())]
    with pytest.warns(UserWarning, match="add overhead"):
        estimator = smtc_cell(
            source_dir,
            bucket,
            rules=rules,
            tensorboard_output_config=TensorBoardOutputConfig(s3_output_path=f"s3://{BUCKET}/tb"),
        )
    with pytest.raises(EstimatorArgumentError, match="not associated with a training job"):
        estimator.latest_job_debugger_artifacts_path()
    estimator.fit(None, wait=False, job_name="with-rules")
    assert estimator.latest_job_debugger_artifacts_path() == f"{bucket}/with-rules/debug-output"
    assert estimator.latest_job_tensorboard_artifacts_path() == f"s3://{BUCKET}/tb/with-rules/tensorboard-output"
    assert estimator.latest_job_profiler_artifacts_path() == f"{bucket}/with-rules/rule-output"
    summary = estimator.latest_training_job.rule_job_summary()
    assert isinstance(summary, list)
    attached = HuggingFace.attach("with-rules")
    assert attached.latest_job_debugger_artifacts_path() == f"{bucket}/with-rules/debug-output"
    # a job without Debugger configuration: None, as SDK v2 answered
    plain = smtc_cell(source_dir, bucket)
    plain.fit(None, wait=False, job_name="no-rules")
    assert plain.latest_job_tensorboard_artifacts_path() is None
    assert plain.latest_training_job.rule_job_summary() == []
    job = plain.latest_training_job
    assert job.sagemaker_session is job.session  # SDK v2's name
    with pytest.raises(MemberNotOfferedError, match="update_profiler.*TrainingJob.get"):
        job.update_profiler()
    with pytest.raises(MemberNotOfferedError, match=r"start_new.*fit\(wait=False\)"):
        job.start_new(plain, None)


def test_training_job_analytics_reads_the_jobs_cloudwatch_metrics(aws, bucket, source_dir):
    estimator = smtc_cell(source_dir, bucket, metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}])
    estimator.fit(None, wait=True, logs=False, job_name="with-metrics")
    described = estimator.latest_training_job.describe()
    # the job's own metric names (moto's server answers with one of its own, "test:dcg")
    name = described["AlgorithmSpecification"]["MetricDefinitions"][0]["Name"]
    boto3.client("cloudwatch").put_metric_data(
        Namespace="/aws/sagemaker/TrainingJobs",
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": "TrainingJobName", "Value": "with-metrics"}],
                "Timestamp": described["TrainingStartTime"],
                "Value": 0.25,
            }
        ],
    )
    analytics = estimator.training_job_analytics
    assert analytics.name == "with-metrics"
    frame = analytics.dataframe()
    assert list(frame["value"]) == [0.25] and list(frame["metric_name"]) == [name]


def test_training_job_analytics_of_a_local_job_says_where_the_metrics_are(make):
    estimator = make()
    with pytest.raises(EstimatorArgumentError, match="not associated with a training job"):
        estimator.training_job_analytics  # noqa: B018
    estimator.fit(None)
    with pytest.raises(EstimatorArgumentError, match=r"ran locally.*latest_training_job.logs\(\)"):
        estimator.training_job_analytics  # noqa: B018


def test_register_and_compile_model_are_refused_with_the_way_to_do_it(source_dir):
    estimator = smtc_cell(source_dir, f"s3://{BUCKET}/jobs")
    with pytest.raises(EstimatorArgumentError, match=r"(?s)register\(\) is not offered.*ModelPackage\.create"):
        estimator.register(content_types=["application/json"], response_types=["application/json"])
    with pytest.raises(EstimatorArgumentError, match=r"(?s)compile_model\(\).*Neo.*CompilationJob\.create"):
        estimator.compile_model(target_instance_family="ml_c5", input_shape={"x": [1, 8]}, output_path="s3://b/c")


def test_the_default_session_has_sdk_v2_describe_and_wait(aws, bucket, source_dir):
    from sagemaker.core.helper.session_helper import Session

    estimator = smtc_cell(source_dir, bucket)
    estimator.fit(None, wait=False, job_name="session-calls")
    session = estimator.sagemaker_session
    assert session.describe_training_job("session-calls")["TrainingJobName"] == "session-calls"
    described = session.wait_for_job("session-calls", poll=1)
    assert described["TrainingJobStatus"] == "Completed"
    mine = Session(boto_session=boto3.Session())  # a session the notebook made itself gets them too
    smtc_cell(source_dir, bucket, sagemaker_session=mine).fit(None, wait=False, job_name="mine")
    assert mine.wait_for_job("mine", poll=1)["ModelArtifacts"]["S3ModelArtifacts"].endswith("output/model.tar.gz")


# 8. SDK v2's defaults passed explicitly ask for nothing


@pytest.mark.parametrize(
    "spelled_out",
    [
        {"dependencies": None},
        {"dependencies": []},
        {"git_config": None},
        {"instance_groups": None},
        {"instance_groups": [], "dependencies": [], "git_config": None, "training_recipe": None},
        {"tensorflow_version": None, "recipe_overrides": None},
    ],
)
def test_sdk_v2_defaults_spelled_out_are_accepted(aws, bucket, source_dir, spelled_out):
    estimator = smtc_cell(source_dir, bucket, **spelled_out)
    assert estimator.dependencies == [] and estimator.git_config is None and estimator.instance_groups is None
    estimator.fit(None, wait=False)
    assert len(created(aws)) == 1


def test_a_value_that_asks_for_something_is_still_refused(source_dir):
    with pytest.raises(EstimatorArgumentError, match=r"dependencies \(put the folders your script needs"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", dependencies=["lib"])
    with pytest.raises(EstimatorArgumentError, match=r"git_config \(check the repository out locally"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", git_config={"repo": "https://example.com/r.git"})


# 7. TrainingCompilerConfig.validate(estimator) has SDK v2's meaning


def test_validate_checks_the_estimator_against_the_compiler(source_dir):
    import warnings

    from sagemaker_tc import ConfigError, UnsupportedImageError
    from sagemaker_tc.errors import JobSettingWarning

    estimator = smtc_cell(source_dir, f"s3://{BUCKET}/jobs")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TrainingCompilerConfig.validate(estimator) is None
    estimator.instance_count = 2  # changed after the estimator was built, as notebooks do
    with pytest.warns(JobSettingWarning, match="instance_count=2 without distribution.*torch_distributed"):
        TrainingCompilerConfig.validate(estimator)
    estimator.distribution = {"smdistributed": {"dataparallel": {"enabled": True}}}
    with pytest.raises(EstimatorArgumentError, match="smdistributed.*not compatible with the compiler"):
        TrainingCompilerConfig.validate(estimator)
    estimator.distribution = {"torch_distributed": {"enabled": True}}
    estimator.instance_groups = [{"InstanceGroupName": "a"}]
    with pytest.raises(ConfigError, match="instance_groups: the compiler runs homogeneous clusters only"):
        TrainingCompilerConfig.validate(estimator)
    estimator.instance_groups = None
    estimator.image_uri = (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-trcomp-training:"
        "1.11.0-transformers4.21.1-gpu-py38-cu113-ubuntu20.04"
    )
    with pytest.raises(UnsupportedImageError, match="carries PyTorch 1.11"):
        TrainingCompilerConfig.validate(estimator)
    estimator.compiler_config = TrainingCompilerConfig(enabled=False)  # nothing compiles: nothing to check
    TrainingCompilerConfig.validate(estimator)
    with pytest.raises(ConfigError, match=r"checks a sagemaker_tc HuggingFace or PyTorch estimator.*\(\*\*values\)"):
        TrainingCompilerConfig.validate({"enabled": True})


# 10. several hosts without distribution: SDK v2 warned


def test_several_hosts_without_distribution_warn(source_dir):
    import warnings

    from sagemaker_tc.errors import JobSettingWarning

    with pytest.warns(JobSettingWarning, match="each of the 2 hosts runs its own copy"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", instance_count=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        smtc_cell(
            source_dir, f"s3://{BUCKET}/jobs", instance_count=2, distribution={"torch_distributed": {"enabled": True}}
        )
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", instance_count=2, compiler_config=None)


# 9. SMTC's own config class, which sagemaker-core still ships


def test_smtcs_own_config_class_is_taken_with_enabled_and_debug(aws, bucket, source_dir, caplog):
    import logging

    from sagemaker.core.training_compiler_config import TrainingCompilerConfig as SmtcConfig

    with caplog.at_level(logging.INFO, logger="sagemaker_tc.config"):
        estimator = smtc_cell(source_dir, bucket, compiler_config=SmtcConfig(enabled=True, debug=True))
    assert estimator.compiler_config == TrainingCompilerConfig(debug=True)
    (note,) = [record.getMessage() for record in caplog.records if record.name == "sagemaker_tc.config"]
    assert "SMTC's sagemaker.core.training_compiler_config.TrainingCompilerConfig(enabled=True, debug=True)" in note
    estimator.fit(None, wait=False)
    (request,) = created(aws)
    hps = request["HyperParameters"]
    assert (
        hps["sagemaker_training_compiler_enabled"] == "true" and hps["sagemaker_training_compiler_debug_mode"] == "true"
    )
    assert json.loads(hps["sagemaker_program"]) == "sagemaker_tc_launcher.py"
    off = smtc_cell(source_dir, bucket, compiler_config=SmtcConfig(enabled=False))
    assert off.compiler_config == TrainingCompilerConfig(enabled=False) and not off.compiler_enabled
    off.fit(None, wait=False)
    assert json.loads(created(aws)[-1]["HyperParameters"]["sagemaker_program"]) == "echo.py"


def test_smtcs_config_with_a_pipeline_variable_names_it(source_dir):
    from sagemaker.core.training_compiler_config import TrainingCompilerConfig as SmtcConfig
    from sagemaker.core.workflow.parameters import ParameterBoolean

    from sagemaker_tc import ConfigError

    config = SmtcConfig(enabled=ParameterBoolean(name="Compile", default_value=True))
    with pytest.raises(ConfigError, match=r"\(enabled=...\) is a pipeline variable \(Compile\).*known when"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", compiler_config=config)


# 3. SMTC's *-trcomp-training images are refused wherever they are mirrored

TRCOMP_TAG = "1.11.0-transformers4.21.1-gpu-py38-cu113-ubuntu20.04"


@pytest.mark.parametrize(
    "image",
    [
        f"123456789012.dkr.ecr.us-west-2.amazonaws.com/huggingface-pytorch-trcomp-training:{TRCOMP_TAG}",  # a mirror
        f"123456789012.dkr.ecr.us-west-2.amazonaws.com/mirror/dlc/huggingface-pytorch-trcomp-training:{TRCOMP_TAG}",
        f"registry.example.com/ml/huggingface-pytorch-trcomp-training:{TRCOMP_TAG}",
        "669063966089.dkr.ecr.us-west-2.amazonaws.com/pytorch-trcomp-training:1.13.1-gpu-py39",
    ],
)
def test_smtc_images_are_refused_in_any_registry(source_dir, image):
    from sagemaker_tc import UnsupportedImageError

    with pytest.raises(UnsupportedImageError, match=r"carries PyTorch 1\.1[13]: it is SMTC's Training Compiler image"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", image_uri=image)
    assert smtc_cell(source_dir, f"s3://{BUCKET}/jobs", image_uri=image, compiler_config=None).image_uri == image


def test_smtc_tensorflow_image_is_named_as_such_and_own_images_pass(source_dir):
    from sagemaker_tc import UnsupportedImageError

    tf = "123456789012.dkr.ecr.us-east-1.amazonaws.com/huggingface-tensorflow-trcomp-training:2.6.3-gpu-py38"
    with pytest.raises(UnsupportedImageError, match="is a TensorFlow image: it is SMTC's"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", image_uri=tf)
    mine = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-trcomp-replacement:2.8.0-gpu-py312"
    assert smtc_cell(source_dir, f"s3://{BUCKET}/jobs", image_uri=mine).image_uri == mine


def test_pytorchddp_names_its_replacement(source_dir):
    with pytest.raises(EstimatorArgumentError, match=r"pytorchddp.*replaced by \{'torch_distributed'"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", distribution={"pytorchddp": {"enabled": True}})


def test_too_many_tags_are_counted_not_echoed(source_dir):
    tags = [{"Key": f"team-key-{i}", "Value": f"value-{i}"} for i in range(51)]
    with pytest.raises(EstimatorArgumentError) as raised:
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", tags=tags)
    message = str(raised.value)
    assert message.startswith("tags (a list of 51) is not accepted by CreateTrainingJob (TagList): 0 to 50 entries")
    assert "team-key-0" not in message


# 6. pipeline variables: carried as SDK v2 carried them, or refused by name with the reason


def pipeline_session():
    from sagemaker.core.workflow.pipeline_context import PipelineSession

    return PipelineSession(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET)


def test_instance_count_and_max_run_as_pipeline_variables(aws, bucket, source_dir):
    from sagemaker.core.workflow.parameters import ParameterInteger
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import TrainingStep

    hosts = ParameterInteger(name="Hosts", default_value=2)
    limit = ParameterInteger(name="MaxRun", default_value=3600)
    session = pipeline_session()
    estimator = smtc_cell(
        source_dir,
        bucket,
        sagemaker_session=session,
        instance_count=hosts,
        max_run=limit,
        distribution={"torch_distributed": {"enabled": True}},
    )
    assert estimator.instance_count is hosts and estimator.max_run is limit
    with pytest.warns(UserWarning, match="PipelineSession"):
        step = TrainingStep(name="Train", step_args=estimator.fit(None))
    pipeline = Pipeline(name="tc-vars", parameters=[hosts, limit], steps=[step], sagemaker_session=session)
    (train_step,) = json.loads(pipeline.definition())["Steps"]
    assert train_step["Arguments"]["ResourceConfig"]["InstanceCount"] == {"Get": "Parameters.Hosts"}
    assert train_step["Arguments"]["StoppingCondition"]["MaxRuntimeInSeconds"] == {"Get": "Parameters.MaxRun"}
    # outside a pipeline: named, with what to do
    with pytest.raises(EstimatorArgumentError, match="instance_count, max_run: pipeline variables; build the step"):
        smtc_cell(source_dir, bucket, instance_count=hosts, max_run=limit).fit(None, wait=False)
    assert created(aws) == []


def test_pipeline_variables_that_cannot_be_checked_or_run_locally_are_named(source_dir, make):
    from sagemaker.core.workflow.parameters import ParameterInteger

    from sagemaker_tc import UnsupportedInstanceTypeError

    with pytest.raises(UnsupportedInstanceTypeError, match=r"instance_count is a pipeline variable \(Hosts\) without"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", instance_count=ParameterInteger(name="Hosts"))
    with pytest.raises(EstimatorArgumentError, match=r"max_run is a pipeline variable \(MaxRun\) without"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", max_run=ParameterInteger(name="MaxRun"))
    with pytest.raises(UnsupportedInstanceTypeError, match="instance_count is a pipeline variable, and instance_type"):
        make(instance_count=ParameterInteger(name="Hosts", default_value=1))
    with pytest.raises(EstimatorArgumentError, match="max_run is a pipeline variable: pipelines run SageMaker"):
        make(max_run=ParameterInteger(name="MaxRun", default_value=60))
    with pytest.raises(EstimatorArgumentError, match="max_run must be a positive number of seconds"):
        smtc_cell(source_dir, f"s3://{BUCKET}/jobs", max_run=ParameterInteger(name="MaxRun", default_value=0))


def test_compiler_config_with_a_pipeline_variable_names_it_and_why(source_dir):
    from sagemaker.core.workflow.parameters import ParameterBoolean

    from sagemaker_tc import ConfigError

    with pytest.raises(
        ConfigError, match=r"enabled: .*a pipeline variable \(Compile\).*must be known when the estimator"
    ):
        TrainingCompilerConfig(enabled=ParameterBoolean(name="Compile", default_value=True))


def test_environment_values_as_pipeline_variables(aws, bucket, source_dir, make):
    from sagemaker.core.workflow.parameters import ParameterString
    from sagemaker.mlops.workflow.pipeline import Pipeline
    from sagemaker.mlops.workflow.steps import TrainingStep

    level = ParameterString(name="LogLevel", default_value="INFO")
    session = pipeline_session()
    estimator = smtc_cell(source_dir, bucket, sagemaker_session=session, environment={"LOG_LEVEL": level, "A": "1"})
    assert estimator.environment == {"LOG_LEVEL": level, "A": "1"}
    with pytest.warns(UserWarning, match="PipelineSession"):
        step = TrainingStep(name="Train", step_args=estimator.fit(None))
    pipeline = Pipeline(name="tc-env", parameters=[level], steps=[step], sagemaker_session=session)
    (train_step,) = json.loads(pipeline.definition())["Steps"]
    assert train_step["Arguments"]["Environment"]["LOG_LEVEL"] == {"Get": "Parameters.LogLevel"}
    assert train_step["Arguments"]["Environment"]["A"] == "1"
    with pytest.raises(EstimatorArgumentError, match="environment LOG_LEVEL: pipeline variables; build the step"):
        smtc_cell(source_dir, bucket, environment={"LOG_LEVEL": level}).fit(None, wait=False)
    with pytest.raises(EstimatorArgumentError, match="environment LOG_LEVEL: pipeline variables; pipelines run"):
        make(environment={"LOG_LEVEL": level})
    with pytest.raises(EstimatorArgumentError, match="environment variable name '1X' is not accepted"):
        smtc_cell(source_dir, bucket, environment={"1X": level})
    assert created(aws) == []


# The SageMaker configuration file's defaults (sagemaker-core's resolution)

CONFIG_ROLE = "arn:aws:iam::123456789012:role/FromConfig"
CONFIG_YAML = f"""
SchemaVersion: '1.0'
SageMaker:
  TrainingJob:
    RoleArn: {CONFIG_ROLE}
    VpcConfig:
      SecurityGroupIds: [sg-0123456789abcdef0]
      Subnets: [subnet-0123456789abcdef0]
    Tags:
      - Key: team
        Value: ml
      - Key: mine
        Value: from-config
    EnableNetworkIsolation: true
    EnableInterContainerTrafficEncryption: true
    Environment:
      FROM_CONFIG: "1"
    OutputDataConfig:
      KmsKeyId: alias/config-output
    ResourceConfig:
      VolumeKmsKeyId: alias/config-volume
"""


@pytest.fixture
def user_config(tmp_path, monkeypatch):
    path = tmp_path / "sagemaker-config.yaml"
    path.write_text(CONFIG_YAML, encoding="utf-8")
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(path))
    admin = tmp_path / "admin-config.yaml"  # the admin file: present, setting nothing here
    admin.write_text("SchemaVersion: '1.0'\n", encoding="utf-8")
    monkeypatch.setenv("SAGEMAKER_ADMIN_CONFIG_OVERRIDE", str(admin))
    return path


def test_a_job_built_with_only_the_config_files_values_sends_them(aws, bucket, user_config, source_dir):
    estimator = smtc_cell(source_dir, bucket, role=None, instance_type="ml.p3.2xlarge")  # EBS: takes a KMS key
    assert estimator.role == CONFIG_ROLE and estimator.environment == {"FROM_CONFIG": "1"}
    estimator.fit(None, wait=False, job_name="from-config")
    (request,) = created(aws)
    assert request["RoleArn"] == CONFIG_ROLE
    assert request["VpcConfig"] == {
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
        "Subnets": ["subnet-0123456789abcdef0"],
    }
    assert {tag["Key"]: tag["Value"] for tag in request["Tags"]} == {"team": "ml", "mine": "from-config"}
    assert request["EnableNetworkIsolation"] is True and request["EnableInterContainerTrafficEncryption"] is True
    assert request["Environment"]["FROM_CONFIG"] == "1"
    assert request["OutputDataConfig"]["KmsKeyId"] == "alias/config-output"
    assert request["ResourceConfig"]["VolumeKmsKeyId"] == "alias/config-volume"


def test_explicit_arguments_win_and_tags_are_appended(aws, bucket, user_config, source_dir):
    estimator = smtc_cell(  # ml.p4d.24xlarge has instance storage only: no volume KMS key, as SDK v2
        source_dir,
        bucket,
        environment={"MINE": "2"},
        tags=[{"Key": "mine", "Value": "given"}],
        subnets=["subnet-0fedcba9876543210"],
        security_group_ids=["sg-0fedcba9876543210"],
        enable_network_isolation=False,
        output_kms_key="alias/given",
    )
    estimator.fit(None, wait=False, job_name="given-wins")
    (request,) = created(aws)
    assert request["RoleArn"] == ROLE and request["Environment"].get("FROM_CONFIG") is None
    assert request["Environment"]["MINE"] == "2"
    assert request["VpcConfig"]["Subnets"] == ["subnet-0fedcba9876543210"]
    assert request["Tags"] == [{"Key": "mine", "Value": "given"}, {"Key": "team", "Value": "ml"}]
    assert request.get("EnableNetworkIsolation") in (None, False)
    assert request["OutputDataConfig"]["KmsKeyId"] == "alias/given"
    assert "VolumeKmsKeyId" not in request["ResourceConfig"]


def test_local_modes_take_the_config_files_environment_only(user_config, make):
    estimator = make()
    assert estimator.environment == {"FROM_CONFIG": "1"} and estimator.role is None
    assert estimator.settings.get("subnets") is None and estimator.settings.get("tags") is None
    assert make(environment={"MINE": "1"}).environment == {"MINE": "1"}


def test_a_pipeline_variable_where_the_value_is_needed_when_built_is_named(source_dir, bucket, make):
    """Arguments that are not carried into the step (role, volume_size, a job setting, ...) refuse a
    pipeline variable by its name, saying why and which arguments take one."""
    from sagemaker.core.workflow.parameters import ParameterInteger, ParameterString

    role = ParameterString(name="Role", default_value="arn:aws:iam::111122223333:role/SageMakerRole")
    with pytest.raises(EstimatorArgumentError, match=r"role \(Role\): pipeline variables .* carried into the step"):
        smtc_cell(source_dir, bucket, role=role, sagemaker_session=pipeline_session())
    size = ParameterInteger(name="Disk", default_value=100)
    spot = ParameterString(name="Spot", default_value="true")
    with pytest.raises(EstimatorArgumentError, match=r"volume_size \(Disk\), use_spot_instances \(Spot\): pipeline"):
        make(volume_size=size, use_spot_instances=spot)
