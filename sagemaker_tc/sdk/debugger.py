"""SDK v2's Debugger, Profiler and TensorBoard arguments as sagemaker-core shapes.

SDK v2 users pass ``sagemaker.debugger`` objects (``DebuggerHookConfig``, ``ProfilerConfig``,
``TensorBoardOutputConfig``, ``Rule``/``ProfilerRule``), which turn themselves into the API's
fields (``_to_request_dict()``, ``to_debugger_rule_config_dict()``, ``to_profiler_rule_config_dict()``).
Without SDK v2 installed, the same fields come as sagemaker-core shapes or as the API's dicts. Each
is turned into its shape here, so the request carries what SDK v2 would have sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagemaker.core.shapes import (
    DebugHookConfig,
    DebugRuleConfiguration,
    ProfilerConfig,
    ProfilerRuleConfiguration,
    TensorBoardOutputConfig,
)
from sagemaker.core.utils.utils import transform

from sagemaker_tc.errors import EstimatorArgumentError


def _shape(argument: str, value: Any, shape: type, method: str = "_to_request_dict"):
    """``value`` as ``shape``: the shape itself, the API's dict, or an SDK v2 object's own dict."""
    if isinstance(value, shape):
        return value
    if hasattr(value, method):
        value = getattr(value, method)()
    if not isinstance(value, Mapping):
        raise EstimatorArgumentError(
            f"{argument} must be SDK v2's object, sagemaker.core.shapes.{shape.__name__} or its API dict, "
            f"got {type(value).__name__}"
        )
    try:
        return shape(**transform(dict(value), shape.__name__))
    except (ValueError, TypeError, KeyError) as error:
        raise EstimatorArgumentError(f"{argument} is not a valid {shape.__name__}: {error}") from None


def tensorboard_shape(value: Any) -> TensorBoardOutputConfig:
    """``tensorboard_output_config`` -> ``TensorBoardOutputConfig`` (S3OutputPath, LocalPath)."""
    return _shape("tensorboard_output_config", value, TensorBoardOutputConfig)


def hook_shape(value: Any) -> DebugHookConfig | None:
    """``debugger_hook_config``: False -> None (Debugger off, sent as nothing, as SDK v2 does)."""
    if value is False:
        return None
    if value is True:
        raise EstimatorArgumentError("debugger_hook_config takes False (off) or a DebuggerHookConfig, got True")
    return _shape("debugger_hook_config", value, DebugHookConfig)


def profiler_shape(value: Any) -> ProfilerConfig:
    """``profiler_config`` -> ``ProfilerConfig``."""
    return _shape("profiler_config", value, ProfilerConfig)


def rule_shapes(value: Any) -> dict[str, list]:
    """``rules`` -> ``{"debug": [DebugRuleConfiguration], "profiler": [ProfilerRuleConfiguration]}``.

    SDK v2 splits its ``rules`` the same way: Debugger rules and Profiler rules are two request fields.
    """
    if not isinstance(value, (list, tuple)):
        raise EstimatorArgumentError(f"rules must be a list of Debugger or Profiler rules, got {value!r}")
    split: dict[str, list] = {"debug": [], "profiler": []}
    for rule in value:
        if isinstance(rule, ProfilerRuleConfiguration) or hasattr(rule, "to_profiler_rule_config_dict"):
            split["profiler"].append(_shape("rules", rule, ProfilerRuleConfiguration, "to_profiler_rule_config_dict"))
        else:
            split["debug"].append(_shape("rules", rule, DebugRuleConfiguration, "to_debugger_rule_config_dict"))
    return split
