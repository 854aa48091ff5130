"""``sagemaker-tc verify``: does the compiled model train like the eager one?

Two copies of the same model (same weights, dropout off, fp32) train on the same batches with the
same optimizer for N steps: one eager, one compiled in place by ``sagemaker_tc.compile_model`` under
one compile plan (``regional``, ``model`` or ``step``: :func:`verify_plans` runs each). Every step's
loss must agree within a relative tolerance (default 1e-4):
``|loss_compiled - loss_eager| / |loss_eager| <= rtol``, and after the last step every parameter
within an absolute tolerance (default 1e-5). Dropout is off because eager and
Inductor draw different random numbers (``shared/design/ARCHITECTURE.md``, compiler facts).

Three entry points: :func:`verify_training` (any model and batches), :func:`verify_suite_model`
(a suite model on real SST-2 batches) and :func:`verify_script` (``path/to/file.py:function``).
Imports torch lazily.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler.loss import compute_loss
from sagemaker_tc_bench.errors import BenchError, ModelNotDeterministicError, NumericalMismatchError
from sagemaker_tc_bench.training import parameter_difference, train_losses

if TYPE_CHECKING:
    import torch

    from sagemaker_tc.config import TrainingCompilerConfig

logger = logging.getLogger(__name__)

DEFAULT_STEPS = 20
DEFAULT_RTOL = 1e-4
DEFAULT_PARAM_ATOL = 1e-5
DEFAULT_LR = 1e-4
PLANS = ("regional", "model", "step")
LossFn = Callable[[Any, Any], Any]
"""``loss_fn(model, batch) -> scalar tensor``: runs the forward pass and returns the loss."""


@dataclass
class VerifyResult:
    """The outcome of one verification.

    Attributes:
        name: what was verified (suite model name or script spec).
        steps: optimizer steps per side.
        rtol: the relative tolerance.
        eager_losses: per-step loss of the eager copy (``steps`` floats).
        compiled_losses: per-step loss of the compiled copy.
        rel_diffs: per-step ``|compiled - eager| / |eager|`` (absolute difference when eager is 0).
        max_rel_diff: the largest of ``rel_diffs``.
        worst_step: the step (0-based) with ``max_rel_diff``.
        passed: ``max_rel_diff <= rtol``.
        compiled_regions: modules ``compile_model`` compiled (0 means nothing was compiled).
        new_graphs: graphs dynamo compiled during the compiled side's training (0 when this
            process had compiled the same code before and reused it).
        dropout_modules_zeroed: ``nn.Dropout`` modules whose ``p`` verify set to 0.
        eager_seconds: wall time of the eager side's steps, s.
        compiled_seconds: wall time of the compiled side's steps including compilation, s.
        config: the ``TrainingCompilerConfig`` used, as a dict.
        plan: the compile plan the compiled side ran.
        max_param_diff: the largest absolute difference of a parameter element after the last step,
            over the elements that got a gradient (:data:`NO_GRADIENT_FRACTION`).
        param_atol: the accepted ``max_param_diff``.
        elements_without_gradient: parameter elements left out of ``max_param_diff``.
    """

    name: str
    steps: int
    rtol: float
    eager_losses: list[float]
    compiled_losses: list[float]
    rel_diffs: list[float]
    max_rel_diff: float
    worst_step: int
    passed: bool
    compiled_regions: int
    new_graphs: int
    dropout_modules_zeroed: int
    eager_seconds: float
    compiled_seconds: float
    config: dict[str, Any] = field(default_factory=dict)
    plan: str | None = None
    max_param_diff: float = 0.0
    param_atol: float = DEFAULT_PARAM_ATOL
    elements_without_gradient: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


def disable_dropout(model: torch.nn.Module) -> int:
    """Set ``p = 0`` on every ``torch.nn`` dropout module of ``model`` (Hugging Face attention reads
    its dropout probability from those modules or from the config). Returns how many were changed."""
    import torch

    kinds = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout)
    changed = 0
    for module in model.modules():
        if isinstance(module, kinds) and module.p != 0:
            module.p = 0.0
            changed += 1
    return changed


def _relative(compiled: float, eager: float) -> float:
    difference = abs(compiled - eager)
    return difference / abs(eager) if eager != 0 else difference


def _check_deterministic(model: torch.nn.Module, batch: Any, loss_fn: LossFn, rtol: float) -> None:
    import torch

    with torch.no_grad():
        first, second = float(loss_fn(model, batch)), float(loss_fn(model, batch))
    # Much tighter than rtol, loose enough for kernel-level float noise on GPUs.
    if _relative(second, first) > rtol / 100:
        raise ModelNotDeterministicError(
            f"two eager forward passes of the same batch gave losses {first!r} and {second!r}: the model has "
            "randomness verify cannot turn off (functional dropout, sampling); make it deterministic in train mode"
        )


def verify_config(**fields: Any) -> TrainingCompilerConfig:
    """The compile config verify uses by default: ``TrainingCompilerConfig(**fields)`` compiling from
    the first step, with ``policy="strict"`` (a compiler failure must fail the check, not fall back
    to eager and pass trivially) and ``plan="regional"`` unless ``fields`` name the plan.

    Raises:
        ConfigError: a field or value the installed config does not accept.
    """
    from sagemaker_tc_bench.variants import sagemaker_tc_config

    fields.setdefault("policy", "strict")
    if "regional" not in fields:
        fields.setdefault("plan", "regional")  # verify compares one plan; plan="auto" could keep eager
    return sagemaker_tc_config(**fields)


def verify_training(
    model: torch.nn.Module,
    batches: Sequence[Any],
    *,
    loss_fn: LossFn | None = None,
    steps: int = DEFAULT_STEPS,
    rtol: float = DEFAULT_RTOL,
    lr: float = DEFAULT_LR,
    seed: int = 0,
    config: TrainingCompilerConfig | None = None,
    name: str = "model",
    raise_on_mismatch: bool = True,
    param_atol: float = DEFAULT_PARAM_ATOL,
) -> VerifyResult:
    """Train an eager copy and a compiled copy of ``model``; compare their per-step losses and their
    parameters after the last step.

    ``model`` itself is left untouched: both sides are ``copy.deepcopy`` copies, put in training
    mode with every dropout module's ``p`` set to 0; the compiled copy goes through
    ``sagemaker_tc.compile_model(copy, config=config)``. Both train with AdamW(``lr``) on the same
    ``batches`` (cycled; tensors must already be on the model's device), after ``torch.manual_seed(seed)``.

    Args:
        model: any ``torch.nn.Module`` (fp32).
        batches: one or more batches (a one-batch list repeats that batch every step).
        loss_fn: ``loss_fn(model, batch) -> scalar loss``; default
            :func:`sagemaker_tc.compiler.loss.compute_loss`.
        steps: optimizer steps per side (>= 1).
        rtol: largest accepted relative loss difference (>= 0).
        lr: AdamW learning rate.
        seed: torch seed set before each side trains.
        config: the compile config (default :func:`verify_config`: Inductor, regional, from the first step).
        name: what to call the model in messages and the result.
        raise_on_mismatch: raise on a mismatch (True) or just return the failed result.
        param_atol: largest accepted absolute difference of any parameter after the last step.

    Returns:
        A :class:`VerifyResult`.

    Raises:
        BenchError: ``steps`` < 1, ``rtol`` < 0, no batches, or no loss in the model's output.
        ModelNotDeterministicError: the eager model is not deterministic in train mode.
        NumericalMismatchError: some step's losses differ by more than ``rtol``, or a parameter by
            more than ``param_atol`` (its ``result`` holds both curves).
    """
    import torch

    from sagemaker_tc.compiler.dynamo import dynamo_stats
    from sagemaker_tc_bench.variants import compiled_regions

    _check_arguments(steps, rtol, batches)
    loss_fn = loss_fn or compute_loss
    config = config or verify_config()
    eager, compiled, zeroed = _two_sides(model, batches[0], loss_fn, rtol)
    torch.manual_seed(seed)
    peaks: list[torch.Tensor] = []
    eager_losses, eager_seconds = train_losses(
        eager, batches, steps=steps, lr=lr, loss_fn=loss_fn, gradient_peaks=peaks
    )
    with _compiled(compiled, config) as regions:
        graphs_before = dynamo_stats().graphs
        torch.manual_seed(seed)
        compiled_losses, compiled_seconds = train_losses(compiled, batches, steps=steps, lr=lr, loss_fn=loss_fn)
        regions.append(compiled_regions(compiled))
    param_diff, left_out = parameter_difference(compiled, eager, peaks)
    diffs = [_relative(c, e) for c, e in zip(compiled_losses, eager_losses, strict=True)]
    worst = max(range(steps), key=diffs.__getitem__)
    result = VerifyResult(
        name=name,
        steps=steps,
        rtol=rtol,
        eager_losses=eager_losses,
        compiled_losses=compiled_losses,
        rel_diffs=diffs,
        max_rel_diff=diffs[worst],
        worst_step=worst,
        passed=diffs[worst] <= rtol and param_diff <= param_atol,
        compiled_regions=regions[0],
        new_graphs=dynamo_stats().graphs - graphs_before,
        dropout_modules_zeroed=zeroed,
        eager_seconds=eager_seconds,
        compiled_seconds=compiled_seconds,
        config=config.model_dump(),
        plan=config.plan,
        max_param_diff=param_diff,
        param_atol=param_atol,
        elements_without_gradient=left_out,
    )
    if result.compiled_regions == 0 and config.compiles:
        logger.warning("verify %s: compile_model compiled nothing, so the comparison proves nothing", name)
    logger.info("verify %s: max relative loss difference %.3g (step %d), rtol %.3g", name, diffs[worst], worst, rtol)
    if not result.passed and raise_on_mismatch:
        raise _mismatch(result)
    return result


def _check_arguments(steps: int, rtol: float, batches: Sequence[Any]) -> None:
    if steps < 1:
        raise BenchError(f"steps must be >= 1 (got {steps})")
    if rtol < 0:
        raise BenchError(f"rtol must be >= 0 (got {rtol})")
    if not batches:
        raise BenchError("verify needs at least one batch")


def _two_sides(model: Any, batch: Any, loss_fn: LossFn, rtol: float) -> tuple[Any, Any, int]:
    """Two copies of ``model`` in training mode with dropout off, the same weights, checked to be
    deterministic; returns ``(eager, compiled, dropout modules zeroed per copy)``."""
    eager, compiled = copy.deepcopy(model), copy.deepcopy(model)
    zeroed = 0
    for side in (eager, compiled):
        side.train()
        zeroed = disable_dropout(side)
    _check_deterministic(eager, batch, loss_fn, rtol)
    eager.load_state_dict(compiled.state_dict())  # undo any buffer update (e.g. BatchNorm) of the check
    return eager, compiled, zeroed


def _mismatch(result: VerifyResult) -> NumericalMismatchError:
    """The error for a failed result: the worst loss step, else the parameters."""
    worst, name = result.worst_step, result.name
    if result.max_rel_diff > result.rtol:
        return NumericalMismatchError(
            f"{name}: compiled and eager training disagree at step {worst}: loss {result.compiled_losses[worst]!r} "
            f"(compiled) vs {result.eager_losses[worst]!r} (eager), relative difference {result.max_rel_diff:.3g} "
            f"> rtol {result.rtol:g}",
            result,
        )
    return NumericalMismatchError(
        f"{name}: after {result.steps} steps a parameter differs by {result.max_param_diff:.3g} between compiled and "
        f"eager training (> param_atol {result.param_atol:g}), though every loss agreed",
        result,
    )


@contextlib.contextmanager
def _compiled(model: torch.nn.Module, config: TrainingCompilerConfig) -> Iterator[list[int]]:
    """``compile_model(model, config)`` in a compiler session of its own (one plan per session; the
    process's own session, when one is open, is used as it is), closed after the block.

    With a session of its own, dynamo starts empty (``torch.compiler.reset()``): code an earlier
    verify compiled for the same model class would otherwise be reused, and the result would show
    no new graphs for a model that did compile.
    """
    import torch

    from sagemaker_tc import compile_model
    from sagemaker_tc.compiler.session import CompilerSession, current_session

    own = None
    if current_session() is None:
        torch.compiler.reset()
        own = CompilerSession(config).open()
    try:
        compile_model(model, config=config)
        yield []
    finally:
        if own is not None:
            own.close()


def verify_plans(model: torch.nn.Module, batches: Sequence[Any], plans: Sequence[str] = PLANS, **kwargs: Any):
    """:func:`verify_training` once per compile plan (``plans``; default all three), each with
    :func:`verify_config`'s other settings; returns the results in order.

    Raises:
        NumericalMismatchError: a plan's losses or parameters disagree (the first that does).
    """
    config = kwargs.pop("config", None)
    fields = config.model_dump() if config is not None else {}
    fields.pop("regional", None)
    return [
        verify_training(model, batches, config=verify_config(**{**fields, "plan": plan}), **kwargs) for plan in plans
    ]


def verify_suite_model(
    name: str,
    size: str = "tiny",
    *,
    batch_size: int = 4,
    seq_len: int = 32,
    device: str = "cpu",
    data: str | Path | None = None,
    **kwargs: Any,
) -> VerifyResult:
    """:func:`verify_training` on suite model ``name`` (dropout off, random weights from ``seed``)
    with real SST-2 batches of ``batch_size`` x ``seq_len`` tokens (a new batch each step, cycling
    over up to 4).

    Raises:
        BenchError: unknown model or size, ``seq_len`` beyond the model's positions, ``batch_size`` < 1,
            a device other than cpu/cuda or cuda without a GPU; and what :func:`verify_training` raises.
    """
    import torch

    from sagemaker_tc_bench.data import tokenize_sst2
    from sagemaker_tc_bench.options import check_batch_size
    from sagemaker_tc_bench.suite import build_model, check_seq_len, check_size, get_spec, make_batches

    spec = get_spec(name)
    check_size(size)
    check_seq_len(spec, seq_len)
    check_batch_size("batch_size", batch_size)
    if device not in ("cpu", "cuda"):
        raise BenchError(f"unknown device {device!r}; accepted: cpu, cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise BenchError("device 'cuda' asked for, but torch sees no CUDA GPU; accepted here: cpu")
    steps = kwargs.get("steps", DEFAULT_STEPS)
    tokens = tokenize_sst2(batch_size * max(1, min(steps, 4)), seq_len, Path(data) if data else None)
    torch.manual_seed(kwargs.get("seed", 0))
    model = build_model(name, size, dropout=False).to(device)
    batches = make_batches(model, name, tokens, batch_size, device)
    return verify_training(model, batches, name=f"{name} ({size})", **kwargs)
