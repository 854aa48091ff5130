"""What a job learned about its plans, kept in the compile cache so the next job starts from it.

A job with ``cache=`` writes ``sagemaker_tc_plans.json`` into its Inductor folder before the cache is
saved, so the file travels with the cache entry and is restored with it. It holds, per workload
(model class and size, device, processes, samples per step), the eager step and each plan's measured
compile and steady step seconds, and the plan chosen. ``plan="auto"`` then estimates an untried plan
from what an earlier job measured instead of from the device's prior
(:func:`sagemaker_tc.compiler.planner.estimate`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker_tc.paths import write_atomic

if TYPE_CHECKING:
    from sagemaker_tc.compiler.runtime_protocol import SessionRuntime

logger = logging.getLogger(__name__)

FILENAME = "sagemaker_tc_plans.json"
SCHEMA = 1


@dataclass(frozen=True)
class WorkloadKey:
    """What makes two jobs' step times comparable.

    Attributes:
        model: the model's class name.
        parameters: its parameter count.
        device: the device (``"cpu"``, or the CUDA device's name).
        world_size: processes training together.
        samples_per_step: the global batch of the first measured step.
    """

    model: str
    parameters: int
    device: str
    world_size: int
    samples_per_step: int

    def text(self) -> str:
        """A stable string form, the history file's key."""
        return "|".join(str(value) for value in asdict(self).values())


def _workloads(folder: Path | None) -> dict[str, Any]:
    """``folder``'s history file's workloads by key text (empty without a readable file of this
    schema; never raises)."""
    if folder is None:
        return {}
    try:
        data = json.loads((folder / FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return {}
    workloads = data.get("workloads")
    return workloads if isinstance(workloads, dict) else {}


def read(folder: Path | None, key: WorkloadKey) -> dict[str, Any]:
    """The entry for ``key`` in ``folder``'s history file (empty without one; never raises)."""
    entry = _workloads(folder).get(key.text())
    return entry if isinstance(entry, dict) else {}


def plans_held(folder: Path | None) -> set[tuple[str, str]]:
    """The ``(workload key text, plan)`` pairs ``folder``'s history file holds a measurement or a
    failure of (empty without one; never raises): what a job added to the history, and so to the
    compile cache, is the pairs it holds that the restored file did not."""
    return {
        (workload, plan)
        for workload, entry in _workloads(folder).items()
        if isinstance(entry, dict) and isinstance(entry.get("plans"), dict)
        for plan in entry["plans"]
    }


def write(folder: Path | None, key: WorkloadKey, entry: dict[str, Any]) -> None:
    """Merge ``entry`` into ``folder``'s history file under ``key`` (atomically; never raises).

    A plan this job measured replaces the earlier measurement; plans it did not try keep theirs.
    """
    if folder is None:
        return
    path = folder / FILENAME
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            data = {"schema": SCHEMA, "workloads": {}}
        old = data["workloads"].get(key.text(), {})
        plans = {**old.get("plans", {}), **entry.get("plans", {})}
        data["workloads"][key.text()] = {
            **old,
            **entry,
            "plans": plans,
            "workload": asdict(key),
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_atomic(path, json.dumps(data, indent=2))
    except (OSError, ValueError, TypeError) as error:
        logger.warning("Could not record the plan history in %s: %s", path, error)


def workload_key(model: Any, device_name: str, records: list[Any], world_size: int) -> WorkloadKey | None:
    """The workload of a job: its first attached ``model`` (a ``torch.nn.Module``), the device as the
    log names it, ``world_size`` processes, the first step record's global batch (samples); None
    before a model is attached (``model`` None) or a step recorded."""
    if model is None or not records:
        return None
    return WorkloadKey(
        model=type(model).__name__,
        parameters=sum(p.numel() for p in model.parameters()),
        device=device_name,
        world_size=world_size,
        samples_per_step=records[0].samples,
    )


def job_entry(
    trials: list[dict[str, Any]],
    failures: list[dict[str, Any]],
    eager_step_seconds: float | None,
    chosen: str,
    cache_state: str,
) -> dict[str, Any]:
    """What a job measured, for the next job with the same workload: the eager step (seconds), the
    plan it ``chosen``, and each compiled plan's compile and steady step from its ``trials`` (a trial
    whose measurement is invalid has none and is left out), with the cache state it compiled from
    (``"cold"`` or ``"warm"``); a plan that failed (each of ``failures``' ``ends``) is
    ``{"failed": reason}``."""
    plans: dict[str, dict[str, Any]] = {
        trial["plan"]: {
            "compile_seconds": trial["compile_seconds"],
            "steady_step_seconds": trial["steady_step_seconds"],
            "cache": cache_state,
        }
        for trial in trials
        if trial["plan"] != "eager" and trial["steady_step_seconds"] is not None
    }
    for failure in failures:  # a plan that failed here is not tried again for this workload
        for plan in failure["ends"]:
            plans[plan] = {"failed": f"{failure['kind']}: {failure['reason']}"[:300]}
    return {"eager_step_seconds": eager_step_seconds, "chosen": chosen, "plans": plans}


class PlanHistory:
    """The plan history of one job's workload in one folder (the compile cache's Inductor folder).

    Args:
        folder: where ``sagemaker_tc_plans.json`` lives (None: nowhere; reads give nothing, writes are skipped).
        key: the job's :class:`WorkloadKey` as of now (None until a model is attached and a step
            recorded); asked at each read and write.
    """

    def __init__(self, folder: Path | None, key: Callable[[], WorkloadKey | None]) -> None:
        self.folder = folder
        self.key = key

    @classmethod
    def of_job(cls, folder: Path | None, runtime: SessionRuntime, records: list[Any], world_size: int) -> PlanHistory:
        """The history in ``folder`` of the workload of a job whose runtime is ``runtime`` (its first
        model and device name), whose step ``records`` are these (a live list) and with ``world_size``
        processes (:func:`workload_key`)."""
        return cls(folder, lambda: workload_key(runtime.first_model(), runtime.device_name, records, world_size))

    def plans(self) -> dict[str, Any]:
        """What earlier jobs with this workload measured, per plan (``{}`` when none or no key yet);
        the schedule's ``history_source``."""
        key = self.key()
        return read(self.folder, key).get("plans", {}) if key is not None else {}

    def record(self, entry: Callable[[], dict[str, Any]]) -> None:
        """Keep ``entry()`` (what this job measured, :func:`job_entry`) for the next job with the same
        workload; nothing when there is no key yet. Never raises over the file (:func:`write`)."""
        key = self.key()
        if key is not None:
            write(self.folder, key, entry())
