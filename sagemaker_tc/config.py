"""``TrainingCompilerConfig``: the one object a user adds to an estimator to turn the compiler on.

Imports only pydantic and the standard library, so the SDK side never needs torch.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagemaker_tc.errors import ConfigError

Backend = Literal["inductor", "eager"]
"""Compiler backends. ``inductor`` is torch.compile's default; ``eager`` runs uncompiled (a baseline).
``xla`` (torch_xla on PJRT devices) is planned and not accepted yet."""

Mode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
"""torch.compile's ``mode`` values (torch 2.x)."""


def _describe_validation_error(error: ValidationError) -> str:
    """Turn pydantic's error list into one line per problem: field, what was wrong, what is accepted."""
    lines = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "<config>"
        if item["type"] == "extra_forbidden":
            accepted = ", ".join(TrainingCompilerConfig.model_fields)
            lines.append(f"unknown field {field!r} (accepted fields: {accepted})")
        else:
            lines.append(f"{field}: {item['msg']} (got {item.get('input')!r})")
    return "; ".join(lines)


class TrainingCompilerConfig(BaseModel):
    """Turns the training compiler on for an estimator's job, as SMTC's class of the same name did.

    ``HuggingFace(..., compiler_config=TrainingCompilerConfig())`` compiles a Hugging Face
    ``Trainer`` script with no change to the script; a plain PyTorch loop calls
    ``sagemaker_tc.compile_model(model)`` once.

    Unlike SMTC, a disabled config is falsy: ``bool(TrainingCompilerConfig(enabled=False))`` is
    ``False`` and the job runs as a plain script-mode job.

    Raises:
        ConfigError: an unknown field, a value outside the accepted set, or a wrong type. The
            message names the field and what is accepted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    enabled: bool = Field(default=True, description="Compile the training step. False runs the job uncompiled.")
    debug: bool = Field(
        default=False,
        description="Debug mode: write compiler logs and artifacts to $SM_OUTPUT_DATA_DIR/compiler/ (slower).",
    )
    backend: Backend = Field(default="inductor", description="torch.compile backend; 'eager' is a no-compile baseline.")
    mode: Mode = Field(default="default", description="torch.compile mode.")
    regional: bool = Field(
        default=True,
        description="Regional compilation: compile each repeated block (e.g. each transformer layer) once "
        "instead of the whole model; cuts compile time at about the same step time.",
    )
    dynamic: bool | None = Field(
        default=None,
        description="torch.compile's dynamic: None lets dynamo mark changing dims dynamic after the first "
        "recompile; True compiles dynamic shapes from the start; False always specializes.",
    )
    fullgraph: bool = Field(default=False, description="Raise on any graph break instead of splitting the graph.")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise ConfigError(f"Invalid TrainingCompilerConfig: {_describe_validation_error(error)}") from None

    def __bool__(self) -> bool:
        return self.enabled

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
