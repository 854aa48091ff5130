"""``fit()``'s SDK v2 arguments beyond the inputs: ``logs`` and ``experiment_config``, checked before
any upload or job (SDK v2's ``EstimatorBase.fit`` took both)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sagemaker_tc.errors import EstimatorArgumentError

logger = logging.getLogger(__name__)

# SDK v2's ``logs`` values (``sagemaker.estimator.EstimatorBase.fit``): a log type, or a bool.
_LOG_TYPES = {"All": True, "Training": True, "Rules": True, "None": False}
# ExperimentConfig's fields (CreateTrainingJob), as SDK v2 users spell them.
_EXPERIMENT_FIELDS = ("ExperimentName", "TrialName", "TrialComponentDisplayName", "RunName")


def check_logs(logs: Any) -> bool:
    """``fit(logs=...)`` as a flag: True, ``"All"``, ``"Training"``, ``"Rules"`` show the log;
    False, None, ``"None"`` do not.

    Raises:
        EstimatorArgumentError: any other value.
    """
    if logs is None or isinstance(logs, bool):
        return bool(logs)
    if isinstance(logs, str) and logs in _LOG_TYPES:
        return _LOG_TYPES[logs]
    raise EstimatorArgumentError(
        f"fit(logs={logs!r}) is not accepted: True, False, or one of SDK v2's {', '.join(map(repr, _LOG_TYPES))}"
    )


def check_experiment_config(value: Any, *, cloud: bool):
    """``fit(experiment_config=...)`` as sagemaker-core's ``ExperimentConfig`` shape (None: not sent).

    Local modes have no SageMaker Experiments: the value is checked, logged and not used.

    Raises:
        EstimatorArgumentError: not a dict of ExperimentConfig's fields (``ExperimentName``,
            ``TrialName``, ``TrialComponentDisplayName``, ``RunName``) with string values, or outside
            CreateTrainingJob's limits for them.
    """
    if value is None:
        return None
    from sagemaker.core.shapes import ExperimentConfig

    from sagemaker_tc.sdk.api_limits import check_limit

    unknown = sorted(set(value) - set(_EXPERIMENT_FIELDS)) if isinstance(value, Mapping) else None
    if unknown is None or unknown or not value:
        raise EstimatorArgumentError(
            f"experiment_config takes a dict of {', '.join(_EXPERIMENT_FIELDS)}, got "
            + (f"unknown keys {unknown}" if unknown else repr(value))
        )
    for key, text in value.items():
        check_limit(f"experiment_config[{key!r}]", "ExperimentEntityName", text)
    if not cloud:
        logger.info("experiment_config applies to SageMaker training jobs only: not used by this local job")
        return None
    return ExperimentConfig(
        experiment_name=value.get("ExperimentName"),
        trial_name=value.get("TrialName"),
        trial_component_display_name=value.get("TrialComponentDisplayName"),
        run_name=value.get("RunName"),
    )
