"""One compiler session per job process: everything the compiler knows about the job, in one object.

A :class:`CompilerSession` is made from the resolved ``TrainingCompilerConfig``: by the launcher in
a job (:mod:`sagemaker_tc.container.launcher`), by ``compile_model`` outside one. It owns

- the runtime: the compiled regions, the compile plan, the policy's schedule
  (:class:`~sagemaker_tc.compiler.runtime.CompilerRuntime`; ``backend="xla"``:
  :class:`~sagemaker_tc.compiler.xla_runtime.XlaRuntime`);
- the step records (:class:`~sagemaker_tc.compiler.steps.StepTimer`) and the compile watch
  (:class:`~sagemaker_tc.compiler.dynamo.CompileWatch`);
- the bucket statistics, the debug capture, the compile cache's outcome and the batch-size decision;
- every hook it installs in torch, transformers or logging, each undone by :meth:`close`;

and it produces the report (:meth:`report`). The integrations are handed the session; nothing
re-reads the environment per event. The session of the process is :func:`current_session` while it
is open.

Life in a job: settings -> :meth:`CompilerSession.open` -> the user's script -> :meth:`close`
(compile cache saved by global rank 0, ``report.json`` written by global rank 0: one writer per job).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sagemaker_tc import _internals, contract
from sagemaker_tc.compiler import backward, history, planner, resume
from sagemaker_tc.compiler.captured_step import GraphBackend, graph_backend_for
from sagemaker_tc.compiler.debug import DebugCapture
from sagemaker_tc.compiler.dynamo import CompileWatch, DynamoLimits, dynamo_mark
from sagemaker_tc.compiler.facts import SessionValues, job_facts
from sagemaker_tc.compiler.plan_call import recompile_limit_for_buckets
from sagemaker_tc.compiler.ranks import world_size
from sagemaker_tc.compiler.report import build_report, print_metric_lines, write_report
from sagemaker_tc.compiler.runtime import CompilerRuntime
from sagemaker_tc.compiler.shapes import BucketStats
from sagemaker_tc.compiler.steps import StepTimer
from sagemaker_tc.compiler.stopping import StopSignal
from sagemaker_tc.compiler.xla_runtime import XlaRuntime
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import SessionStateError

if TYPE_CHECKING:
    from sagemaker_tc.compiler.job_cache import JobCache
    from sagemaker_tc.compiler.regions import CompiledRegions

logger = logging.getLogger("sagemaker_tc.session")

Runtime = CompilerRuntime | XlaRuntime  # the session's runtime, by its config's backend

_current: CompilerSession | None = None


class BatchTuning(Protocol):
    """What the session keeps of a batch-size decision (:class:`sagemaker_tc.tuning.decision.TuningDecision`,
    recorded by :func:`sagemaker_tc.tuning.api.record`): its report entry."""

    def to_dict(self) -> dict[str, Any]:
        """The report's ``batch_tuning`` entry (JSON-ready)."""
        ...


def current_session() -> CompilerSession | None:
    """The process's open session, else None."""
    return _current


def compiler_dir(environ: Mapping[str, str]) -> Path:
    """``$SM_OUTPUT_DATA_DIR/compiler`` (SMTC's debug path), or ``./compiler`` outside a job."""
    base = environ.get(contract.ENV_OUTPUT_DATA_DIR)
    return (Path(base) if base else Path.cwd()) / contract.COMPILER_OUTPUT_DIRNAME


def resolve_config(config: TrainingCompilerConfig | None, environ: Mapping[str, str]) -> TrainingCompilerConfig:
    """``config``; else the job's (the estimator's ``compiler_config``); inside a job whose estimator
    had none, a disabled config (with a warning: the estimator decides); outside a job, the default.

    Raises:
        ConfigError: the job's settings in the environment are malformed.
    """
    if config is not None:
        return config
    settings = contract.settings_from_environment(environ)
    if settings is not None:
        return settings.config
    if contract.ENV_TRAINING_ENV in environ:
        logger.warning(
            "compile_model: this job's estimator has no compiler_config, so the model is not compiled "
            "(add compiler_config=TrainingCompilerConfig() to the estimator, or pass config= here)"
        )
        return TrainingCompilerConfig(enabled=False)
    return TrainingCompilerConfig()


def session_for(config: TrainingCompilerConfig | None = None) -> CompilerSession:
    """The process's open session, or a new one opened with :func:`resolve_config` of ``config``
    (``compile_model`` and ``tune_batch_size`` outside a job; it writes no report)."""
    session = current_session()
    if session is not None:
        return session
    return CompilerSession(resolve_config(config, os.environ)).open()


class CompilerSession:
    """The compiler's state for one job process (module docstring).

    Args:
        config: the resolved config.
        environ: the process environment (output folder, rank, host); default ``os.environ``.
        writes_report: write ``report.json`` and the metric lines at :meth:`close` (global rank 0
            only); the launcher's session does, a session ``compile_model`` opened does not.
        job_cache: the job's compile cache (saved at :meth:`close` by global rank 0).
    """

    def __init__(
        self,
        config: TrainingCompilerConfig,
        *,
        environ: Mapping[str, str] | None = None,
        writes_report: bool = False,
        job_cache: JobCache | None = None,
    ) -> None:
        self.config = config
        self.environ = os.environ if environ is None else environ
        self.writes_report = writes_report
        self.job_cache = job_cache
        self.buckets = BucketStats()
        self.timer = StepTimer(label=lambda: self.runtime.current_label(), device=lambda: self.runtime.model_device)
        self.runtime: Runtime = _runtime_for(config, self.buckets, self.timer)
        self.timer.add_step_end_callback(self.runtime.after_step)
        self.watch = CompileWatch(self.timer.on_compile, on_limit_hit=self.runtime.recompile_limit_hit)
        self.debug = DebugCapture() if config.debug else None
        self.integration: str | None = None
        self.regions: CompiledRegions | None = None  # what the configured plan compiles (attach)
        self.batch_tuning: BatchTuning | None = None
        self.stop: StopSignal | None = None  # a job launcher's: SIGTERM stops at a step boundary
        self.resumed_from: dict[str, Any] | None = None  # set by resume_from
        self.script_outcome: str | None = None  # a job launcher's: "finished" or "failed", set before close
        self.state = "new"
        self._undo: list[Callable[[], None]] = []
        self.limits = DynamoLimits()
        # The graph backend that records a whole step on a device type (tests give the CPU stand-in).
        self.graph_backend_for: Callable[[str], GraphBackend | None] = graph_backend_for
        self.captured_step_report: Callable[[], dict[str, Any] | None] = lambda: None  # the Trainer integration's

    def whole_step_backend(self) -> GraphBackend | None:
        """The graph backend to record a whole training step with now, or None: the job named
        ``plan="step"`` with the default mode, the step plan runs, and its device records
        (:mod:`sagemaker_tc.integrations.captured_trainer`; under ``plan="auto"`` only where
        :func:`~.planner.whole_step_under_auto` allows it)."""
        if not self.whole_step_named() or self.runtime.active != "step":
            return None
        return self.graph_backend_for(self.runtime.device)

    def whole_step_named(self) -> bool:
        """The job named ``plan="step"`` with the default mode (Inductor), or ``plan="auto"`` where a
        committed GPU result backs it (:func:`~.planner.whole_step_under_auto`): a ``Trainer``'s
        whole step is recorded where the device records (:meth:`whole_step_backend`)."""
        config = self.config
        named = config.plan == "step" or (config.plan == "auto" and planner.whole_step_under_auto(self.runtime.device))
        return config.compiles and config.backend == "inductor" and named and config.mode == "default"

    # -- life ------------------------------------------------------------------------------------
    def open(self) -> CompilerSession:
        """Make this the process's session and install its torch hooks (when torch is installed).

        Raises:
            SessionStateError: another session is open in this process, or this one was used.
            CompilerError: ``backend="xla"`` without torch_xla installed (nothing is left open).
        """
        global _current
        if self.state != "new":
            raise SessionStateError(f"this compiler session is {self.state}; open a new one")
        if _current is not None:
            raise SessionStateError("a compiler session is already open in this process: close it first")
        undo_xla = self._prepare_xla() if self.config.compiles and self.config.backend == "xla" else None
        _current = self
        self.state = "open"
        self.runtime.compiles_since = dynamo_mark()  # the report counts only what compiles from now on
        if self.job_cache is not None:  # undone last: after the report's cache save
            self._undo.append(self.job_cache.remove_private_dir)
        if undo_xla is not None:
            self._undo.append(undo_xla)
        self._undo.append(self.runtime.detach)
        if _torch_installed():
            self.watch.install()
            self._undo.append(self.watch.uninstall)
            self._undo.append(_internals.compile_backward_with_forward())
            if self.config.compiles and self.config.backend != "xla":
                self._undo.append(backward.watch_backward(lambda: self.runtime.active, self.runtime.backward_failed))
            self._undo.append(self.limits.restore)
            if self.debug is not None:
                self.debug.install()
                self._undo.append(self.debug.uninstall)
        return self

    def _prepare_xla(self) -> Callable[[], None]:
        """``backend="xla"``: the PJRT device (and debug mode's HLO dump) in the environment, then
        torch_xla imported, before the script's first ``backward()``. Returns the environment's undo.

        Raises:
            CompilerError: torch_xla is not installed (the environment is put back first).
        """
        from sagemaker_tc.compiler import xla

        debug_dir = compiler_dir(self.environ) if self.config.debug else None
        undo = xla.prepare_environment(self.config, os.environ, debug_dir)
        try:
            xla.import_torch_xla()
        except Exception:
            undo()
            raise
        return undo

    def add_cleanup(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` at :meth:`close` (hooks an integration installed), last added first."""
        self._undo.append(undo)

    @contextmanager
    def setup(self) -> Iterator[CompilerSession]:
        """An integration's setup (``compile_model``), all or nothing: when the block raises, every
        undo it added with :meth:`add_cleanup` runs (last added first) and the session's
        ``integration`` and ``regions`` are put back, so the next call starts from the session as it was
        (:meth:`attach` puts the runtime back itself; an integration's own per-session state is undone
        by the cleanup it added)."""
        mark, kept = len(self._undo), (self.integration, self.regions)
        try:
            yield self
        except BaseException:
            while len(self._undo) > mark:
                try:
                    self._undo.pop()()
                except Exception:  # undoing one hook must not keep the others in place
                    logger.exception("Could not undo a compiler hook")
            self.integration, self.regions = kept
            raise

    def close(self) -> dict[str, Any] | None:
        """End the session: save the compile cache and write the report (global rank 0 of a
        launcher's session), then undo every hook. Never raises over the report or the cache (the
        script's own outcome matters more).

        Returns:
            The report when this process wrote one, else None.
        """
        global _current
        if self.state != "open":
            return None
        report = None
        try:
            report = self._finish() if self.writes_report and self.is_rank_zero else None
        finally:
            while self._undo:
                try:
                    self._undo.pop()()
                except Exception:  # undoing one hook must not keep the others in place
                    logger.exception("Could not undo a compiler hook")
            if _current is self:
                _current = None
            self.state = "closed"
        return report

    def __enter__(self) -> CompilerSession:
        return self.open() if self.state == "new" else self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def is_rank_zero(self) -> bool:
        """True in global rank 0 (and outside torchrun)."""
        return self.environ.get(contract.ENV_RANK, "0") == "0"

    # -- what integrations call ----------------------------------------------------------------------
    def attach(self, model: Any, config: TrainingCompilerConfig | None = None) -> CompiledRegions:
        """Prepare ``model``'s compile plans by ``config`` (default the session's) and remember what
        the configured plan compiles. With a compile cache, ``plan="auto"`` starts from what earlier
        jobs measured (:mod:`sagemaker_tc.compiler.history`).

        Raises:
            Exception: whatever the runtime's attach raised; the runtime and the session's regions
                are then as before the call (:meth:`CompilerRuntime.attach` is all or nothing).
        """
        regions = self.runtime.attach(model, config or self.config)
        self.regions = regions
        if self.runtime.recompile_budgets and _torch_installed():
            self.limits.make_room_for(self.runtime.recompile_budgets)
        schedule = self.runtime.schedule
        if schedule is not None and self.job_cache is not None:
            schedule.workload.warm_cache = self.job_cache.outcome.get("state") == "warm"
            schedule.history_source = self._plan_history
        return regions

    def _history_folder(self) -> Path | None:
        return self.job_cache.cache.inductor_dir if self.job_cache is not None else None

    def _workload_key(self) -> history.WorkloadKey | None:
        runtime = self.runtime
        return history.workload_key(
            runtime.first_model(), runtime.device_name, self.timer.records, world_size(self.environ)
        )

    def _plan_history(self) -> dict[str, Any]:
        key = self._workload_key()
        return history.read(self._history_folder(), key).get("plans", {}) if key is not None else {}

    def _record_history(self) -> None:
        """Keep what this job measured for the next job with the same workload (in the cache)."""
        key = self._workload_key()
        if key is None or self.job_cache is None or self.runtime.config is None:
            return
        warm = self.job_cache.outcome.get("state") == "warm"
        history.write(self._history_folder(), key, self.runtime.history_entry("warm" if warm else "cold"))

    def use_buckets(self, buckets: list[int]) -> BucketStats:
        """A bucketing collator joins: training runs static graphs from now on, and dynamo's
        ``recompile_limit`` makes room for one graph per bucket (restored at :meth:`close`).

        Returns:
            The statistics the collator counts its batches in.
        """
        self.buckets.register(buckets)
        if _torch_installed():
            self.limits.raise_recompile_limit(recompile_limit_for_buckets(len(buckets), _internals.recompile_limit()))
        return self.buckets

    def track_optimizer(self, optimizer: Any) -> None:
        """Remember an optimizer the job steps (the policy may switch it to its fused kernel)."""
        self.runtime.track_optimizer(optimizer)

    def set_job_length(self, steps: int | None, source: str) -> None:
        """The job's length in optimizer steps (``plan="auto"`` weighs compile time against it);
        ``source`` names where it came from for the report (``"Trainer max_steps"``). None or <= 0:
        unknown (1,000 steps are assumed)."""
        self.runtime.set_job_length(steps, source)

    def set_evaluation_runs(self, runs: int | None, source: str) -> None:
        """The evaluation runs the job makes in all (a ``Trainer``'s evaluation strategy; ``source``
        names it for the report). Never set: unknown, and evaluation stays eager under every plan
        (:mod:`sagemaker_tc.compiler.evaluation`)."""
        self.runtime.set_evaluation_runs(runs, source)

    def end_evaluation_run(self) -> None:
        """An evaluation run ended (a ``Trainer``'s ``on_evaluate``): the runtime decides whether
        compiling evaluation pays from here on (a training call after evaluation calls does the same)."""
        self.runtime.end_evaluation_run()

    @property
    def accumulation(self) -> int:
        """Forwards (micro-batches) per optimizer step, as last set by :meth:`set_accumulation` (1)."""
        return self.runtime.calls.forwards_per_step

    def set_accumulation(self, forwards: int) -> None:
        """Gradient accumulation: ``forwards`` training forwards (micro-batches) per optimizer step,
        at least 1 (CUDA graphs run only with 1: :meth:`~.calls.ModelCalls.captures`)."""
        self.runtime.calls.set_accumulation(forwards)

    @property
    def device_name(self) -> str:
        """The first attached model's device as the log names it: ``"cpu"``, the GPU's name
        (``"NVIDIA H200"``) or ``"xla:<PJRT device>"``; ``"cpu"`` before any :meth:`attach`."""
        return self.runtime.device_name

    def add_model_call_listener(self, listener: Callable[[Any, tuple, dict], None]) -> None:
        """Call ``listener(module, args, kwargs)`` before each call of an attached model (outside any
        compiled graph), until :meth:`close` (or until a failed :meth:`setup` block is undone)."""
        self.add_cleanup(self.runtime.calls.add_listener(listener))

    def pad_batches_on_host(self, loader: Any) -> bool:
        """``backend="xla"``: pad ``loader``'s training batches to the buckets in its collate function
        (:meth:`sagemaker_tc.compiler.xla_runtime.XlaRuntime.pad_batches_on_host`). Returns False when nothing was
        wrapped: another backend, or no DataLoader found."""
        return isinstance(self.runtime, XlaRuntime) and self.runtime.pad_batches_on_host(loader)

    def join(self, integration: str, *, first_only: bool = False) -> None:
        """Record the integration that drives the job (``"transformers"``, ``"pytorch"``) for the
        report; with ``first_only``, only when none has joined yet."""
        if not (first_only and self.integration is not None):
            self.integration = integration

    def auto_plans(self) -> list[str]:
        """The plans ``plan="auto"`` may try for the attached models (the log line names them)."""
        return self.runtime.auto_plans()

    @property
    def pads_training_batches(self) -> bool:
        """True while the plan that runs pads training batches to buckets (a compiled plan; eager never pads)."""
        return self.runtime.calls.pads_training_batches

    def record_batch_tuning(self, decision: BatchTuning) -> None:
        """Keep a batch-size decision for the report's ``batch_tuning``."""
        self.batch_tuning = decision

    def resume_from(self, checkpoint: Path) -> dict[str, Any]:
        """The job resumes from ``checkpoint`` (before the model is attached): the report says
        ``resumed_from``, and ``plan="auto"`` runs the decision saved there (:mod:`.resume`).

        Returns:
            The report's ``resumed_from`` entry.
        """
        self.resumed_from, saved = resume.begin(checkpoint)
        if saved is not None:
            self.runtime.resume_with(saved)
        return self.resumed_from

    def plan_record(self) -> tuple[str, dict[str, Any] | None]:
        """``(requested plan, plan="auto"'s decision or None)``: what a checkpoint keeps of the plan
        (:func:`sagemaker_tc.checkpoints.save_plan`)."""
        runtime = self.runtime
        requested = runtime.config.plan if runtime.config is not None else self.config.plan
        return requested, runtime.decision

    # -- stopping: a job launcher's SIGTERM --------------------------------------------------------------
    def install_stop_signal(self) -> None:
        """Handle SIGTERM until :meth:`close`: the job stops at an optimizer-step boundary
        (:class:`~sagemaker_tc.compiler.stopping.StopSignal`)."""
        self.stop = StopSignal()
        self.add_cleanup(self.stop.install())

    def stop_agreed(self, step: int | None = None) -> bool:
        """True once every rank agreed to stop at optimizer step ``step`` (default: the steps timed so
        far); a collective in a multi-process job. Always False without :meth:`install_stop_signal`."""
        if self.stop is None:
            return False
        return self.stop.agreed(len(self.timer.records) if step is None else step)

    def set_script_outcome(self, outcome: str) -> None:
        """How the user's script ended (``"finished"``, ``"failed"``), before :meth:`close`: the report's
        ``fallback_reason`` for a script that failed before it attached a model."""
        self.script_outcome = outcome

    # -- steps: an integration marks each optimizer step --------------------------------------------
    @property
    def step_open(self) -> bool:
        """True between :meth:`begin_step` and :meth:`end_step`."""
        return self.timer.step_open

    def begin_step(self) -> None:
        """An optimizer step begins (before its first forward): timed from now, under the plan that
        runs now."""
        self.timer.begin_step()

    def end_step(self, samples: int) -> None:
        """Right after ``optimizer.step()``: the backend ends its step (XLA marks it: one graph per
        optimizer step), then the step's record ends. ``samples`` is the step's global batch, in
        samples (all ranks, all micro-batches). The schedule may switch plans here. Never waits for
        the GPU."""
        self.runtime.finish_step()
        self.timer.end_step(samples)

    # -- the report ------------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """The report (``report.json``'s fields) as of now (:func:`~sagemaker_tc.compiler.facts.job_facts`;
        dynamo's counts start at :meth:`open`); waits for steps still on the GPU."""
        values = SessionValues(
            records=self.timer.flush(),
            compiles_in_steps=self.timer.compiles_in_steps,
            regional_plan=self.regions.regional if self.regions is not None else None,
            integration=self.integration,
            resumed_from=self.resumed_from,
            shapes=self.buckets.summary(),
            recompile_limit_hits=list(self.watch.recompile_limit_hits),
            cache_outcome=self.job_cache.outcome if self.job_cache is not None else None,
            batch_tuning=self.batch_tuning.to_dict() if self.batch_tuning is not None else None,
            script_outcome=self.script_outcome,
            world=world_size(self.environ),
        )
        report = build_report(self.config, job_facts(self.config, self.runtime, values))
        captured = self.captured_step_report()
        if captured is not None:
            report["captured_step"] = captured
        return report

    def _finish(self) -> dict[str, Any] | None:
        """Save the cache, write the report (and the debug files), print the metric lines."""
        try:
            if self.job_cache is not None:
                self._record_history()
                self.job_cache.save(self.environ)
            report = self.report()
            folder = compiler_dir(self.environ)
            if self.debug is not None:
                report["debug_files"] = self.debug.write(folder)
                report["debug_files"]["files"] += self.runtime.write_debug(folder)
            write_report(report, folder)
            print_metric_lines(report)
            return report
        except Exception:  # a broken report must not hide the job's own result
            logger.exception("Could not write the compiler report")
            return None


def _runtime_for(config: TrainingCompilerConfig, buckets: BucketStats, timer: StepTimer) -> Runtime:
    """The runtime ``config``'s backend runs: :class:`~sagemaker_tc.compiler.xla_runtime.XlaRuntime` for
    ``backend="xla"``, else :class:`~sagemaker_tc.compiler.runtime.CompilerRuntime` (Inductor's plans)."""
    if config.compiles and config.backend == "xla":
        from sagemaker_tc.compiler.xla import XlaBackend

        return XlaRuntime(XlaBackend(), buckets, timer)
    return CompilerRuntime(buckets, timer)


def _torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
