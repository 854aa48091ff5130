"""A TrainingCompilerConfig built around its own checks (pydantic's model_copy(update=...) and
model_construct(...) skip them) is refused with ConfigError where it enters the SDK: the estimators and
ModelTrainer when built, before any job (issue 22). compile_model's side is in
test_compile_model_bad_input.py."""

import pytest

from sagemaker_tc import ConfigError, HuggingFace, ModelTrainer, PyTorch, TrainingCompilerConfig

UNCHECKED = {
    "backend bogus": (
        TrainingCompilerConfig().model_copy(update={"backend": "bogus"}),
        r"backend: Input should be 'inductor', 'eager' or 'xla' \(got 'bogus'\)",
    ),
    "plan bogus": (
        TrainingCompilerConfig().model_copy(update={"plan": "bogus"}),
        r"plan: Input should be 'auto', 'regional', 'model' or 'step' \(got 'bogus'\)",
    ),
    "buckets decreasing": (
        TrainingCompilerConfig.model_construct(buckets=[128, 64]),
        r"bucket lengths must be positive and strictly increasing",
    ),
}
PREFIX = r"compiler_config did not pass TrainingCompilerConfig's checks \(a config changed with model_copy.*"


@pytest.mark.parametrize("cls", [HuggingFace, PyTorch])
@pytest.mark.parametrize("case", list(UNCHECKED))
def test_the_estimators_refuse_an_unchecked_config_when_built(make, tmp_path, cls, case):
    config, message = UNCHECKED[case]
    with pytest.raises(ConfigError, match=PREFIX + message):
        make(cls, compiler_config=config)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", list(UNCHECKED))
def test_model_trainer_refuses_an_unchecked_config_when_built(source_dir, tmp_path, case):
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    config, message = UNCHECKED[case]
    with pytest.raises(ConfigError, match=PREFIX + message):
        ModelTrainer(
            training_mode=Mode.LOCAL_CONTAINER,
            training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-cpu-py312",
            source_code=SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
            compute=Compute(instance_type="local_process"),
            local_container_root=str(tmp_path / "jobs"),
            compiler_config=config,
        )
    assert not (tmp_path / "jobs").exists()


def test_a_config_built_with_its_checks_is_accepted_as_it_is(make):
    config = TrainingCompilerConfig(plan="regional", buckets=[64, 128], debug=True)
    assert make(compiler_config=config).compiler_config is config
    copied = config.model_copy(update={"plan": "model"})  # a valid change through model_copy is fine
    assert make(compiler_config=copied).compiler_config.plan == "model"
