"""The bench variants: how each one builds its model and optimizer. Imports torch lazily.

- ``eager``: what a plain PyTorch loop does by default: the model as ``transformers`` builds it
  (default attention; SDPA for every suite model in transformers 5.x) and
  ``torch.optim.AdamW(model.parameters(), lr=...)`` with torch's defaults (foreach on CUDA,
  the per-parameter loop on CPU).
- ``eager-tuned``: eager plus the two switches a careful user flips: SDPA attention asked for
  explicitly, and ``AdamW(fused=True)`` where torch has a fused kernel for the device (CUDA, CPU
  since torch 2.4; else foreach, recorded).
- ``sagemaker-tc``: eager-tuned, then ``sagemaker_tc.compile_model(model, config=TrainingCompilerConfig(
  expected_steps=N))``: the default config, so ``plan="auto"`` measures eager and the plans that can
  pay off in a job of N steps (:data:`DEFAULT_JOB_STEPS`) and keeps one; the worker times the steps
  after that decision.
- ``sagemaker-tc-regional``, ``-model``, ``-step``: eager-tuned compiled by one plan from the first
  step (:func:`sagemaker_tc_config`).
- ``hf-torch-compile``: what ``Trainer(args=TrainingArguments(torch_compile=True))`` does. transformers
  (``TrainingArguments.__post_init__``, "Torch Compile" section) sets ``torch_compile_backend="inductor"``;
  ``Trainer.create_accelerator_and_postprocess`` builds ``TorchDynamoPlugin(backend="inductor",
  mode=None, dynamic=None)`` (``transformers/trainer.py``), whose ``to_kwargs()`` keeps only the fields
  that differ from a default plugin, i.e. ``{"backend": "inductor"}``
  (``accelerate/utils/dataclasses.py``, ``KwargsHandler.to_kwargs`` / ``TorchDynamoPlugin.to_kwargs``);
  ``use_regional_compilation`` stays False, so ``Accelerator.prepare_model`` runs
  ``model = torch.compile(model, **kwargs)`` on the WHOLE model (``accelerate/accelerator.py``,
  ``prepare_model``, "torch.compile should be called last"). Read in transformers 5.24 and
  accelerate 1.15. Trainer's default optimizer on torch >= 2.8 is ``adamw_torch_fused``
  (``TrainingArguments.default_optim``), i.e. ``AdamW(fused=True)``, used here too.
- ``hf-torch-compile-reduce-overhead``: the peer with ``TrainingArguments(torch_compile_mode=
  "reduce-overhead")``: the plugin's ``mode`` then differs from the default, so ``to_kwargs()`` adds it and
  accelerate runs ``torch.compile(model, backend="inductor", mode="reduce-overhead")`` (CUDA graphs
  through Inductor's cudagraph trees; on a CPU the mode records no graph, which ``details`` says).

A name may end in ``@N`` (N >= 2): the same variant run again as its own row (its own process and
empty compile cache), e.g. the headline pair in ABBA order, ``hf-torch-compile sagemaker-tc-step
sagemaker-tc-step@2 hf-torch-compile@2`` (:func:`base_variant`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

VARIANTS: tuple[str, ...] = ("eager", "eager-tuned", "sagemaker-tc", "hf-torch-compile")
"""The variants a bench runs by default."""
PEER_REDUCE_OVERHEAD = "hf-torch-compile-reduce-overhead"
"""What ``TrainingArguments(torch_compile=True, torch_compile_mode="reduce-overhead")`` does: the
strongest one-flag peer (module docstring)."""
PLAN_VARIANTS: tuple[str, ...] = ("sagemaker-tc-regional", "sagemaker-tc-model", "sagemaker-tc-step")
"""One compile plan each, from the first step (``--variants`` names them)."""
ALL_VARIANTS: tuple[str, ...] = VARIANTS + PLAN_VARIANTS + (PEER_REDUCE_OVERHEAD,)
BASELINE = "eager"
UNCOMPILED_SAME_SETTINGS = "eager-tuned"
"""The uncompiled row with the compiled variants' settings (SDPA, fused AdamW): what ``speedup vs
uncompiled`` divides by, so that no optimizer or attention gain is counted as the compiler's."""
PEER = "hf-torch-compile"
"""What ``TrainingArguments(torch_compile=True)`` does: the variant ours is compared with."""
DEFAULT_JOB_STEPS = 10_000
"""The job length the ``sagemaker-tc`` variant tells ``plan="auto"`` (a fine-tuning job's order of
magnitude: the bench itself times only a few steps)."""
LEARNING_RATE = 5e-5
"""Transformers ``TrainingArguments.learning_rate``'s default; it does not change step time."""


@dataclass
class PreparedVariant:
    """A variant's model, ready to train, and what it is made of.

    Attributes:
        model: the module to call (for ``hf-torch-compile``, the ``OptimizedModule`` wrapper).
        optimizer: the AdamW optimizer over the model's parameters.
        details: what was chosen (attention implementation, optimizer implementation, compile
            call), for the result file.
    """

    model: Any
    optimizer: Any
    details: dict[str, Any]


def _adamw(params: Any, *, fused: bool) -> tuple[torch.optim.Optimizer, str]:
    """AdamW with torch's defaults, or fused when asked and the device has a fused kernel."""
    import torch

    params = list(params)
    if not fused:
        return torch.optim.AdamW(params, lr=LEARNING_RATE), "default"
    try:
        return torch.optim.AdamW(params, lr=LEARNING_RATE, fused=True), "fused"
    except RuntimeError:
        # No fused kernel for this device/dtype: torch's next best multi-tensor implementation.
        return torch.optim.AdamW(params, lr=LEARNING_RATE, foreach=True), "foreach (fused unsupported)"


def sagemaker_tc_config(**fields: Any) -> Any:
    """``TrainingCompilerConfig(**fields)`` that compiles from the very first optimizer step.

    The runtime's default runs 3 eager baseline steps before compiling (``baseline_steps``);
    ``baseline_steps`` defaults to 0 here so a compiled run's first step is its compilation and every
    later step is compiled (as in ``hf-torch-compile``). Fields passed in ``fields`` win.

    Raises:
        ConfigError: a field or value the installed config does not accept.
    """
    from sagemaker_tc.config import TrainingCompilerConfig

    fields.setdefault("baseline_steps", 0)
    return TrainingCompilerConfig(**fields)


def compiled_regions(model: torch.nn.Module) -> int:
    """How many modules carry an in-place ``Module.compile()`` (0 for an uncompiled model)."""
    from sagemaker_tc import _internals

    return sum(1 for m in model.modules() if _internals.compiled_call(m) is not None)


def base_variant(variant: str) -> str:
    """The variant a row name runs: ``variant`` without its repeat suffix ``@N`` (module docstring)."""
    name, _, repeat = variant.partition("@")
    return name if repeat.isdigit() and int(repeat) >= 2 else variant


def repeat_suffix(variant: str) -> str:
    """A row name's repeat suffix (``"@2"``), or ``""`` for a first run."""
    return variant[len(base_variant(variant)) :]


def check_variant(variant: str) -> str:
    """Return ``variant`` if it is one of :data:`ALL_VARIANTS`, alone or with a repeat suffix ``@N``
    (N >= 2: the same variant run again as its own row).

    Raises:
        BenchError: any other name (the message lists the accepted ones).
    """
    from sagemaker_tc_bench.errors import BenchError

    if base_variant(variant) not in ALL_VARIANTS:
        raise BenchError(
            f"unknown variant {variant!r}; accepted: {', '.join(ALL_VARIANTS)}, each optionally with a "
            "repeat suffix @N (N >= 2) to run it again as its own row"
        )
    return variant


def build(variant: str, name: str, size: str, device: torch.device) -> torch.nn.Module:
    """Build suite model ``name`` at ``size`` on ``device`` with the attention ``variant`` asks for
    (uncompiled, in training mode). Seed torch first for identical weights across variants.

    The weights are made on ``device`` itself (its random generator): a 1.2B-parameter model's random
    init takes tens of seconds on a host CPU and milliseconds on a GPU.

    Raises:
        BenchError: unknown variant, model or size.
    """
    import torch

    from sagemaker_tc_bench.suite import build_model

    variant = base_variant(check_variant(variant))
    tuned = variant == "eager-tuned" or variant.startswith("sagemaker-tc")
    with torch.device(device):
        model = build_model(name, size, attn_implementation="sdpa" if tuned else None)
    return model.to(device)


def finish(variant: str, model: torch.nn.Module, job_steps: int = DEFAULT_JOB_STEPS) -> PreparedVariant:
    """Give a :func:`build` model its optimizer and compile it as ``variant`` prescribes (see the
    module docstring).

    Raises:
        BenchError: unknown variant.
    """
    import torch

    from sagemaker_tc import _hf_internals

    variant = base_variant(check_variant(variant))
    optimizer, optimizer_kind = _adamw(model.parameters(), fused=variant != "eager")
    details: dict[str, Any] = {
        "attn_implementation": _hf_internals.attention_implementation(model),
        "optimizer": f"AdamW ({optimizer_kind})",
        "compile": None,
        "compiled_regions": 0,
    }
    if variant.startswith("sagemaker-tc"):
        from sagemaker_tc import compile_model
        from sagemaker_tc.config import TrainingCompilerConfig

        if variant == "sagemaker-tc":  # the default config; the job's length for plan="auto"
            config = TrainingCompilerConfig(expected_steps=job_steps)
        else:
            config = sagemaker_tc_config(plan=variant.removeprefix("sagemaker-tc-"))
        compile_model(model, config=config)
        details["compile"] = f"sagemaker_tc.compile_model(model, config={config!r})"
        details["compiled_regions"] = compiled_regions(model)
    elif variant == "hf-torch-compile":
        details["compile"] = 'torch.compile(model, backend="inductor")'
        details["compiled_regions"] = 1
        model = torch.compile(model, backend="inductor")
    elif variant == PEER_REDUCE_OVERHEAD:
        details["compile"] = 'torch.compile(model, backend="inductor", mode="reduce-overhead")'
        details["compiled_regions"] = 1
        if next(model.parameters()).device.type != "cuda":
            details["cuda_graphs"] = "none: reduce-overhead records CUDA graphs only on a CUDA device"
        model = torch.compile(model, backend="inductor", mode="reduce-overhead")
    return PreparedVariant(model=model, optimizer=optimizer, details=details)
