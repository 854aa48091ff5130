"""The wire format survives SageMaker's hyperparameter encoding and the toolkit's decoding."""

import json

import pytest

from sagemaker_tc import ConfigError, TrainingCompilerConfig, contract
from sagemaker_tc.sdk.hyperparameters import encode_hyperparameters


def toolkit_decode(hyperparameters: dict[str, str]) -> dict:
    """The toolkit's decoding rule (sagemaker_training.environment.read_hyperparameters): json.loads each
    value, keep the text when it is not JSON. The real toolkit runs in test_local_process.py."""
    decoded = {}
    for key, value in hyperparameters.items():
        try:
            decoded[key] = json.loads(value)
        except ValueError:
            decoded[key] = value
    return decoded


@pytest.mark.parametrize(
    "config",
    [
        TrainingCompilerConfig(),
        TrainingCompilerConfig(enabled=False),
        TrainingCompilerConfig(debug=True, mode="max-autotune", plan="model", dynamic=True, fullgraph=True),
        TrainingCompilerConfig(backend="eager", dynamic=False),
    ],
)
def test_round_trip_through_sagemaker_encoding(config):
    wire = encode_hyperparameters(contract.encode(config, entry_point="sub dir/train.py"), allow_reserved=True)
    # SDK v2's wire for SMTC's two flags (lower-case JSON booleans), and no other key but the settings.
    assert (wire[contract.HP_ENABLED], wire[contract.HP_DEBUG]) == (
        str(config.enabled).lower(),
        str(config.debug).lower(),
    )
    assert set(wire) == {contract.HP_ENABLED, contract.HP_DEBUG, contract.HP_SETTINGS}
    settings = contract.decode(toolkit_decode(wire))
    assert settings.config == config
    assert settings.entry_point == "sub dir/train.py"
    # Also when a launcher sees the still-encoded strings.
    assert contract.decode(wire).config == config


@pytest.mark.parametrize(
    "config",
    [
        TrainingCompilerConfig(),
        TrainingCompilerConfig(enabled=False),
        TrainingCompilerConfig(debug=True, mode="max-autotune", plan="model", dynamic=True, fullgraph=True),
        TrainingCompilerConfig(buckets=[32, 64, 128, 256], cache="s3://bucket/sagemaker-tc-cache", batch_size="auto"),
    ],
)
def test_round_trip_through_the_environment_fits_sagemakers_512_characters(config):
    """SDK v3's ModelTrainer path: the settings travel as one environment variable."""
    environment = contract.encode_environment(config, entry_point="sub dir/train.py")
    (value,) = environment.values()
    assert len(value) <= contract.MAX_ENVIRONMENT_VALUE_CHARS
    settings = contract.settings_from_environment(environment)
    assert settings.config == config and settings.entry_point == "sub dir/train.py"


def test_smtc_keys_match_sdk_v2():
    wire = contract.encode(TrainingCompilerConfig(debug=True), entry_point="train.py")
    assert wire[contract.HP_ENABLED] is True and wire[contract.HP_DEBUG] is True
    assert contract.HP_ENABLED == "sagemaker_training_compiler_enabled"
    assert contract.HP_DEBUG == "sagemaker_training_compiler_debug_mode"


def test_smtc_only_request_gets_default_config_with_its_flags():
    settings = contract.decode({contract.HP_ENABLED: "true", contract.HP_DEBUG: "true"})
    assert settings.config == TrainingCompilerConfig(debug=True)
    assert settings.entry_point is None


def test_smtc_enabled_false_wins_over_settings():
    wire = contract.encode(TrainingCompilerConfig(), entry_point="train.py")
    wire[contract.HP_ENABLED] = False
    assert contract.decode(wire).config.enabled is False


def test_no_compiler_keys_means_not_configured():
    assert contract.decode({"sagemaker_program": "train.py"}) is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({contract.HP_ENABLED: "yes"}, "must be JSON"),
        ({contract.HP_ENABLED: 1}, "must be true or false"),
        ({contract.HP_SETTINGS: "[1, 2]"}, "must be a JSON object"),
        ({contract.HP_SETTINGS: {"schema_version": 99}}, "schema_version 99"),
        ({contract.HP_SETTINGS: {"config": {"turbo": True}}}, "unknown field 'turbo'"),
    ],
)
def test_malformed_settings_raise_config_error(params, message):
    with pytest.raises(ConfigError, match=message):
        contract.decode(params)


def test_environment_prefers_framework_params_then_settings_variable():
    wire = contract.encode(TrainingCompilerConfig(mode="max-autotune"), entry_point="a.py")
    framework_params = json.dumps(toolkit_decode(encode_hyperparameters(wire, allow_reserved=True)))
    fallback = json.dumps(
        contract.encode(TrainingCompilerConfig(backend="eager"), entry_point="b.py")[contract.HP_SETTINGS]
    )
    both = {contract.ENV_FRAMEWORK_PARAMS: framework_params, contract.ENV_SETTINGS: fallback}
    assert contract.settings_from_environment(both).config.mode == "max-autotune"
    only_env = {contract.ENV_FRAMEWORK_PARAMS: json.dumps({"sagemaker_other": 1}), contract.ENV_SETTINGS: fallback}
    assert contract.settings_from_environment(only_env).config.backend == "eager"
    assert contract.settings_from_environment({}) is None


def test_wire_names_are_frozen():
    """Renaming any of these breaks jobs and dashboards already in use."""
    names = {
        contract.HP_ENABLED,
        contract.HP_DEBUG,
        contract.HP_SETTINGS,
        contract.ENV_SETTINGS,
        contract.ENV_CONFIGURED,
        contract.LAUNCHER_PROGRAM,
        contract.COMPILER_OUTPUT_DIRNAME,
        contract.REPORT_FILENAME,
    }
    assert names == {
        "sagemaker_training_compiler_enabled",
        "sagemaker_training_compiler_debug_mode",
        "sagemaker_training_compiler_settings",
        "SM_TRAINING_COMPILER_SETTINGS",
        "SM_TRAINING_COMPILER_CONFIGURED",
        "sagemaker_tc_launcher.py",
        "compiler",
        "report.json",
    }
