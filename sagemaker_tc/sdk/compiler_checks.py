"""The estimator's settings checked against the compiler, as SDK v2's
``TrainingCompilerConfig.validate(estimator)`` checked them: the same checks the estimator runs when
it is built, run again on its attributes as they are now (a notebook may change ``instance_count`` or
``distribution`` after building it), plus SDK v2's warnings.
"""

from __future__ import annotations

from typing import Any

from sagemaker_tc.config import checked_config
from sagemaker_tc.errors import ConfigError, JobSettingWarning
from sagemaker_tc.sdk import compiler_rules, instances
from sagemaker_tc.sdk.distribution import distribution_hyperparameters
from sagemaker_tc.sdk.images import check_training_image
from sagemaker_tc.sdk.instances import InstanceKind
from sagemaker_tc.sdk.job_settings import JobSettings, warn_debugger_overhead
from sagemaker_tc.warn import warn_user


def warn_hosts_without_distribution(instance_count: Any, distributed: bool) -> None:
    """Warn (as SDK v2 did with the compiler on) that several hosts without ``distribution`` each
    train their own copy of the model."""
    if isinstance(instance_count, int) and instance_count > 1 and not distributed:
        warn_user(
            f"instance_count={instance_count} without distribution: each of the {instance_count} hosts runs its own "
            "copy of the script and trains alone (no gradients shared); for data-parallel training across the hosts "
            "pass distribution={'torch_distributed': {'enabled': True}}",
            JobSettingWarning,
        )


def validate(estimator: Any) -> None:
    """Check ``estimator``'s settings against its ``compiler_config`` (SDK v2's
    ``TrainingCompilerConfig.validate(estimator)``); nothing to check when the compiler is off.

    Raises:
        ConfigError: ``compiler_config`` is not a valid config; ``instance_groups`` is set
            (heterogeneous clusters: SMTC refused them too); ``backend="xla"`` where no XLA device is.
        EstimatorArgumentError: a ``distribution`` the compiler does not run (``smdistributed``, ...),
            an unknown instance type or count.
        UnsupportedImageError: ``image_uri`` (or, without it, the versions) cannot run the compiler.

    Warns:
        JobSettingWarning: several hosts without ``distribution``; Debugger/Profiler hooks (overhead).
    """
    config = checked_config(estimator.compiler_config)
    if not config:
        return
    if getattr(estimator, "instance_groups", None):
        raise ConfigError(
            "instance_groups: the compiler runs homogeneous clusters only (as SMTC did); use instance_type and "
            "instance_count"
        )
    distributed = bool(distribution_hyperparameters(estimator.distribution))
    instance_type, kind = instances.check_instance(estimator.instance_type, estimator.instance_count)
    compiler_rules.check_backend(config, kind, instance_type, default_image=estimator.image_uri is None)
    if kind is not InstanceKind.LOCAL_PROCESS:
        if estimator.image_uri is None:
            estimator._check_tested_stack()
        else:
            check_training_image(estimator.image_uri, argument="image_uri", tested_stack=False)
    warn_hosts_without_distribution(estimator.instance_count, distributed)
    warn_debugger_overhead(getattr(estimator, "settings", None) or JobSettings())
