"""SDK v2's Debugger, Profiler and TensorBoard arguments as sagemaker-core shapes.

SDK v2 users pass ``sagemaker.debugger`` objects (``DebuggerHookConfig``, ``ProfilerConfig``,
``TensorBoardOutputConfig``, ``Rule``/``ProfilerRule``), which turn themselves into the API's
fields (``_to_request_dict()``, ``to_debugger_rule_config_dict()``, ``to_profiler_rule_config_dict()``).
Without SDK v2 installed, the same fields come as sagemaker-core shapes or as the API's dicts. Each
is turned into its shape here, so the request carries what SDK v2 would have sent.

What SDK v2 filled in when the job was built (``EstimatorBase._prepare_debugger_for_training`` and
``_prepare_profiler_for_training``) is filled in by :func:`complete` for a SageMaker job: the region's
rule image for built-in rules (``DEFAULT_RULE_EVALUATOR_IMAGE``), a ``DebugHookConfig`` writing to the
job's ``output_path`` with the rules' tensor collections, a ``ProfilerConfig`` for profiler rules, and
``output_path`` for a hook or profiler config given without an S3 path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagemaker.core.shapes import (
    CollectionConfiguration,
    DebugHookConfig,
    DebugRuleConfiguration,
    ProfilerConfig,
    ProfilerRuleConfiguration,
    TensorBoardOutputConfig,
)
from sagemaker.core.utils.utils import Unassigned, transform

from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk.api_limits import check_limit

# The rule image SDK v2's (and sagemaker-core's) Rule.sagemaker() leaves for the estimator to fill in.
DEFAULT_RULE_IMAGE = "DEFAULT_RULE_EVALUATOR_IMAGE"
# A hook config given without an S3 path carries this until the job's output_path fills it in.
OUTPUT_PATH_LATER = ""


def _shape(argument: str, value: Any, shape: type, method: str = "_to_request_dict", *, fill_path: bool = False):
    """``value`` as ``shape``: the shape itself, the API's dict, or an SDK v2 object's own dict.
    ``fill_path``: an ``S3OutputPath`` missing or None is left for :func:`complete` to fill in."""
    if isinstance(value, shape):
        return value
    if hasattr(value, method):
        value = getattr(value, method)()
    if fill_path and isinstance(value, Mapping) and not value.get("S3OutputPath"):
        value = {key: item for key, item in value.items() if key != "S3OutputPath"}
        if shape is DebugHookConfig:  # its S3OutputPath is required: a placeholder until complete()
            value["S3OutputPath"] = OUTPUT_PATH_LATER
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
    """``tensorboard_output_config`` -> ``TensorBoardOutputConfig`` (S3OutputPath, LocalPath).

    Raises:
        EstimatorArgumentError: not such an object or dict; an ``S3OutputPath`` CreateTrainingJob
            would refuse (not an ``s3://`` URI).
    """
    shape = _shape("tensorboard_output_config", value, TensorBoardOutputConfig)
    path = getattr(shape, "s3_output_path", None)
    if isinstance(path, str):
        check_limit("tensorboard_output_config's S3OutputPath", "S3Uri", path)
    return shape


def hook_shape(value: Any) -> DebugHookConfig | None:
    """``debugger_hook_config``: False -> None (Debugger off, sent as nothing, as SDK v2 does)."""
    if value is False:
        return None
    if value is True:
        raise EstimatorArgumentError("debugger_hook_config takes False (off) or a DebuggerHookConfig, got True")
    return _shape("debugger_hook_config", value, DebugHookConfig, fill_path=True)


def profiler_shape(value: Any) -> ProfilerConfig:
    """``profiler_config`` -> ``ProfilerConfig`` (no S3 path: the job's ``output_path``, see :func:`complete`)."""
    return _shape("profiler_config", value, ProfilerConfig, fill_path=True)


def rule_shapes(value: Any) -> dict[str, list]:
    """``rules`` -> ``{"debug": [DebugRuleConfiguration], "profiler": [ProfilerRuleConfiguration],
    "collections": [CollectionConfiguration]}`` (the tensor collections the Debugger rules need).

    SDK v2 splits its ``rules`` the same way: Debugger rules and Profiler rules are two request fields.
    """
    if not isinstance(value, (list, tuple)):
        raise EstimatorArgumentError(f"rules must be a list of Debugger or Profiler rules, got {value!r}")
    split: dict[str, list] = {"debug": [], "profiler": [], "collections": []}
    for rule in value:
        if isinstance(rule, ProfilerRuleConfiguration) or hasattr(rule, "to_profiler_rule_config_dict"):
            split["profiler"].append(_shape("rules", rule, ProfilerRuleConfiguration, "to_profiler_rule_config_dict"))
        else:
            split["debug"].append(_shape("rules", rule, DebugRuleConfiguration, "to_debugger_rule_config_dict"))
            for collection in getattr(rule, "collection_configs", None) or []:
                split["collections"].append(_shape("rules", collection, CollectionConfiguration))
    return split


def _unset(value: Any) -> bool:
    return value is None or isinstance(value, Unassigned) or value == OUTPUT_PATH_LATER


def _with_rule_image(rule, region: str):
    """``rule`` with the region's Debugger rule image in place of SDK v2's placeholder."""
    if rule.rule_evaluator_image != DEFAULT_RULE_IMAGE:
        return rule
    from sagemaker.core.debugger.debugger import get_rule_container_image_uri

    image = get_rule_container_image_uri(rule.rule_configuration_name, region)
    return rule.model_copy(update={"rule_evaluator_image": image})


def _merged_collections(hook: DebugHookConfig, rule_collections: list) -> list | None:
    """The hook's tensor collections plus the rules' (SDK v2's ``_prepare_collections``), each once."""
    own = [] if isinstance(hook.collection_configurations, Unassigned) else list(hook.collection_configurations or [])
    merged = []
    for collection in own + rule_collections:
        if collection not in merged:
            merged.append(collection)
    return merged or None


def complete(fields: dict[str, Any], *, hook_given: bool, output_path: str, region: str) -> dict[str, Any]:
    """The Debugger and Profiler request fields as SDK v2 completed them for a SageMaker job.

    Args:
        fields: ``debug_hook_config``, ``debug_rule_configurations``, ``profiler_config``,
            ``profiler_rule_configurations`` (None: not set) and ``rule_collections`` (list).
        hook_given: ``debugger_hook_config`` was passed (``False`` turns the hook off: no default one).
        output_path: the job's ``s3://`` output path (where SDK v2 put Debugger and Profiler data).
        region: the job's AWS region (its rule images).

    Returns:
        The four request fields, completed (None: not sent).
    """
    debug_rules = [_with_rule_image(rule, region) for rule in fields.get("debug_rule_configurations") or []]
    profiler_rules = [_with_rule_image(rule, region) for rule in fields.get("profiler_rule_configurations") or []]
    hook = fields.get("debug_hook_config")
    if hook is None and debug_rules and not hook_given:
        hook = DebugHookConfig(s3_output_path=output_path)
    if hook is not None:
        update = {"collection_configurations": _merged_collections(hook, fields.get("rule_collections") or [])}
        if _unset(hook.s3_output_path):
            update["s3_output_path"] = output_path
        hook = hook.model_copy(update={name: value for name, value in update.items() if value is not None})
    profiler = fields.get("profiler_config")
    if profiler is None and profiler_rules:
        profiler = ProfilerConfig(s3_output_path=output_path)
    elif profiler is not None and not profiler.disable_profiler and _unset(profiler.s3_output_path):
        profiler = profiler.model_copy(update={"s3_output_path": output_path})
    return {
        "debug_hook_config": hook,
        "debug_rule_configurations": debug_rules or None,
        "profiler_config": profiler,
        "profiler_rule_configurations": profiler_rules or None,
    }
