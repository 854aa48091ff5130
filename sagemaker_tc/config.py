"""``TrainingCompilerConfig``: the one object a user adds to an estimator to turn the compiler on.

Imports only pydantic and the standard library, so the SDK side never needs torch.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from sagemaker_tc import config_rules
from sagemaker_tc.config_rules import MAX_BUCKETS
from sagemaker_tc.errors import ConfigError, ConfigWarning
from sagemaker_tc.uris import has_control_character, looks_like_s3, s3_uri_problem

logger = logging.getLogger(__name__)

Backend = Literal["inductor", "eager", "xla"]
"""Compiler backends:

- ``inductor``: torch.compile's default (CUDA GPUs and CPUs); the ``plan`` says what is compiled.
- ``xla``: torch_xla's lazy tensors on a PJRT device (TPU, or the CPU): the model runs on the XLA
  device and each optimizer step is traced and compiled by XLA as one graph
  (:mod:`sagemaker_tc.compiler.xla`). XLA:CUDA was removed upstream in torch_xla 2.9, so not for GPUs.
- ``eager``: runs uncompiled (a baseline).
"""

Mode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
"""torch.compile's ``mode`` values (torch 2.x)."""

Policy = Literal["fallback", "strict"]
"""What the runtime does about a compiler that fails:

- ``fallback``: a compiler failure (no C++ compiler, a backend exception, an unsupported op) at any
  compiled call switches the job to eager with a loud warning; the report says ``compiled: false``
  and why.
- ``strict``: a compiler failure raises :class:`~sagemaker_tc.errors.CompilerError`.

Measuring the options and keeping the fastest is ``plan="auto"``'s job, not the policy's.
"""

Plan = Literal["auto", "regional", "model", "step"]
"""What is compiled (:mod:`sagemaker_tc.compiler.plans`):

- ``regional``: each repeated block (transformer layer); cheapest to compile.
- ``model``: the whole model's forward and loss as one graph (backward through AOTAutograd).
- ``step``: ``model`` plus the optimizer update; on CUDA with static shapes, captured in CUDA graphs.
- ``auto``: measured on the job itself: eager steps first, then each plan that can still pay off in
  the job's remaining steps, keeping the one with the lowest projected job time, eager included.
"""

__all__ = ["MAX_BUCKETS", "TrainingCompilerConfig", "checked_config"]

AUTO_BUCKETS = "auto"
AUTO_BATCH = "auto"

LrScaling = Literal["linear", "sqrt", "none"]
"""How the learning rate follows a batch size changed by ``batch_size``: ``linear`` (Goyal et al.
2017), ``sqrt`` (Malladi et al. 2022 for Adam), or ``none``. Sources in
:mod:`sagemaker_tc.tuning.scaling`."""


def _describe_validation_error(error: ValidationError) -> str:
    """Turn pydantic's error list into one line per field: what was wrong, what is accepted.

    A field whose type is a union (e.g. ``buckets``) gets one line listing each accepted form; an
    unknown field gets a line listing the accepted fields.
    """
    by_field: dict[str, list[dict[str, Any]]] = {}
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else "<config>"
        by_field.setdefault(field, []).append(item)
    lines = []
    for field, items in by_field.items():
        if items[0]["type"] == "extra_forbidden":
            accepted = ", ".join(TrainingCompilerConfig.model_fields)
            lines.append(f"unknown field {field!r} (accepted fields: {accepted})")
        elif len(items) == 1:
            lines.append(f"{field}: {items[0]['msg']} (got {items[0].get('input')!r})")
        else:
            forms = "; or ".join(dict.fromkeys(item["msg"] for item in items))  # one line per distinct form
            lines.append(f"{field}: got {items[0].get('input')!r}, accepted: {forms}")
    return "; ".join(lines)


@contextmanager
def _as_config_error() -> Iterator[None]:
    """pydantic's ``ValidationError`` raised as :class:`ConfigError`, with every problem described."""
    try:
        yield
    except ValidationError as error:
        raise ConfigError(f"Invalid TrainingCompilerConfig: {_describe_validation_error(error)}") from None


class TrainingCompilerConfig(BaseModel):
    """Turns the training compiler on for an estimator's job, as SMTC's class of the same name did.

    ``HuggingFace(..., compiler_config=TrainingCompilerConfig())`` compiles a Hugging Face
    ``Trainer`` script with no change to the script; a plain PyTorch loop calls
    ``sagemaker_tc.compile_model(model)`` once.

    Unlike SMTC, a disabled config is falsy: ``bool(TrainingCompilerConfig(enabled=False))`` is
    ``False`` and the job runs as a plain script-mode job.

    Raises:
        ConfigError: an unknown field, a value outside the accepted set, or a wrong type; a
            positional argument (every setting is named: ``TrainingCompilerConfig(enabled=True)``).
            The message names the field and what is accepted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    enabled: bool = Field(default=True, description="Compile the training step. False runs the job uncompiled.")
    debug: bool = Field(
        default=False,
        description="Debug mode: write compiler logs and artifacts to $SM_OUTPUT_DATA_DIR/compiler/ (slower).",
    )
    backend: Backend = Field(
        default="inductor",
        description="'inductor' (torch.compile, GPUs and CPUs), 'xla' (torch_xla on a PJRT device: TPU or CPU; "
        "not GPUs), or 'eager' (a no-compile baseline).",
    )
    mode: Mode = Field(default="default", description="torch.compile mode.")
    plan: Plan = Field(
        default="auto",
        description="What to compile: 'regional' (each repeated block), 'model' (forward and loss as one graph), "
        "'step' (model and the optimizer's fused update; CUDA graphs on static shapes on one GPU), or 'auto': eager "
        "steps first, then each plan that can still pay off, keeping the one with the lowest projected job time, "
        "eager included. On CUDA, 'auto' tries only plans a committed GPU result backs (today 'model').",
    )
    compile_optimizer: bool = Field(
        default=False,
        description="Under plan='step', compile the optimizer update as one graph instead of its fused kernel "
        "(opt-in: no GPU result backs it yet; never CUDA-graphed).",
    )
    dynamic: bool | None = Field(
        default=None,
        description="torch.compile's dynamic: None lets dynamo mark changing dims dynamic after the first "
        "recompile; True compiles dynamic shapes from the start; False always specializes.",
    )
    fullgraph: bool = Field(default=False, description="Raise on any graph break instead of splitting the graph.")
    policy: Policy = Field(
        default="fallback",
        description="'fallback': a failing plan (or one out of memory) ends for the job, which steps back to the next "
        "safer plan (step, model, regional, eager) with a warning; 'strict': a compiler failure raises "
        "CompilerError.",
    )
    buckets: list[int] | Literal["auto"] | None = Field(
        default=AUTO_BUCKETS,
        description="Shape bucketing while a compiled plan runs (eager never pads): each training batch's sequence "
        "length is padded up, so one epoch compiles at most one graph per padded length. 'auto': to the next "
        "multiple of a step learned from the lengths the eager steps saw (their spread, longest - shortest + 1, "
        "split in 4 and rounded up to a multiple of 8 tokens, at least 8), never past the model's maximum length, "
        "and to at most 8 lengths over a job (a call that would need a ninth runs unpadded, on the dynamic-shape "
        "graph); a list of lengths: to the next listed length; None turns bucketing off (dynamic shapes). "
        "Only calls that padding keeps exact are padded (an attention mask of shape (batch, length), or a causal "
        "model), and a padded call's outputs are cut back to its own lengths.",
    )
    cache: str | None = Field(
        default=None,
        description="Compile cache reused across jobs: a local folder or an s3:// URI. Loaded before the first "
        "compile, saved when the job ends. None: no cache.",
    )
    resume: Literal["auto"] | None = Field(
        default=None,
        description="'auto': a Hugging Face Trainer script that calls trainer.train() without "
        "resume_from_checkpoint resumes from the newest complete checkpoint in TrainingArguments.output_dir "
        "(point it at /opt/ml/checkpoints for checkpoint_s3_uri and spot); with none there, it starts from the "
        "beginning. None: the script decides (as written). A resumed job keeps its compile plan decision.",
    )
    baseline_steps: int = Field(
        default=3,
        ge=0,
        le=100,
        description="Optimizer steps run uncompiled first (the first one as warm-up) to measure the eager step for "
        "break_even_steps. 0 compiles from the first step (with an explicit plan; plan='auto' always measures at "
        "least 5 eager steps).",
    )
    expected_steps: int | None = Field(
        default=None,
        ge=1,
        le=config_rules.MAX_EXPECTED_STEPS,
        description="Optimizer steps the job will run, for plan='auto' in a plain PyTorch loop (a Hugging Face "
        "Trainer knows its max_steps). None: 1000 steps are assumed, and the report says so.",
    )

    batch_size: int | Literal["auto"] | None = Field(
        default=None,
        description="Per-device training batch. None: the script's own. 'auto': the largest batch that trains "
        "(forward, backward, optimizer step) within memory_budget_gib, found at the start of the job for the "
        "compiled model. An int: that batch. Either way the learning rate follows lr_scaling, warm-up steps and "
        "max_steps are rescaled to cover the same samples, and report.json records before and after.",
    )
    lr_scaling: LrScaling = Field(
        default="linear",
        description="Learning-rate rule when batch_size changes the batch: 'linear' (lr x new/old batch), "
        "'sqrt' (lr x sqrt(new/old), often safer for AdamW) or 'none'. Applies only with batch_size set.",
    )
    memory_budget_gib: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Peak memory per device that batch_size='auto' may use, GiB. None: 90% of the GPU's memory; "
        "on CPU, half of the host's available memory (tensor memory, as PyTorch's allocator counts it).",
    )
    tune_seq_len: int | None = Field(
        default=None,
        ge=1,
        le=config_rules.MAX_SEQUENCE_LENGTH,
        description="Sequence length batch_size='auto' tries batches at: the longest training sequence. None: "
        "the largest bucket of a bucket list, else the model's maximum length (e.g. 512 for BERT).",
    )
    max_batch_size: int = Field(
        default=1024,
        ge=1,
        le=config_rules.MAX_BATCH,
        description=f"Largest per-device batch batch_size='auto' tries (at most {config_rules.MAX_BATCH}).",
    )
    batch_size_multiple: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="batch_size='auto' only tries multiples of this, e.g. 8 so GPU matrix shapes suit tensor cores.",
    )

    hang_grace_s: float | None = Field(
        default=None,
        ge=config_rules.MIN_HANG_GRACE_S,
        le=config_rules.MAX_HANG_GRACE_S,
        allow_inf_nan=False,
        description="Watchdog grace period, seconds: a job process that has not exited this long after its script "
        "ended, or that makes no progress (no CPU time used) this long after another rank's script ended, fails the "
        "job with its host, rank and Python stack. None: 600 on SageMaker, 120 in local_process.",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _refuse_pipeline_variable(cls, value: Any) -> Any:
        # SDK v2's TrainingCompilerConfig(enabled=...) took a PipelineVariable (sent as a Join).
        if hasattr(value, "to_string") and hasattr(value, "expr"):
            name = getattr(value, "name", None) or type(value).__name__
            raise ValueError(
                f"a pipeline variable ({name}): the compiler's settings decide the program the job runs and how it "
                "compiles, so they must be known when the estimator is built; choose the value in Python (one "
                "estimator per choice)"
            )
        return value

    @field_validator("batch_size", mode="before")
    @classmethod
    def _check_batch_size(cls, value: Any) -> Any:
        if (
            value is None
            or value == AUTO_BATCH
            or (isinstance(value, int) and not isinstance(value, bool) and 0 < value <= config_rules.MAX_BATCH)
        ):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            raise ValueError(f"a per-device batch is at most {config_rules.MAX_BATCH} (max_batch_size's ceiling)")
        raise ValueError("accepted: a positive int per-device batch, 'auto', or None for the script's own")

    @field_validator("buckets")
    @classmethod
    def _check_buckets(cls, value: list[int] | str | None) -> list[int] | str | None:
        problem = config_rules.bucket_problem(value) if isinstance(value, list) else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("cache")
    @classmethod
    def _check_cache(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.strip():
            raise ValueError("give a local folder or an s3://bucket/prefix URI, or None for no cache")
        if has_control_character(value):
            raise ValueError(
                "holds a control character (a newline, a tab, NUL...); give a local folder or an s3://bucket/prefix "
                "URI without one"
            )
        if "://" in value:
            scheme, _, rest = value.partition("://")
            if scheme != "s3" or not rest.split("/", 1)[0]:
                raise ValueError("accepted: a local folder or an s3://bucket/prefix URI")
        return value

    @field_validator("cache")
    @classmethod
    def _check_cache_s3_uri(cls, value: str | None) -> str | None:
        # A value meant as an S3 URI ("s3:/b/p", "s3://my bucket/p") would otherwise pass as a local folder.
        if value is not None and looks_like_s3(value):
            problem = s3_uri_problem(value)
            if problem is not None:
                raise ValueError(f"not an s3://bucket/prefix URI: {problem}")
        return value

    @field_validator("batch_size_multiple")
    @classmethod
    def _check_multiple_fits_max(cls, value: int, info: ValidationInfo) -> int:
        maximum = info.data.get("max_batch_size")
        if maximum is not None and value > maximum:
            raise ValueError(
                f"must be at most max_batch_size ({maximum}): batch_size='auto' tries only multiples of it up to "
                "max_batch_size, so it could try no batch"
            )
        return value

    def __init__(self, *positional: Any, **data: Any) -> None:
        if positional:
            raise ConfigError(
                f"TrainingCompilerConfig takes keyword arguments only, got {len(positional)} positional: name "
                "each setting, e.g. TrainingCompilerConfig(enabled=True) or TrainingCompilerConfig(plan='auto')"
            )
        with _as_config_error():
            super().__init__(**data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise ConfigError(
            f"TrainingCompilerConfig is frozen: cannot set {name!r} on a built config; build a new one, e.g. "
            f"TrainingCompilerConfig(**{{**config.model_dump(), {name!r}: ...}})"
        )

    def __delattr__(self, name: str) -> None:
        raise ConfigError(f"TrainingCompilerConfig is frozen: cannot delete {name!r}")

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> TrainingCompilerConfig:
        """pydantic's ``model_validate``, raising :class:`ConfigError` as the constructor does."""
        with _as_config_error():
            return super().model_validate(obj, **kwargs)

    @classmethod
    def model_validate_json(cls, json_data: Any, **kwargs: Any) -> TrainingCompilerConfig:
        """pydantic's ``model_validate_json``, raising :class:`ConfigError` as the constructor does."""
        with _as_config_error():
            return super().model_validate_json(json_data, **kwargs)

    def __bool__(self) -> bool:
        return self.enabled

    @classmethod
    def validate(cls, estimator: Any) -> None:  # type: ignore[override]  # pydantic's deprecated validate(value)
        """SDK v2's ``TrainingCompilerConfig.validate(estimator)``: check a ``sagemaker_tc`` estimator's
        settings against its ``compiler_config`` (the checks it ran when it was built, on its attributes
        as they are now), raising what the estimator raises and warning as SDK v2 did (several hosts
        without ``distribution``, Debugger/Profiler overhead). Returns None.

        Raises:
            ConfigError: ``estimator`` is not a ``sagemaker_tc`` estimator (to build a config from a
                dict, use ``TrainingCompilerConfig(**values)``); see
                ``sagemaker_tc.sdk.compiler_checks.validate`` for the rest.
        """
        check = getattr(estimator, "_validate_compiler", None)
        if not callable(check):
            hint = (
                ": to build a config from a dict, use TrainingCompilerConfig(**values)"
                if isinstance(estimator, dict)
                else ""
            )
            raise ConfigError(
                "TrainingCompilerConfig.validate(estimator) checks a sagemaker_tc HuggingFace or PyTorch estimator, "
                f"got {type(estimator).__module__}.{type(estimator).__qualname__}{hint}"
            )
        check()

    @model_validator(mode="after")
    def _warn_contradictions(self) -> TrainingCompilerConfig:
        config_rules.warn_contradictions(self)  # a field that does nothing with the others: ConfigWarning
        return self

    @property
    def compiles(self) -> bool:
        """True when the job really compiles: enabled and a compiling backend (not ``eager``)."""
        return self.enabled and self.backend != "eager"

    @classmethod
    def from_dict(cls, data: Any) -> TrainingCompilerConfig:
        """Build a config from a decoded JSON object (the wire format's ``config`` entry).

        Raises:
            ConfigError: ``data`` is not an object, or has an unknown field or bad value.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"TrainingCompilerConfig must be a JSON object, got {type(data).__name__}")
        return cls(**data)


# SMTC's own config class, which sagemaker-core still ships (SDK v2's sagemaker.training_compiler.config).
SMTC_CONFIG_CLASSES = (
    ("sagemaker.core.training_compiler_config", "TrainingCompilerConfig"),
    ("sagemaker.training_compiler.config", "TrainingCompilerConfig"),
)


def _is_smtc_config(value: Any) -> bool:
    return any((klass.__module__, klass.__qualname__) in SMTC_CONFIG_CLASSES for klass in type(value).__mro__)


def _from_smtc_config(value: Any, argument: str) -> TrainingCompilerConfig:
    """SMTC's ``TrainingCompilerConfig(enabled, debug)`` as ours, carrying both (logged once).

    Raises:
        ConfigError: ``enabled`` or ``debug`` is not a bool (a pipeline variable among them: whether
            the job compiles must be known when the step is defined).
    """
    fields = {"enabled": getattr(value, "enabled", True), "debug": getattr(value, "debug", False)}
    for name, field in fields.items():
        if not isinstance(field, bool):
            variable = getattr(field, "name", None) if hasattr(field, "to_string") else None
            what = (
                f"a pipeline variable ({variable or type(field).__name__})"
                if hasattr(field, "to_string")
                else f"{field!r}"
            )
            raise ConfigError(
                f"{argument}: SMTC's TrainingCompilerConfig({name}=...) is {what}; sagemaker-tc takes True or False "
                "there: whether the job compiles decides the program the job runs, so it must be known when the "
                "estimator is built (choose the step's estimator with a Python value instead)"
            )
    converted = TrainingCompilerConfig(**fields)
    logger.info(
        "%s: SMTC's %s.TrainingCompilerConfig(enabled=%s, debug=%s) taken as sagemaker_tc.TrainingCompilerConfig(%s)",
        argument,
        type(value).__module__,
        fields["enabled"],
        fields["debug"],
        ", ".join(f"{name}={field}" for name, field in fields.items()),
    )
    return converted


def checked_config(value: Any, *, argument: str = "compiler_config") -> TrainingCompilerConfig | None:
    """``value`` where a config enters the SDK (the estimators, ``ModelTrainer``, ``compile_model``):
    None, or a :class:`TrainingCompilerConfig` that passes its own validators. pydantic's
    ``model_copy(update=...)`` and ``model_construct(...)`` build a config without running them
    (``model_copy(update={"backend": "bogus"})``), so every field is validated again here.

    Args:
        value: the argument as given.
        argument: its name, for the message.

    SMTC's own ``TrainingCompilerConfig(enabled, debug)`` (which sagemaker-core still ships as
    ``sagemaker.core.training_compiler_config``) is taken as ``TrainingCompilerConfig(enabled=...,
    debug=...)``, with a log line.

    Returns:
        ``value`` itself (SMTC's: the config it becomes).

    Raises:
        ConfigError: ``value`` is another type (a dict: build ``TrainingCompilerConfig(**it)``), or
            a field its validators refuse (the message names the field and what is accepted).
    """
    if value is None:
        return None
    if _is_smtc_config(value):
        return _from_smtc_config(value, argument)
    if not isinstance(value, TrainingCompilerConfig):
        hint = f": pass TrainingCompilerConfig(**{argument}) instead of the dict" if isinstance(value, dict) else ""
        raise ConfigError(
            f"{argument} must be a sagemaker_tc.TrainingCompilerConfig, got "
            f"{type(value).__module__}.{type(value).__qualname__}{hint}"
        )
    fields = {name: getattr(value, name) for name in type(value).model_fields}
    try:
        with warnings.catch_warnings():  # its ConfigWarnings were given when it was built
            warnings.simplefilter("ignore", ConfigWarning)
            type(value)(**fields)
    except ConfigError as error:
        raise ConfigError(
            f"{argument} did not pass TrainingCompilerConfig's checks (a config changed with model_copy(update=...) "
            f"or made with model_construct(...) skips them; build it with TrainingCompilerConfig(...)): {error}"
        ) from None
    return value
