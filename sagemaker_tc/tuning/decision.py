"""Co-tuning batch size and learning rate, reported honestly.

:func:`plan_tuning` turns the old training setup (per-device batch, learning rate, warm-up,
``max_steps``, data-parallel world size, gradient accumulation) and a new per-device batch into a
:class:`TuningDecision`: the new learning rate by the config's ``lr_scaling`` rule, warm-up steps
and ``max_steps`` rescaled to cover the same number of samples (:mod:`.scaling`), and the effective
global batch before and after. Its :meth:`~TuningDecision.to_dict` is the report's
``batch_tuning`` entry; :meth:`~TuningDecision.log_line` is the ``BATCH SIZE TUNED`` log line.
Steps per epoch and the learning-rate schedule before/after are added when the number of
training samples is known (:meth:`~TuningDecision.describe_schedule`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from sagemaker_tc.tuning.memory import format_bytes
from sagemaker_tc.tuning.scaling import (
    scale_learning_rate,
    scale_max_steps,
    scale_warmup_steps,
    steps_per_epoch,
)

logger = logging.getLogger(__name__)
LOG_PREFIX = "BATCH SIZE TUNED"


@dataclass
class TuningDecision:
    """Before and after of one batch-size change.

    Attributes:
        requested: the config's ``batch_size`` (``"auto"`` or an int).
        lr_scaling: the rule applied (``linear``, ``sqrt``, ``none``).
        per_device_batch, learning_rate, warmup_steps, max_steps: ``(before, after)`` pairs;
            warm-up in steps (or a fraction of training when < 1, kept as is); ``max_steps`` <= 0
            means "train by epochs" (kept).
        world_size: data-parallel processes; gradient_accumulation_steps: micro-batches per step.
        search: the finder's :meth:`~sagemaker_tc.tuning.finder.BatchSizeSearch.to_dict` for
            ``"auto"``, else None.
        schedule: steps per epoch and optimizer steps before/after, once known.
        applied: False when the change could not be applied (``note`` says why).
    """

    requested: int | str
    lr_scaling: str
    per_device_batch: tuple[int, int]
    learning_rate: tuple[float, float]
    warmup_steps: tuple[float, float]
    max_steps: tuple[int, int]
    world_size: int = 1
    gradient_accumulation_steps: int = 1
    search: dict[str, Any] | None = None
    schedule: dict[str, Any] = field(default_factory=dict)
    applied: bool = True
    note: str | None = None

    @property
    def global_batch(self) -> tuple[int, int]:
        """Samples per optimizer step, before and after: per-device x accumulation x world size."""
        factor = self.world_size * self.gradient_accumulation_steps
        return self.per_device_batch[0] * factor, self.per_device_batch[1] * factor

    def describe_schedule(
        self,
        num_samples: int | None,
        num_train_epochs: float | None = None,
        scheduler: str | None = None,
        optimizer_steps_after: int | None = None,
        learning_rate_applied: float | None = None,
    ) -> dict[str, Any]:
        """Fill :attr:`schedule` with steps per epoch (when ``num_samples`` is known), optimizer
        steps (``max_steps`` when set, else epochs x steps per epoch), the scheduler's name and the
        learning rate the optimizer really starts from; return it."""
        schedule: dict[str, Any] = {"scheduler": scheduler, "learning_rate_applied": learning_rate_applied}
        if num_samples is not None:
            before, after = (
                steps_per_epoch(num_samples, batch, self.world_size, self.gradient_accumulation_steps)
                for batch in self.per_device_batch
            )
            schedule["num_samples"] = num_samples
            schedule["steps_per_epoch"] = {"before": before, "after": after}
            if self.max_steps[0] > 0:
                total_before = self.max_steps[0]
            elif num_train_epochs is not None:
                total_before = math.ceil(num_train_epochs * before)
            else:
                total_before = None
            schedule["optimizer_steps"] = {"before": total_before, "after": optimizer_steps_after}
        self.schedule = schedule
        return schedule

    def to_dict(self) -> dict[str, Any]:
        """The report's ``batch_tuning`` entry (JSON-ready)."""

        def pair(values: tuple) -> dict[str, Any]:
            return {"before": values[0], "after": values[1]}

        return {
            "requested": self.requested,
            "applied": self.applied,
            "note": self.note,
            "lr_scaling": self.lr_scaling,
            "per_device_batch": pair(self.per_device_batch),
            "global_batch": pair(self.global_batch),
            "world_size": self.world_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "learning_rate": pair(self.learning_rate),
            "warmup_steps": pair(self.warmup_steps),
            "max_steps": pair(self.max_steps),
            "schedule": self.schedule,
            "search": self.search,
        }

    def log_line(self) -> str:
        """One line for the job log: ``BATCH SIZE TUNED: per-device batch 8 -> 182 (...); global
        batch ...; learning rate ... (rule); warm-up steps ...; max_steps ...``."""
        how = "as configured"
        if self.search is not None:
            how = (
                f"largest that fits: {'compiled' if self.search['compiled'] else 'eager'}, seq_len "
                f"{self.search['seq_len']}, budget {format_bytes(self.search['budget_bytes'])}, "
                f"{self.search['tries']} tries in {self.search['search_seconds']:.1f} s"
            )
        parts = [
            f"per-device batch {self.per_device_batch[0]} -> {self.per_device_batch[1]} ({how})",
            f"global batch {self.global_batch[0]} -> {self.global_batch[1]}",
            f"learning rate {self.learning_rate[0]:.6g} -> {self.learning_rate[1]:.6g} ({self.lr_scaling})",
            f"warm-up steps {self.warmup_steps[0]:g} -> {self.warmup_steps[1]:g}",
        ]
        if self.max_steps[0] > 0:
            parts.append(f"max_steps {self.max_steps[0]} -> {self.max_steps[1]}")
        return f"{LOG_PREFIX}: " + "; ".join(parts)


def plan_tuning(
    *,
    requested: int | str,
    new_batch: int,
    old_batch: int,
    learning_rate: float,
    lr_scaling: str,
    warmup_steps: float = 0,
    max_steps: int = -1,
    world_size: int = 1,
    gradient_accumulation_steps: int = 1,
    search: dict[str, Any] | None = None,
) -> TuningDecision:
    """The decision for moving from per-device ``old_batch`` to ``new_batch``.

    The learning rate is scaled by the global-batch ratio, which equals the per-device ratio since
    world size and accumulation do not change.

    Raises:
        TuningError: a non-positive batch or learning rate, or an unknown rule (from :mod:`.scaling`).
    """
    old_global = old_batch * world_size * gradient_accumulation_steps
    new_global = new_batch * world_size * gradient_accumulation_steps
    return TuningDecision(
        requested=requested,
        lr_scaling=lr_scaling,
        per_device_batch=(old_batch, new_batch),
        learning_rate=(learning_rate, scale_learning_rate(learning_rate, old_global, new_global, lr_scaling)),
        warmup_steps=(warmup_steps, scale_warmup_steps(warmup_steps, old_global, new_global)),
        max_steps=(max_steps, scale_max_steps(max_steps, old_global, new_global)),
        world_size=world_size,
        gradient_accumulation_steps=gradient_accumulation_steps,
        search=search,
    )
