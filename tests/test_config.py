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


@pytest.mark.parametrize(
    ("removed", "replacement"),
    [
        (
            {"regional": True},
            "use plan='regional' for regional=True, plan='model' for regional=False (got regional=True)",
        ),
        (
            {"plan": "model", "regional": False},
            "use plan='regional' for regional=True, plan='model' for regional=False",
        ),
        (
            {"policy": "auto"},
            "use policy='fallback' (what it did); measuring the plans and keeping the fastest is plan='auto'",
        ),
    ],
)
def test_pre_release_spellings_are_refused_naming_their_replacement(removed, replacement):
    """regional= and policy='auto' were aliases before 0.1.0; each now fails saying what to write."""
    for build in (lambda: TrainingCompilerConfig(**removed), lambda: TrainingCompilerConfig.from_dict(removed)):
        with pytest.raises(ConfigError, match="was removed before release") as error:
            build()
        assert str(error.value).startswith("Invalid TrainingCompilerConfig: ") and replacement in str(error.value)
    assert "regional" not in TrainingCompilerConfig.model_fields
    # A field merely misspelled still lists the accepted fields; another policy lists the accepted values.
    with pytest.raises(ConfigError, match="unknown field 'regionl' \\(accepted fields: enabled, debug"):
        TrainingCompilerConfig(regionl=True)
    with pytest.raises(ConfigError, match="policy: Input should be 'fallback' or 'strict' \\(got 'fastest'\\)"):
        TrainingCompilerConfig(policy="fastest")


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
