"""Estimator arguments sagemaker-tc does not take, named all at once with what to do instead.

SMTC jobs were written against SageMaker Python SDK v2, whose estimators take many more arguments
(``EstimatorBase`` and ``Framework`` in sagemaker 2.x). Moving such a job should cost one error
listing every argument to change, not one ``TypeError`` per run.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError

_DEBUGGER = "SageMaker Debugger and Profiler are not supported (SMTC warned they add recompiles): delete it"
# SDK v2 arguments with a specific answer.
ADVICE = {
    "disable_profiler": _DEBUGGER,
    "debugger_hook_config": _DEBUGGER,
    "profiler_config": _DEBUGGER,
    "rules": _DEBUGGER,
    "instance_groups": "heterogeneous clusters are not supported (nor were they with SMTC): use instance_type "
    "and instance_count",
    "tensorflow_version": "sagemaker-tc compiles PyTorch; TensorFlow jobs are not supported",
    "framework_version": "HuggingFace takes transformers_version and pytorch_version, not framework_version",
    "transformers_version": "PyTorch takes framework_version; transformers_version is HuggingFace's",
    "pytorch_version": "PyTorch takes framework_version; pytorch_version is HuggingFace's",
    "use_spot_instances": "managed spot training is not supported yet: delete it (with max_wait)",
    "max_wait": "managed spot training is not supported yet: delete it (with use_spot_instances)",
    "code_location": "the source is uploaded next to the job's output (output_path's bucket): delete it",
    "git_config": "check the repository out locally and pass its folder as source_dir",
    "dependencies": "put the folders your script needs inside source_dir",
}
# Other SDK v2 estimator arguments (sagemaker 2.x EstimatorBase, Framework and the framework classes).
SDK_V2_ARGUMENTS = frozenset(
    {
        "keep_alive_period_in_seconds",
        "volume_kms_key",
        "input_mode",
        "output_kms_key",
        "tags",
        "subnets",
        "security_group_ids",
        "model_uri",
        "model_channel_name",
        "encrypt_inter_container_traffic",
        "tensorboard_output_config",
        "enable_sagemaker_metrics",
        "enable_network_isolation",
        "max_retry_attempts",
        "container_log_level",
        "training_repository_access_mode",
        "training_repository_credentials_provider_arn",
        "enable_infra_check",
        "container_entry_point",
        "container_arguments",
        "disable_output_compression",
        "enable_remote_debug",
        "enable_session_tag_chaining",
        "training_plan",
        "training_recipe",
        "recipe_overrides",
    }
)


def _advice(name: str, accepted: Sequence[str]) -> str:
    if name in ADVICE:
        return ADVICE[name]
    if name in SDK_V2_ARGUMENTS:
        return "an SDK v2 argument sagemaker-tc does not support yet: delete it"
    close = difflib.get_close_matches(name, accepted, n=1)
    return f"unknown: did you mean {close[0]}?" if close else "unknown"


def check_unsupported(estimator: str, unsupported: Mapping[str, Any], accepted: Sequence[str]) -> None:
    """Refuse every argument the estimator does not take, all in one error.

    Args:
        estimator: the estimator's class name.
        unsupported: the keyword arguments no parameter took.
        accepted: the estimator's parameter names.

    Raises:
        EstimatorArgumentError: ``unsupported`` is not empty; the message names each argument with
            what to do, then the accepted arguments.
    """
    if not unsupported:
        return
    listed = "; ".join(f"{name} ({_advice(name, accepted)})" for name in unsupported)
    raise EstimatorArgumentError(
        f"{estimator} does not take {len(unsupported)} of the arguments given: {listed}. "
        f"The arguments it takes: {', '.join(accepted)}"
    )
