"""Batch-size tuning for plain PyTorch loops, and the pieces the Trainer integration shares.

:func:`tune_batch_size` is the one call: it finds (``batch_size="auto"``) or takes (an int) the new
per-device batch, rescales the learning rate and warm-up, logs the ``BATCH SIZE TUNED`` line and
puts the before/after into the job's ``report.json`` (``batch_tuning``). The caller then builds its
DataLoader and optimizer with the returned values.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sagemaker_tc.compiler.ranks import process_group_size, world_size
from sagemaker_tc.config import AUTO_BATCH, TrainingCompilerConfig, checked_config
from sagemaker_tc.errors import BatchSizeSearchError, TuningError
from sagemaker_tc.tuning.decision import TuningDecision, plan_tuning
from sagemaker_tc.tuning.finder import BatchSizeSearch, find_max_batch
from sagemaker_tc.tuning.synthetic import batch_maker, check_supported_head, max_sequence_length

if TYPE_CHECKING:
    import torch

    from sagemaker_tc.compiler.job_report import JobRecord

logger = logging.getLogger(__name__)


def resolve_seq_len(config: TrainingCompilerConfig, model: Any, seq_len: int | None = None) -> int:
    """The sequence length to tune at: ``seq_len``, else ``config.tune_seq_len``, else the largest
    bucket of a bucket list, else the model's maximum length (:func:`.synthetic.max_sequence_length`).

    Raises:
        TuningError: none of these is known (a model with relative positions, e.g. T5: set
            ``tune_seq_len``).
    """
    if seq_len is not None:
        return seq_len
    if config.tune_seq_len is not None:
        return config.tune_seq_len
    if isinstance(config.buckets, list):
        return config.buckets[-1]
    longest = max_sequence_length(model)
    if longest is None:
        raise TuningError(
            f"batch_size='auto' needs a sequence length for {type(model).__name__}, which has no maximum length: "
            "set TrainingCompilerConfig(tune_seq_len=...) to the longest training sequence"
        )
    return longest


def smallest_across_ranks(batch_size: int) -> int:
    """The smallest of every rank's ``batch_size`` (ranks may have found different ones, e.g. on
    devices with different free memory); ``batch_size`` itself without torch.distributed."""
    import torch.distributed as dist

    ranks = process_group_size()
    if ranks == 1:
        return batch_size
    gathered: list[Any] = [None] * ranks
    dist.all_gather_object(gathered, batch_size)
    return min(int(value) for value in gathered)


def search_batch(
    model: torch.nn.Module,
    config: TrainingCompilerConfig,
    *,
    make_batch: Callable[[int], Any] | None = None,
    seq_len: int | None = None,
    compiled: bool | None = None,
    **finder_options: Any,
) -> BatchSizeSearch:
    """:func:`~sagemaker_tc.tuning.finder.find_max_batch` with the config's budget, cap and regions,
    compiled when the config compiles (unless ``compiled`` says otherwise), on synthetic batches
    (:func:`.synthetic.batch_maker`) at :func:`resolve_seq_len` when ``make_batch`` is None, and the
    answer agreed across ranks (the smallest).

    Raises:
        TuningError, BatchSizeSearchError: as :func:`find_max_batch`; TuningError also when no
            sequence length or synthetic batch can be made.
    """
    if make_batch is None:
        check_supported_head(model)
    length = resolve_seq_len(config, model, seq_len) if make_batch is None or seq_len is not None else None
    maker = make_batch or batch_maker(model, length)
    failure: Exception | None = None
    try:
        result = find_max_batch(
            model,
            maker,
            compiled=config.compiles if compiled is None else compiled,
            config=config,
            budget_gib=config.memory_budget_gib,
            max_batch=config.max_batch_size,
            multiple_of=config.batch_size_multiple,
            seq_len=length,
            **finder_options,
        )
    except (TuningError, BatchSizeSearchError, RuntimeError) as error:
        failure = error
    # Every rank takes part in the exchange, a failed one with 0, so no rank waits for another forever.
    agreed = smallest_across_ranks(0 if failure is not None else result.batch_size)
    if failure is not None:
        raise failure
    if agreed == 0:
        raise BatchSizeSearchError("the batch-size search failed on another rank (its log says why)")
    if agreed != result.batch_size:
        logger.info("batch size %d found here; %d is the smallest across ranks and is used", result.batch_size, agreed)
        result.batch_size = agreed
    return result


def tune_batch_size(
    model: torch.nn.Module,
    make_batch: Callable[[int], Any] | None = None,
    *,
    batch_size: int,
    learning_rate: float,
    warmup_steps: float = 0,
    max_steps: int = -1,
    config: TrainingCompilerConfig | None = None,
    num_samples: int | None = None,
    num_epochs: float | None = None,
    gradient_accumulation_steps: int = 1,
    seq_len: int | None = None,
    optimizer_factory: Callable[[Any], Any] | None = None,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> TuningDecision:
    """Pick the per-device batch for a plain PyTorch loop and rescale its learning rate.

    Call it before building the DataLoader and optimizer (and before ``compile_model``), then use
    ``decision.per_device_batch[1]``, ``decision.learning_rate[1]`` and ``decision.warmup_steps[1]``.

    Args:
        model: the model on its training device.
        make_batch: ``make_batch(b)`` -> one batch of ``b`` samples at the longest sequence length
            (dict for ``model(**batch)`` or tuple); default: synthetic batches for Hugging Face
            models (:mod:`.synthetic`).
        batch_size, learning_rate, warmup_steps, max_steps: the loop's current per-device batch,
            learning rate, warm-up steps and step budget (<= 0: by epochs).
        config: the compiler config; default the job's (as :func:`sagemaker_tc.compile_model`).
            Its ``batch_size`` is the target (``"auto"`` when it is None: calling this function is
            the opt-in), ``lr_scaling`` the rule, ``memory_budget_gib``/``max_batch_size``/
            ``tune_seq_len`` the search's bounds.
        num_samples, num_epochs: training-set size and epochs, for steps per epoch before/after in
            the report (optional).
        gradient_accumulation_steps: micro-batches per optimizer step.
        seq_len, optimizer_factory, loss_fn, autocast_dtype: passed to the finder.

    Returns:
        The :class:`~sagemaker_tc.tuning.decision.TuningDecision`, also recorded for the report.

    Raises:
        TuningError: bad arguments (before any try). BatchSizeSearchError: no batch fits.
        ConfigError: ``config`` is not a :class:`~sagemaker_tc.config.TrainingCompilerConfig` (a dict,
            say) or does not pass its checks (before any session is opened).
    """
    from sagemaker_tc.compiler.session import session_for

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise TuningError(
            f"batch_size (the loop's current per-device batch) must be a positive int (got {batch_size!r})"
        )
    config = checked_config(config, argument="config")  # SMTC's config becomes ours
    session = session_for(config)
    config = config or session.config
    target = config.batch_size if config.batch_size is not None else AUTO_BATCH
    search = None
    if target == AUTO_BATCH:
        found = search_batch(
            model,
            config,
            make_batch=make_batch,
            seq_len=seq_len,
            start=batch_size,
            optimizer_factory=optimizer_factory,
            loss_fn=loss_fn,
            autocast_dtype=autocast_dtype,
        )
        new_batch, search = found.batch_size, found.to_dict()
    else:
        new_batch = int(target)
    decision = plan_tuning(
        requested=target,
        new_batch=new_batch,
        old_batch=batch_size,
        learning_rate=learning_rate,
        lr_scaling=config.lr_scaling,
        warmup_steps=warmup_steps,
        max_steps=max_steps,
        world_size=world_size(),
        gradient_accumulation_steps=gradient_accumulation_steps,
        search=search,
    )
    if num_samples is not None:
        decision.describe_schedule(num_samples, num_epochs, optimizer_steps_after=None)
        steps = decision.schedule.get("steps_per_epoch")
        if max_steps > 0:
            decision.schedule["optimizer_steps"]["after"] = decision.max_steps[1]
        elif steps and num_epochs is not None:
            decision.schedule["optimizer_steps"]["after"] = math.ceil(num_epochs * steps["after"])
    record(session.record, decision)
    return decision


def record(job: JobRecord, decision: TuningDecision, *, log: bool = True) -> None:
    """Keep the decision as ``job.batch_tuning`` (the session's record, for the report) and log its
    ``BATCH SIZE TUNED`` line (unless ``log`` is False: an update of a decision already logged)."""
    job.batch_tuning = decision
    if log:
        logger.info("%s", decision.log_line())
