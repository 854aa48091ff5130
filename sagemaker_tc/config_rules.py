"""Rules of ``TrainingCompilerConfig`` that involve more than one field, and the bounds shared with
the places that take the same values (``BucketCollator``'s buckets).

A field that does nothing with the others is a :class:`~sagemaker_tc.errors.ConfigWarning` when the
config is built (the message says which field wins); values no job could use are refused by the
field validators with these bounds. Imports only the standard library and sagemaker_tc's own
stdlib-only modules, so the SDK side never needs torch.
"""

from __future__ import annotations

from typing import Any

from sagemaker_tc.errors import ConfigWarning
from sagemaker_tc.warn import warn_user

MAX_BUCKETS = 16
# Sequence lengths (bucket lengths, tune_seq_len): 1 Mi tokens, beyond any model's context today.
MAX_SEQUENCE_LENGTH = 2**20
# Per-device batch: the same ceiling as max_batch_size.
MAX_BATCH = 65536
# Optimizer steps in one job: a billion.
MAX_EXPECTED_STEPS = 10**9
# The watchdog's grace period: at least a second (the watchdog polls about once a second), at most
# SageMaker's longest job (28 days, MaxRuntimeInSeconds).
MIN_HANG_GRACE_S = 1.0
MAX_HANG_GRACE_S = 28 * 24 * 60 * 60

# Fields only batch_size="auto" reads, with their defaults.
AUTO_BATCH_FIELDS = {"memory_budget_gib": None, "tune_seq_len": None, "max_batch_size": 1024, "batch_size_multiple": 1}


def bucket_problem(value: Any) -> str | None:
    """What is wrong with a list of bucket lengths (None: nothing): 1 to 16 ints, each 1 to 2**20,
    strictly increasing. Used by the config's ``buckets`` and by ``BucketCollator(buckets=...)``."""
    if not isinstance(value, (list, tuple)) or not value or len(value) > MAX_BUCKETS:
        return f"give 1 to {MAX_BUCKETS} bucket lengths, 'auto', or None"
    if not all(isinstance(length, int) and not isinstance(length, bool) for length in value):
        return "bucket lengths must be whole numbers of tokens, e.g. [32, 64, 128]"
    if any(length < 1 for length in value) or sorted(set(value)) != list(value):
        return "bucket lengths must be positive and strictly increasing, e.g. [32, 64, 128]"
    if value[-1] > MAX_SEQUENCE_LENGTH:
        return f"bucket lengths are sequence lengths in tokens, at most {MAX_SEQUENCE_LENGTH} (2**20)"
    return None


def warn_contradictions(config: Any) -> None:
    """One :class:`~sagemaker_tc.errors.ConfigWarning` for each field that does nothing with the others."""
    for message in _contradictions(config):
        warn_user(message, ConfigWarning)


def _contradictions(config: Any) -> list[str]:
    messages = []
    plan = config.plan
    if config.debug and not config.enabled:
        messages.append(
            "TrainingCompilerConfig(enabled=False, debug=True): enabled=False wins, the job runs without the "
            "compiler and debug mode does nothing"
        )
    if config.resume == "auto" and not config.enabled:
        messages.append(
            "TrainingCompilerConfig(enabled=False, resume='auto'): enabled=False wins, the job runs without "
            "sagemaker-tc's launcher and resume does nothing (pass resume_from_checkpoint to Trainer.train yourself)"
        )
    if not config.enabled:
        return messages  # no other field applies to a disabled config: nothing to contradict
    if config.backend == "eager" and config.mode != "default":
        messages.append(
            f"TrainingCompilerConfig(backend='eager', mode={config.mode!r}): backend='eager' wins, nothing is "
            "compiled and mode does nothing"
        )
    if config.backend == "eager" and plan != "auto":
        messages.append(
            f"TrainingCompilerConfig(backend='eager', plan={plan!r}): backend='eager' wins, nothing is compiled "
            "and plan does nothing"
        )
    if config.backend == "xla" and (config.mode != "default" or plan != "auto"):
        messages.append(
            f"TrainingCompilerConfig(backend='xla', mode={config.mode!r}, plan={plan!r}): mode and plan are "
            "torch.compile's; with backend='xla' each optimizer step is one XLA graph and both do nothing"
        )
    if config.compile_optimizer and plan in ("regional", "model"):
        messages.append(
            f"TrainingCompilerConfig(compile_optimizer=True, plan={plan!r}): only plan='step' compiles the "
            "optimizer update, so compile_optimizer does nothing with this plan"
        )
    if config.expected_steps is not None and plan != "auto":
        messages.append(
            f"TrainingCompilerConfig(expected_steps={config.expected_steps}, plan={plan!r}): only plan='auto' "
            "reads expected_steps (to decide which plan pays off), so it does nothing with an explicit plan"
        )
    if config.dynamic is True and isinstance(config.buckets, list):
        messages.append(
            f"TrainingCompilerConfig(dynamic=True, buckets={config.buckets!r}): dynamic=True compiles graphs "
            "for any sequence length, so bucketing only adds padding; give buckets=None with dynamic=True, "
            "or leave dynamic unset to bucket"
        )
    messages.extend(_batch_contradictions(config))
    return messages


def _batch_contradictions(config: Any) -> list[str]:
    messages = []
    batch = config.batch_size
    if config.lr_scaling != "linear" and batch is None:
        messages.append(
            f"TrainingCompilerConfig(lr_scaling={config.lr_scaling!r}) without batch_size: the learning rate "
            "follows lr_scaling only when batch_size changes the batch, so lr_scaling does nothing"
        )
    if batch == "auto":
        return messages
    changed = {name: getattr(config, name) for name, default in AUTO_BATCH_FIELDS.items()}
    changed = {name: value for name, value in changed.items() if value != AUTO_BATCH_FIELDS[name]}
    if not changed:
        return messages
    detail = ""
    if isinstance(batch, int) and batch > config.max_batch_size:
        detail += f"; batch_size={batch} is above max_batch_size={config.max_batch_size} and is used as given"
    if isinstance(batch, int) and batch % config.batch_size_multiple:
        detail += (
            f"; batch_size={batch} is not a multiple of batch_size_multiple={config.batch_size_multiple} and is "
            "used as given"
        )
    settings = ", ".join(f"{name}={value!r}" for name, value in changed.items())
    messages.append(
        f"TrainingCompilerConfig(batch_size={batch!r}, {settings}): {', '.join(changed)} only steer "
        f"batch_size='auto' and do nothing here{detail}"
    )
    return messages
