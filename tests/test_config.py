"""TrainingCompilerConfig: closed, typed, and a disabled config is really off."""

import pytest

from sagemaker_tc import ConfigError, TrainingCompilerConfig


def test_defaults_compile_with_inductor_and_choose_the_plan_on_the_job():
    config = TrainingCompilerConfig()
    assert (config.enabled, config.debug, config.backend, config.mode, config.plan, config.policy) == (
        True,
        False,
        "inductor",
        "default",
        "auto",
        "fallback",
    )
    assert config.compiles and bool(config)


@pytest.mark.parametrize("unknown", [{"regionl": True}, {"regional": True}, {"plan": "model", "regional": False}])
def test_an_unknown_field_is_refused_listing_the_accepted_fields(unknown):
    for build in (lambda: TrainingCompilerConfig(**unknown), lambda: TrainingCompilerConfig.from_dict(unknown)):
        with pytest.raises(ConfigError, match="unknown field 'regiona?l' \\(accepted fields: enabled, debug") as error:
            build()
        assert str(error.value).startswith("Invalid TrainingCompilerConfig: ")


@pytest.mark.parametrize("policy", ["fastest", "auto"])
def test_a_policy_outside_the_set_is_refused_listing_the_accepted_values(policy):
    with pytest.raises(ConfigError, match=f"policy: Input should be 'fallback' or 'strict' \\(got '{policy}'\\)"):
        TrainingCompilerConfig(policy=policy)


def test_a_union_field_names_each_accepted_form_once():
    with pytest.raises(ConfigError) as error:
        TrainingCompilerConfig(buckets=[32.5, 64.0])  # both items fail the same way
    message = str(error.value)
    assert "buckets: got 32.5, accepted: Input should be a valid integer; or Input should be 'auto'" in message
    assert message.count("valid integer") == 1


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
