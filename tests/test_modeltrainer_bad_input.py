"""sagemaker_tc.ModelTrainer refuses what the compiler cannot run with a named error, when it is built
(before sagemaker-train's defaults call AWS: no AWS endpoint is configured here) or at train()."""

import pytest

from sagemaker_tc import (
    ConfigError,
    EstimatorArgumentError,
    HyperparameterError,
    ModelTrainer,
    ModelTrainerArgumentError,
    TrainingCompilerConfig,
    UnsupportedImageError,
    UnsupportedInstanceTypeError,
    contract,
)

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/"


@pytest.fixture
def build(source_dir, tmp_path):
    """Build a compiler ModelTrainer for ``echo.py`` on a SageMaker GPU instance; ``overrides`` replace
    any argument (``source_code`` given as a dict of SourceCode fields)."""
    from sagemaker.core.training.configs import Compute, SourceCode

    def _build(**overrides):
        source = {"source_dir": str(source_dir), "entry_script": "echo.py", **overrides.pop("source", {})}
        kwargs = {
            "training_image": DLC + "pytorch-training:2.8-gpu-py312",
            "source_code": SourceCode(**{name: value for name, value in source.items() if value is not None}),
            "compute": Compute(instance_type="ml.g5.2xlarge"),
            "role": "arn:aws:iam::123456789012:role/SageMakerRole",
            "local_container_root": str(tmp_path),
            "compiler_config": TrainingCompilerConfig(),
        }
        kwargs.update(overrides)
        return ModelTrainer(**kwargs)

    return _build


def local(**compute):
    from sagemaker.core.training.configs import Compute
    from sagemaker.train.model_trainer import Mode

    return {"training_mode": Mode.LOCAL_CONTAINER, "compute": Compute(**compute)}


def bad_cases():
    from sagemaker.core.training.configs import Compute
    from sagemaker.train.distributed import MPI, SMP, Torchrun

    return [
        ({"source": {"command": "python echo.py"}}, ModelTrainerArgumentError, "cannot wrap a shell command"),
        ({"source": {"entry_script": None}}, ModelTrainerArgumentError, "needs SourceCode.entry_script"),
        ({"source_code": None}, ModelTrainerArgumentError, "needs source_code with an entry_script"),
        ({"source": {"entry_script": "run.sh"}}, ModelTrainerArgumentError, "is not a Python script"),
        ({"source": {"args": ["--epochs", 3]}}, ModelTrainerArgumentError, "only passed to SourceCode.command"),
        ({"training_image": DLC + "pytorch-trcomp-training:1.13.1-gpu-py39"}, UnsupportedImageError, "PyTorch 1.13"),
        ({"training_image": DLC + "pytorch-training:2.5-gpu-py311"}, UnsupportedImageError, "needs PyTorch >= 2.7"),
        ({"training_image": DLC + "tensorflow-training:2.16-gpu-py310"}, UnsupportedImageError, "not a PyTorch"),
        ({"training_image": None, "algorithm_name": "my-algo"}, ModelTrainerArgumentError, "needs training_image"),
        ({"compute": Compute(instance_type="ml.trn1.32xlarge")}, UnsupportedInstanceTypeError, "Neuron compiler"),
        ({"compute": Compute(instance_type="ml.x9.large")}, UnsupportedInstanceTypeError, "not in sagemaker-tc"),
        ({"compute": Compute(instance_type="local_gpu")}, UnsupportedInstanceTypeError, "Mode.LOCAL_CONTAINER for it"),
        (local(instance_type="ml.g5.2xlarge"), UnsupportedInstanceTypeError, "must be 'local_cpu' or 'local_gpu'"),
        (local(instance_type="local_process", instance_count=9), UnsupportedInstanceTypeError, "at most 8 hosts"),
        ({"distributed": MPI()}, ModelTrainerArgumentError, "brings its own driver"),
        ({"distributed": Torchrun(smp=SMP(tensor_parallel_degree=2))}, ModelTrainerArgumentError, "model parallel"),
        ({"distributed": Torchrun(process_count_per_node=0)}, ModelTrainerArgumentError, "must be 1 or more"),
        ({"compiler_config": {"debug": True}}, ConfigError, "must be a sagemaker_tc.TrainingCompilerConfig"),
        ({"compiler_config": TrainingCompilerConfig(cache="/tmp/cache")}, EstimatorArgumentError, "local folder"),
        (
            {"compiler_config": TrainingCompilerConfig(cache="s3://bucket/" + "x" * 500)},
            ConfigError,
            "SageMaker takes environment values of at most 512",
        ),
        ({"environment": {contract.ENV_SETTINGS: "{}"}}, ModelTrainerArgumentError, "set by sagemaker_tc.ModelTrainer"),
        ({"environment": {"bad-name": "1"}}, EstimatorArgumentError, "is not accepted"),
    ]


@pytest.mark.parametrize("case", range(22))
def test_bad_arguments_are_refused_when_built(build, case):
    overrides, error, message = bad_cases()[case]
    with pytest.raises(error, match=message):
        build(**overrides)


@pytest.mark.parametrize(
    ("hyperparameters", "message"),
    [
        ({"sagemaker_training_compiler_enabled": True}, "starts with 'sagemaker_'"),
        ({"learning rate": 1}, "is not accepted"),
        ({"notes": "x" * 2501}, "SageMaker accepts at most 2500"),
    ],
)
def test_hyperparameters_that_would_not_reach_the_script_as_given_are_refused(build, hyperparameters, message):
    with pytest.raises(HyperparameterError, match=message):
        build(hyperparameters=hyperparameters, **local(instance_type="local_cpu"))


def test_fields_reassigned_after_construction_are_checked_again_at_train(build):
    from sagemaker.core.training.configs import SourceCode

    trainer = build(**local(instance_type="local_cpu"))
    trainer.source_code = SourceCode(command="python echo.py")
    with pytest.raises(ModelTrainerArgumentError, match="cannot wrap a shell command"):
        trainer.train()


def test_local_process_refuses_s3_inputs_and_background_runs(build, tmp_path):
    from sagemaker.core.training.configs import InputData

    from sagemaker_tc import ChannelNotFoundError

    trainer = build(**local(instance_type="local_process"))
    with pytest.raises(ChannelNotFoundError, match="reads local folders or files"):
        trainer.train(input_data_config=[InputData(channel_name="train", data_source="s3://bucket/train")])
    with pytest.raises(EstimatorArgumentError, match="runs in the foreground"):
        trainer.train(wait=False)
    assert list(tmp_path.iterdir()) == [tmp_path / "src"]  # no job folder


def test_a_disabled_config_leaves_sagemaker_trains_trainer_as_it_is(build):
    from sagemaker.train.distributed import Torchrun

    trainer = build(
        compiler_config=TrainingCompilerConfig(enabled=False),
        distributed=Torchrun(),
        **local(instance_type="local_cpu"),
    )
    assert isinstance(trainer.distributed, Torchrun) and contract.ENV_SETTINGS not in trainer.environment
    compiled = build(distributed=Torchrun(process_count_per_node=2), **local(instance_type="local_cpu"))
    assert compiled.distributed.model_dump() == {contract.DRIVER_TORCHRUN: True, contract.DRIVER_PROCESSES: 2}
    assert contract.settings_from_environment(compiled.environment).entry_point == "echo.py"


def test_without_sagemaker_train_the_import_names_the_extra(monkeypatch):
    import sys

    for name in [name for name in sys.modules if name.startswith("sagemaker_tc.sdk.v3")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sagemaker.train", None)  # as if sagemaker-train were not installed
    with pytest.raises(ImportError, match=r'pip install "sagemaker-tc\[v3\]"'):
        from sagemaker_tc import ModelTrainer  # noqa: F401
