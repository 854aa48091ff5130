"""One compiler session per job process: what the compiler knows about the job, and its parts.

A :class:`CompilerSession` is made from the resolved ``TrainingCompilerConfig``: by the launcher in
a job (:mod:`sagemaker_tc.container.launcher`), by ``compile_model`` outside one. It owns the runtime
(:class:`~sagemaker_tc.compiler.runtime.CompilerRuntime`; ``backend="xla"``:
:class:`~sagemaker_tc.compiler.xla_runtime.XlaRuntime`), the step timer, the compile watch, the bucket
statistics, the debug capture, the compile cache, the :class:`~.job_report.JobRecord` the report is
gathered from (:meth:`report`), and every hook it installs, each undone by :meth:`close`. It hands its
parts down (:meth:`trainer_parts`, :mod:`.parts`): nothing outside this module takes the session.

Life in a job: settings -> :meth:`CompilerSession.open` -> the user's script -> :meth:`close`
(compile cache saved by global rank 0, ``report.json`` written by global rank 0: one writer per job).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker_tc import _internals, contract
from sagemaker_tc.compiler import backward, history, job_report, model_setup, resume, sharding
from sagemaker_tc.compiler.captured_step import GraphBackend, graph_backend_for
from sagemaker_tc.compiler.debug import DebugCapture
from sagemaker_tc.compiler.dynamo import CompileWatch, DynamoLimits, dynamo_mark
from sagemaker_tc.compiler.job_report import JobRecord
from sagemaker_tc.compiler.parts import Runtime, TrainerParts, prepare_xla, resolve_config, runtime_for, torch_installed
from sagemaker_tc.compiler.plan_call import recompile_limit_for_buckets
from sagemaker_tc.compiler.ranks import world_size
from sagemaker_tc.compiler.shapes import BucketStats
from sagemaker_tc.compiler.steps import StepTimer
from sagemaker_tc.compiler.stopping import StopSignal
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.errors import SessionStateError

if TYPE_CHECKING:
    from sagemaker_tc.compiler.job_cache import JobCache
    from sagemaker_tc.compiler.regions import CompiledRegions

logger = logging.getLogger("sagemaker_tc.session")

_current: CompilerSession | None = None


def current_session() -> CompilerSession | None:
    """The process's open session, else None."""
    return _current


def pads_training_batches() -> bool:
    """Whether a bucketing collator pads a batch now: while the open session runs a compiled plan
    (eager never pads), and always without a session."""
    return _current is None or _current.runtime.calls.pads_training_batches


def session_for(config: TrainingCompilerConfig | None = None) -> CompilerSession:
    """The process's open session, or a new one opened with :func:`~.parts.resolve_config`
    of ``config`` (``compile_model`` and ``tune_batch_size`` outside a job; it writes no report)."""
    return _current if _current is not None else CompilerSession(resolve_config(config, os.environ)).open()


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
        self.runtime: Runtime = runtime_for(config, self.buckets, self.timer)
        self.timer.add_step_end_callback(self.runtime.after_step)
        self.watch = CompileWatch(self.timer.on_compile, on_limit_hit=self.runtime.recompile_limit_hit)
        self.debug = DebugCapture() if config.debug else None
        self.record = JobRecord()  # what the job tells the session, for the report
        self.stop: StopSignal | None = None  # a job launcher's: SIGTERM stops at a step boundary
        self.state = "new"
        self._undo: list[Callable[[], None]] = []
        self.limits = DynamoLimits()
        # The graph backend that records a whole step on a device type (tests give the CPU stand-in).
        self.graph_backend_for: Callable[[str], GraphBackend | None] = graph_backend_for

    def trainer_parts(self) -> TrainerParts:
        """The parts a ``Trainer``'s callback and the launcher take (:class:`~.parts.TrainerParts`)."""
        return TrainerParts(
            config=self.config,
            timer=self.timer,
            runtime=self.runtime,
            record=self.record,
            add_cleanup=self.add_cleanup,
            attach=self.attach,
            end_step=self.end_step,
            stop_agreed=self.stop_agreed,
            resume_from=self.resume_from,
            plan_record=self.plan_record,
            graph_backend_for=lambda device: self.graph_backend_for(device),
        )

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
        xla_backend = self.config.compiles and self.config.backend == "xla"
        undo_xla = prepare_xla(self.config, self.environ) if xla_backend else None
        _current = self
        self.state = "open"
        self.runtime.compiles_since = dynamo_mark()  # the report counts only what compiles from now on
        if self.job_cache is not None:  # undone last: after the report's cache save
            self._undo.append(self.job_cache.remove_private_dir)
        if undo_xla is not None:
            self._undo.append(undo_xla)
        self._undo.append(self.runtime.detach)
        if torch_installed():
            self.watch.install()
            self._undo.append(self.watch.uninstall)
            self._undo.append(_internals.compile_backward_with_forward())
            if self.config.compiles and not xla_backend:
                self._undo.append(backward.watch_backward(lambda: self.runtime.active, self.runtime.backward_failed))
            self._undo.append(self.limits.restore)
            if self.debug is not None:
                self.debug.install()
                self._undo.append(self.debug.uninstall)
        return self

    def add_cleanup(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` at :meth:`close` (hooks an integration installed), last added first."""
        self._undo.append(undo)

    @contextmanager
    def setup(self) -> Iterator[CompilerSession]:
        """An integration's setup (``compile_model``), all or nothing: when the block raises, every
        undo it added with :meth:`add_cleanup` runs (last added first) and the record's ``integration``
        and ``regions`` are put back, so the next call starts from the session as it was (:meth:`attach`
        puts the runtime back itself; an integration's own state is undone by the cleanup it added)."""
        mark, kept = len(self._undo), (self.record.integration, self.record.regions)
        try:
            yield self
        except BaseException:
            self._undo_to(mark)
            self.record.integration, self.record.regions = kept
            raise

    def close(self, script_outcome: str | None = None) -> dict[str, Any] | None:
        """End the session: save the compile cache and write the report (global rank 0 of a
        launcher's session), then undo every hook. ``script_outcome``: how a launcher's script ended
        (``"finished"``, ``"failed"``; the report's ``fallback_reason`` for a script that failed
        before it attached a model). Returns the report when this process wrote one, else None.
        Never raises over the report or the cache (the script's own outcome matters more)."""
        global _current
        if self.state != "open":
            return None
        if script_outcome is not None:
            self.record.script_outcome = script_outcome
        report = None
        try:
            report = self._finish() if self.writes_report and self.is_rank_zero else None
        finally:
            self._undo_to(0)
            if _current is self:
                _current = None
            self.state = "closed"
        return report

    def _undo_to(self, mark: int) -> None:
        """Undo the hooks added after the first ``mark`` ones, last added first."""
        while len(self._undo) > mark:
            try:
                self._undo.pop()()
            except Exception:  # undoing one hook must not keep the others in place
                logger.exception("Could not undo a compiler hook")

    def __enter__(self) -> CompilerSession:
        return self.open() if self.state == "new" else self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def is_rank_zero(self) -> bool:
        """True in global rank 0 (and outside torchrun)."""
        return self.environ.get(contract.ENV_RANK, "0") == "0"

    # -- what integrations call ----------------------------------------------------------------------
    def attach(
        self,
        model: Any,
        config: TrainingCompilerConfig | None = None,
        *,
        job_length: tuple[int | None, str],
        accumulation: int | None = None,
        measure_calls: bool = False,
        moves_batches: bool = False,
        train_dataloader: Any = None,
        warn_shard_order: bool = False,
    ) -> CompiledRegions | None:
        """Set ``model`` up by ``config`` (default the session's), the same for every integration: the
        job's length and accumulation told to the runtime, ``use_cache`` off while it trains compiled
        (:mod:`.model_setup`), its compile plans prepared, one log line saying what is compiled.

        Args:
            job_length: ``(optimizer steps, their source)``; steps None or <= 0: unknown.
            accumulation: forwards per optimizer step; None leaves it as it is.
            measure_calls: attach the model even when the config does not compile (the plain-loop
                step watcher hears its calls); otherwise an uncompiled model is left alone.
            moves_batches, train_dataloader: the integration's dataloader moves each batch to the
                device (a ``Trainer``'s): ``backend="xla"`` then pads in its collate function.
            warn_shard_order: warn when ``model`` is FSDP2-sharded already (``compile_model``).

        Returns what the configured plan compiles, or None when the model was not attached. Raises
        whatever the runtime's attach raised (all or nothing; ``use_cache`` is set back when a
        :meth:`setup` block around the call is undone).
        """
        config = config or self.config
        runtime = self.runtime
        runtime.set_job_length(*job_length)
        if accumulation is not None:
            runtime.calls.set_accumulation(accumulation)
        undo_kv_cache = model_setup.kv_cache_off(model) if config.compiles else None
        if undo_kv_cache is not None:
            self.add_cleanup(undo_kv_cache)
        plan = self._prepare_plans(model, config) if config.compiles or measure_calls else None
        if plan is not None:
            sharding.on_attach(  # FSDP2: the gloo check, the order warning
                model,
                config.plan if config.compiles else None,
                listen=lambda listener: self.add_cleanup(runtime.calls.add_listener(listener)),
                warn_order=warn_shard_order,
            )
        model_setup.log_setup(
            model,
            config,
            plan,
            device_name=lambda: runtime.device_name,
            padding=lambda: model_setup.xla_padding(runtime, moves_batches, train_dataloader),
            auto_plans=runtime.auto_plans,
        )
        return plan

    def _prepare_plans(self, model: Any, config: TrainingCompilerConfig) -> CompiledRegions:
        """The runtime prepares ``model``'s plans (all or nothing), the record keeps what the configured
        plan compiles; with a compile cache ``plan="auto"`` starts from earlier jobs' :mod:`.history`."""
        regions = self.runtime.attach(model, config)
        self.record.regions = regions
        if self.runtime.recompile_budgets and torch_installed():
            self.limits.make_room_for(self.runtime.recompile_budgets)
        schedule = self.runtime.schedule
        if schedule is not None and self.job_cache is not None:
            schedule.workload.warm_cache = self.job_cache.outcome.get("state") == "warm"
            schedule.history_source = self._history().plans
        return regions

    def _history(self) -> history.PlanHistory:
        """This job's workload's plan history, in the compile cache's Inductor folder."""
        folder = self.job_cache.cache.inductor_dir if self.job_cache is not None else None
        return history.PlanHistory.of_job(folder, self.runtime, self.timer.records, world_size(self.environ))

    def use_buckets(self, buckets: list[int]) -> BucketStats:
        """A bucketing collator joins: training runs static graphs from now on, and dynamo's
        ``recompile_limit`` makes room for one graph per bucket (restored at :meth:`close`). Returns
        the statistics the collator counts its batches in."""
        self.buckets.register(buckets)
        if torch_installed():
            self.limits.raise_recompile_limit(recompile_limit_for_buckets(len(buckets), _internals.recompile_limit()))
        return self.buckets

    def resume_from(self, checkpoint: Path) -> dict[str, Any]:
        """The job resumes from ``checkpoint`` (before the model is attached): the report says
        ``resumed_from``, and ``plan="auto"`` runs the decision saved there (:mod:`.resume`). Returns
        the report's ``resumed_from`` entry."""
        self.record.resumed_from, saved = resume.begin(checkpoint)
        if saved is not None:
            self.runtime.resume_with(saved)
        return self.record.resumed_from

    def plan_record(self) -> tuple[str, dict[str, Any] | None]:
        """``(requested plan, plan="auto"'s decision or None)``: what a checkpoint keeps of the plan
        (:func:`sagemaker_tc.checkpoints.save_plan`)."""
        requested = (self.runtime.config if self.runtime.config is not None else self.config).plan
        return requested, self.runtime.decision

    # -- stopping: a job launcher's SIGTERM --------------------------------------------------------------
    def install_stop_signal(self) -> None:
        """Handle SIGTERM until :meth:`close`: the job stops at an optimizer-step boundary
        (:class:`~sagemaker_tc.compiler.stopping.StopSignal`)."""
        self.stop = StopSignal()
        self.add_cleanup(self.stop.install())

    def stop_agreed(self, step: int | None = None) -> bool:
        """True once every rank agreed to stop at optimizer step ``step`` (default: the steps timed so
        far); a collective in a multi-process job. Always False without :meth:`install_stop_signal`."""
        return self.stop is not None and self.stop.agreed(len(self.timer.records) if step is None else step)

    # -- steps: an integration begins each optimizer step on the timer and ends it here ----------------
    def end_step(self, samples: int) -> None:
        """Right after ``optimizer.step()``: the backend ends its step (XLA marks one graph), then the
        step's record of ``samples`` (the global batch: all ranks, all micro-batches) ends; the
        schedule may switch plans here. Never waits for the GPU."""
        self.runtime.finish_step()
        self.timer.end_step(samples)

    # -- the report ------------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """The report (``report.json``'s fields) as of now (:func:`.job_report.gather`; dynamo's
        counts start at :meth:`open`); waits for steps still on the GPU."""
        return job_report.gather(
            self.config, self.runtime, self.record, self.timer, self.buckets, self.watch, self.job_cache, self.environ
        )

    def _finish(self) -> dict[str, Any] | None:
        """Keep the plan history, save the cache, write the report and debug files, print the metrics."""
        try:
            if self.job_cache is not None:
                if self.runtime.config is not None:
                    cache_state = "warm" if self.job_cache.outcome.get("state") == "warm" else "cold"
                    self._history().record(lambda: self.runtime.history_entry(cache_state))
                self.job_cache.save(self.environ)
            report = self.report()
            job_report.write_files(report, contract.compiler_dir(self.environ), debug=self.debug, runtime=self.runtime)
            return report
        except Exception:  # a broken report must not hide the job's own result
            logger.exception("Could not write the compiler report")
            return None
