"""Hugging Face ``Trainer`` integration: compile with no change to the script, and measure steps.

Compilation uses accelerate's own environment contract: ``Trainer`` builds an ``Accelerator`` whose
``TorchDynamoPlugin`` reads ``ACCELERATE_DYNAMO_*`` (see :func:`accelerate_environment`). A script
that sets ``TrainingArguments(torch_compile=...)`` itself keeps its own choice.

Step times reach the report through a ``TrainerCallback`` added to ``transformers.trainer.
DEFAULT_CALLBACKS``, the list every ``Trainer`` starts its callbacks from.
"""

from __future__ import annotations

from sagemaker_tc.compiler.recorder import RECORDER
from sagemaker_tc.config import TrainingCompilerConfig

ENV_PREFIX = "ACCELERATE_DYNAMO_"


def accelerate_environment(config: TrainingCompilerConfig) -> dict[str, str]:
    """``ACCELERATE_DYNAMO_*`` variables that make ``Trainer`` compile by ``config``.

    Empty when ``config`` does not compile (disabled or ``backend="eager"``): the script runs as
    written. Names and parsing: accelerate ``TorchDynamoPlugin.__post_init__`` (``str_to_bool``).
    """
    if not config.compiles:
        return {}
    env = {
        f"{ENV_PREFIX}BACKEND": config.backend,
        f"{ENV_PREFIX}MODE": config.mode,
        f"{ENV_PREFIX}USE_REGIONAL_COMPILATION": str(config.regional).lower(),
        f"{ENV_PREFIX}USE_FULLGRAPH": str(config.fullgraph).lower(),
    }
    if config.dynamic is not None:
        env[f"{ENV_PREFIX}USE_DYNAMIC"] = str(config.dynamic).lower()
    return env


def _callback_class():
    from transformers import TrainerCallback

    class CompilerReportCallback(TrainerCallback):
        """Times each optimizer step for the sagemaker-tc report (global batch = per-device batch x
        gradient accumulation x world size)."""

        def on_train_begin(self, args, state, control, **kwargs):
            RECORDER.integration = "transformers"

        def on_step_begin(self, args, state, control, **kwargs):
            RECORDER.begin_step()

        def on_step_end(self, args, state, control, **kwargs):
            per_device = getattr(state, "train_batch_size", None) or args.per_device_train_batch_size
            RECORDER.end_step(per_device * args.gradient_accumulation_steps * args.world_size)

    return CompilerReportCallback


def install() -> bool:
    """Add the step-timing callback to every ``Trainer`` this process creates (idempotent).

    Returns:
        False when transformers is not installed (nothing to do), else True.
    """
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return False
    import transformers.trainer as trainer_module

    if not any(getattr(cb, "__name__", "") == "CompilerReportCallback" for cb in trainer_module.DEFAULT_CALLBACKS):
        trainer_module.DEFAULT_CALLBACKS.append(_callback_class())
    return True
