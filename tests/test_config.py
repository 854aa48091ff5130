"""TrainingCompilerConfig: closed, typed, and a disabled config is really off."""

import pytest

from sagemaker_tc import ConfigError, TrainingCompilerConfig


def test_defaults_compile_with_inductor_and_choose_the_plan_on_the_job():
    config = TrainingCompilerConfig()
    assert (config.enabled, config.debug, config.backend, config.mode, config.plan, config.regional) == (
        True,
        False,
        "inductor",
        "default",
        "auto",
        None,
    )
    assert config.compiles and bool(config) and config.resolved_plan == "auto"


def test_regional_is_an_alias_of_plan_and_a_conflict_is_refused():
    assert TrainingCompilerConfig(regional=True).plan == "regional"
    assert TrainingCompilerConfig(regional=False).plan == "model"
    assert TrainingCompilerConfig(plan="model", regional=False).resolved_plan == "model"
    with pytest.raises(ConfigError, match="plan='step' and regional=True disagree"):
        TrainingCompilerConfig(plan="step", regional=True)
    # What travels on the wire (every field) reads back the same.
    wire = TrainingCompilerConfig(regional=False).model_dump(mode="json")
    assert TrainingCompilerConfig.from_dict(wire).resolved_plan == "model"


def test_disabled_config_is_falsy_and_does_not_compile():
    """SMTC's enabled=False config was truthy; ours is not."""
    config = TrainingCompilerConfig(enabled=False)
    assert not config
    assert not config.compiles


def test_eager_backend_is_enabled_but_does_not_compile():
    config = TrainingCompilerConfig(backend="eager")
    assert config and not config.compiles


def test_unknown_field_is_named_with_the_accepted_fields():
    with pytest.raises(ConfigError, match=r"unknown field 'optimization_level'.*accepted fields: enabled, debug"):
        TrainingCompilerConfig(optimization_level=3)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("backend", "openxla", r"backend: Input should be 'inductor', 'eager' or 'xla'"),
        ("mode", "fast", r"mode: Input should be 'default', 'reduce-overhead'"),
        ("enabled", "yes", r"enabled: Input should be a valid boolean"),
        ("debug", 1, r"debug: Input should be a valid boolean"),
    ],
)
def test_bad_values_raise_config_error(field, value, message):
    with pytest.raises(ConfigError, match=message):
        TrainingCompilerConfig(**{field: value})


def test_config_is_frozen():
    config = TrainingCompilerConfig()
    with pytest.raises(Exception, match="frozen"):
        config.enabled = False


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        TrainingCompilerConfig(mode="fast")
