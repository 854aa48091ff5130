"""The in-container launcher: find the compiler settings, configure the process, run the user's script.

The SDK ships this as ``sagemaker_tc_launcher.py`` and names it the job's ``sagemaker_program``, so
the stock sagemaker-training toolkit runs it (``python -- sagemaker_tc_launcher.py --hp value ...``)
with no custom image. The launcher then:

1. reads the settings from ``SM_FRAMEWORK_PARAMS`` (or ``SM_TRAINING_COMPILER_SETTINGS``, for
   launchers that bypass the toolkit);
2. logs SMTC's lines (``Found configuration for Training Compiler``, ``Configuring SM Training
   Compiler...``, and ``Training Compiler set to debug mode``);
3. sets the compiler's environment variables, never overwriting one the user set (it warns);
   in a GPU job also torch's NCCL Flight Recorder variables (:mod:`sagemaker_tc.container.flight_recorder`);
4. with ``cache=...``, restores the compile cache into a fresh Inductor folder
   (:mod:`sagemaker_tc.compiler.job_cache`), once per host, before any rank starts;
5. opens the job's compiler session (:class:`~sagemaker_tc.compiler.session.CompilerSession`) with its SIGTERM
   handler (:mod:`sagemaker_tc.compiler.stopping`: training stops at a step boundary) and a post-import hook
   that adds the Hugging Face ``Trainer`` callback once the script imports ``transformers.trainer`` (a plain
   PyTorch job never imports transformers through us), then runs the user's entry point in this process as
   ``__main__``, with the same arguments, so the runtime measures what runs (distributed jobs: torchrun runs
   the launcher once per rank);
6. when the script has ended (also when it failed): starts the watchdog's exit deadline
   (:mod:`sagemaker_tc.container.watchdog`), then closes the session: global rank 0 saves the compile cache,
   writes ``$SM_OUTPUT_DATA_DIR/compiler/report.json`` (the job's one writer) and prints the metric lines;
7. as the process's program (the injected launcher, a torchrun rank), returns with the script's module still
   ``sys.modules["__main__"]``: its globals (a DDP model, its process group) are freed when the interpreter
   shuts down, in the order ``python script.py`` frees them, never while the launcher runs (freeing a DDP
   model while holding the GIL can deadlock gloo's worker threads);
8. when the script, or the launcher's own setup or teardown, raises: writes ``$SM_OUTPUT_DIR/failure`` with
   the exception's type and message first (SageMaker keeps the first 1024 characters as the job's
   FailureReason; the toolkit only writes the file when it does not exist, and without a framework module it
   captures no error text), then lets the exception propagate so the process exits non-zero.

Under sagemaker-tc's own torchrun (the launcher runs torchrun when the toolkit did not), a rank whose script
finished and that then died at exit (torch's gloo teardown can abort) does not fail the job: its training is
complete, the model is kept, and the log says exactly that (:func:`_run_ranks`).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import io
import logging
import os
import subprocess
import sys
import traceback
import types
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path

from sagemaker_tc import contract, scratch
from sagemaker_tc.compiler.job_cache import JobCache, private_inductor_dir
from sagemaker_tc.compiler.parts import TrainerParts
from sagemaker_tc.compiler.session import CompilerSession
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.container import flight_recorder, watchdog
from sagemaker_tc.container.distributed import processes_per_host, rank_label, torchrun_command
from sagemaker_tc.container.peers import PeerWatch, poll_seconds
from sagemaker_tc.container.post_import import when_imported
from sagemaker_tc.errors import LauncherError

logger = logging.getLogger("sagemaker_tc.launcher")

# SMTC's log lines, which users grep for (SMTC docs FAQ "How do I know it is working?").
LOG_FOUND = "Found configuration for Training Compiler"
LOG_CONFIGURING = "Configuring SM Training Compiler..."
LOG_DEBUG = "Training Compiler set to debug mode"
MAX_TRACEBACK_CHARS = 3000


def setup_logging() -> None:
    """Send the package's log lines to stdout, once per process, as a job's launcher does (also for
    drivers that run before it, such as :mod:`sagemaker_tc.container.modeltrainer`)."""
    package_logger = logging.getLogger("sagemaker_tc")
    if not package_logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s sagemaker-tc %(levelname)s %(message)s"))
        package_logger.addHandler(handler)
        package_logger.setLevel(logging.INFO)
        package_logger.propagate = False


def compiler_environment(config: TrainingCompilerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables the launcher wants for ``config`` (before the user's win).

    SMTC's marker ``SM_TRAINING_COMPILER_CONFIGURED=1``; in debug mode ``TORCH_LOGS`` (graph breaks,
    recompiles) and ``TORCH_TRACE`` (structured compile logs, for tlparse) under the compiler output
    folder. Compilation itself is done in process by the integrations, not through variables.
    """
    env = {contract.ENV_CONFIGURED: "1"}
    if config.debug:
        env[contract.ENV_TORCH_LOGS] = "graph_breaks,recompiles"
        env[contract.ENV_TORCH_TRACE] = str(contract.compiler_dir(environ) / "torch_trace")
    return env


def apply_environment(wanted: Mapping[str, str], environ: MutableMapping[str, str]) -> dict[str, str]:
    """Set each ``wanted`` variable unless the user already set it (then warn and keep the user's).

    Returns:
        The variables this call set.
    """
    applied = {}
    for name, value in wanted.items():
        current = environ.get(name)
        if current is not None and current != value:
            logger.warning("%s is already set to %r; keeping it (sagemaker-tc would set %r)", name, current, value)
            continue
        environ[name] = value
        applied[name] = value
    return applied


def configure(config: TrainingCompilerConfig, environ: MutableMapping[str, str]) -> JobCache | None:
    """Log SMTC's lines, set the compiler's environment and load the compile cache, once per host:
    a process whose parent launcher configured it (a torchrun rank) inherits both.

    Returns:
        The job's compile cache (None without ``cache``, or when the config does not compile).
    """
    logger.info(LOG_FOUND)
    inherited = environ.get(contract.ENV_CONFIGURED) == "1"
    if inherited:
        logger.info("Training Compiler already configured by a parent process")
    else:
        logger.info(LOG_CONFIGURING)
        applied = apply_environment(compiler_environment(config, environ), environ)
        logger.info("Compiler settings: %s; environment: %s", config.model_dump(), applied)
        if config.debug:
            logger.info(LOG_DEBUG)
            contract.compiler_dir(environ).mkdir(parents=True, exist_ok=True)
    if not (config.cache and config.compiles):
        return None
    return JobCache.inherited(config, environ) if inherited else JobCache.open(config, environ)


TRAINER_MODULE = "transformers.trainer"


def open_session(
    config: TrainingCompilerConfig, environ: MutableMapping[str, str], job_cache: JobCache | None
) -> CompilerSession:
    """The job process's compiler session, open, with its SIGTERM handler
    (:mod:`sagemaker_tc.compiler.stopping`) and the ``Trainer`` callback (added once the script imports
    ``transformers.trainer``); undone at close."""
    session = CompilerSession(config, environ=environ, writes_report=True, job_cache=job_cache).open()
    if importlib.util.find_spec("torch") is not None:
        try:
            session.install_stop_signal()
            parts = session.trainer_parts()
            session.add_cleanup(when_imported(TRAINER_MODULE, lambda _module: _add_trainer_callback(parts)))
        except BaseException:
            session.close()
            raise
    return session


def _add_trainer_callback(parts: TrainerParts) -> None:
    from sagemaker_tc.integrations import transformers as hf_integration

    hf_integration.install(parts)


def failure_reason(error: BaseException, script: Path | None = None) -> str:
    """``"<Type>: <message>"`` first, then the traceback from the user's ``script`` on (the launcher's
    frames are dropped so the 1024-character FailureReason keeps the user's own)."""
    tb = error.__traceback__
    while script is not None and tb is not None and tb.tb_frame.f_code.co_filename != str(script):
        tb = tb.tb_next
    frames = traceback.format_exception(type(error), error, tb or error.__traceback__)
    return f"{type(error).__name__}: {error}\n\n{''.join(frames)[-MAX_TRACEBACK_CHARS:]}"


def write_failure(error: BaseException, environ: Mapping[str, str], script: Path | None = None) -> Path | None:
    """Write ``$SM_OUTPUT_DIR/failure`` for ``error`` unless it exists; returns its path (None outside a job)."""
    output_dir = environ.get(contract.ENV_OUTPUT_DIR)
    if not output_dir:
        return None
    path = Path(output_dir) / "failure"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        label = rank_label(environ)
        text = failure_reason(error, script)
        path.write_text(f"{label}: {text}" if label else text, encoding="utf-8")
    return path


def _resolve_script(entry_point: str) -> Path:
    script = Path(entry_point)
    if not script.is_absolute():
        script = Path.cwd() / script
    if not script.is_file():
        raise LauncherError(f"entry point {entry_point!r} was not found (looked in {Path.cwd()})")
    return script.resolve()


def run(entry_point: str, args: Sequence[str], *, program: bool = False) -> None:
    """Configure the compiler from the environment's settings and run ``entry_point`` with ``args``:
    settings -> open the session -> run the script -> close the session (report, cache save).

    Args:
        entry_point: the user's script.
        args: its command-line arguments.
        program: the launcher is this process's program (the injected launcher, a torchrun rank,
            ``sagemaker-tc launch``): the watchdog watches the process, and the script's module stays
            ``__main__`` after the return, until the interpreter shuts down (as under ``python
            script.py``). False (a caller that owns the process, such as a test): no watchdog, and
            the caller's ``__main__`` is back on return.

    Raises:
        LauncherError: the entry point does not exist, or the watchdog's setting is malformed.
        ConfigError: the settings in the environment are malformed.
        BaseException: whatever the user's script raises (including ``SystemExit``), and whatever the
            launcher's own setup or teardown raises; each is in ``$SM_OUTPUT_DIR/failure`` first.
    """
    setup_logging()
    try:
        _run(entry_point, args, program=program)
    except SystemExit as error:
        if error.code not in (None, 0):
            write_failure(error, os.environ)
        raise
    except BaseException as error:  # the script's own failure is already written; this adds the launcher's
        write_failure(error, os.environ)
        raise


def _run(entry_point: str, args: Sequence[str], *, program: bool) -> None:
    settings = contract.settings_from_environment(os.environ)
    script = _resolve_script(entry_point)
    config = settings.config if settings is not None and settings.config.enabled else None
    with private_inductor_dir(os.environ) if config is not None else contextlib.nullcontext():
        _run_job(script, args, config, program=program)


def _run_job(script: Path, args: Sequence[str], config: TrainingCompilerConfig | None, *, program: bool) -> None:
    command = torchrun_command(str(script), args, os.environ)
    flight_recorder.switch_on(os.environ)
    job_cache = configure(config, os.environ) if config is not None else None
    if command is not None:
        if job_cache is not None:
            job_cache.export(os.environ)
        try:
            _run_ranks(command, processes_per_host(os.environ))
        finally:
            if job_cache is not None:
                job_cache.remove_private_dir()
        return
    watch = _JobWatch.start(config, os.environ) if program else None
    session = None
    outcome = "failed"
    try:
        session = open_session(config, os.environ, job_cache) if config is not None else None
        _run_script(script, args, keep_main=program)
        outcome = "finished"
    except SystemExit as error:
        outcome = "finished" if error.code in (None, 0) else "failed"
        raise
    finally:
        _end_script(watch, session.close if session is not None else None, outcome)


def _end_script(watch: _JobWatch | None, close: Callable[[str], object] | None, outcome: str) -> None:
    """The script has ended with ``outcome``: start the exit deadline, close the session with it
    (``close``, the session's: report, cache save), then record the outcome (from here on, what
    happens to the process happens at exit)."""
    if watch is not None:
        watch.script_ended(outcome)
    try:
        if close is not None:
            close(outcome)  # the report's fallback_reason for a script that failed early
    finally:
        if watch is not None:
            watch.dog.record_outcome(outcome)


class _JobWatch:
    """The job process's watchdog and, under torchrun, its view of the other ranks."""

    def __init__(self, dog: watchdog.Watchdog, peers: PeerWatch | None) -> None:
        self.dog, self.peers = dog, peers

    @classmethod
    def start(cls, config: TrainingCompilerConfig | None, environ: Mapping[str, str]) -> _JobWatch:
        grace_s = watchdog.grace_seconds(config.hang_grace_s if config is not None else None, environ)
        label = rank_label(environ) or environ.get(contract.ENV_CURRENT_HOST) or "the training process"
        dog = watchdog.Watchdog.start(label=label, grace_s=grace_s, environ=environ)
        peers = PeerWatch.for_rank(environ, label, dog.peer_ended, poll_seconds(grace_s))
        return cls(dog, peers.start() if peers is not None else None)

    def script_ended(self, outcome: str) -> None:
        if self.peers is not None:
            self.peers.stop()  # joined: no store call of ours is in flight when the interpreter shuts down
            self.peers.announce(outcome)
        self.dog.script_ended(outcome)


def _main_module(script: Path) -> types.ModuleType:
    """A fresh ``__main__`` module for ``script``, as ``python script.py`` makes it."""
    module = types.ModuleType("__main__")
    module.__file__ = str(script)
    module.__cached__ = None
    module.__loader__ = importlib.machinery.SourceFileLoader("__main__", str(script))
    module.__package__ = None
    module.__spec__ = None
    return module


def _run_script(script: Path, args: Sequence[str], *, keep_main: bool) -> None:
    """Run the user's script as ``__main__`` in this process; write the failure file when it fails.

    Args:
        keep_main: leave the script's module as ``sys.modules["__main__"]`` (its globals then live
            until the interpreter shuts down); else put the caller's back.
    """
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    with io.open_code(str(script)) as handle:
        code = compile(handle.read(), str(script), "exec", dont_inherit=True)
    module = _main_module(script)
    previous = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    except SystemExit as error:
        if error.code not in (None, 0):
            write_failure(error, os.environ, script)
        raise
    except BaseException as error:
        write_failure(error, os.environ, script)
        raise
    finally:
        if not keep_main and previous is not None:
            sys.modules["__main__"] = previous


def _run_ranks(command: Sequence[str], processes: int = 1) -> None:
    """Run torchrun and exit as the job should: non-zero when torchrun or any rank failed.

    A rank that raised has written ``output/failure`` (first writer wins); a torchrun that exits 0
    while a failure file exists is still a failure. When torchrun fails though each of this host's
    ``processes`` ranks finished its script and none wrote a failure, a rank died at exit: logged as
    exactly that, and the host succeeds (the training and the model are complete).
    """
    logger.info("Launching torchrun: %s", " ".join(command))
    state_dir = scratch.make_temp_dir("sagemaker-tc-ranks-", os.environ)
    try:
        env = {**os.environ, contract.ENV_RANK_STATE_DIR: str(state_dir)}
        env.setdefault(contract.ENV_TORCHRUN_LOG_DIR, str(state_dir / "torchrun"))  # removed with state_dir
        exit_code = subprocess.run(command, env=env, check=False).returncode
        endings = watchdog.rank_endings(state_dir)
    finally:
        scratch.remove_temp_dir(state_dir)
    failure = Path(os.environ.get(contract.ENV_OUTPUT_DIR, ".")) / "failure"
    host = os.environ.get(contract.ENV_CURRENT_HOST, "host")
    if exit_code == 0 and failure.exists():
        logger.error("torchrun exited 0 but a rank reported a failure: %s", failure.read_text()[:200])
        exit_code = 1
    if exit_code != 0 and not failure.exists() and processes == sum(e.outcome == "finished" for e in endings):
        _log_died_at_exit(host, exit_code, endings)
        return
    if exit_code != 0:
        if not failure.exists() and os.environ.get(contract.ENV_OUTPUT_DIR):
            crashed = [ending for ending in endings if ending.fatal]
            text = watchdog.crash_reason(crashed[0].label, crashed[0]) if crashed else None
            failure.write_text(text or f"{host}: torchrun exited with code {exit_code}", encoding="utf-8")
        sys.exit(exit_code)


def _log_died_at_exit(host: str, exit_code: int, endings: list[watchdog.RankEnding]) -> None:
    died = [ending for ending in endings if ending.fatal]
    who = ", ".join(f"{ending.label} ({ending.fatal})" for ending in died) or f"a rank of {host}"
    logger.warning(
        "RANK DIED AT EXIT: %s finished its script, then died at exit (torchrun exited with code %d). Every "
        "rank of this host had finished its script: training is complete and the model and output are kept, so "
        "this host does not fail the job. The crash is in the process's teardown, after the script; see the "
        "troubleshooting page ('died at exit').",
        who,
        exit_code,
    )
    for ending in died:
        logger.warning("Python stack of %s at the crash:\n%s", ending.label, ending.stack)


def main() -> None:
    """Entry of the injected ``sagemaker_tc_launcher.py``: the user's entry point comes from the
    settings, the arguments from the command line (the toolkit's ``--name value`` hyperparameters).

    Raises:
        LauncherError: the settings name no entry point.
    """
    setup_logging()
    try:
        settings = contract.settings_from_environment(os.environ)
        if settings is None or not settings.entry_point:
            raise LauncherError(
                f"no entry point: {contract.ENV_FRAMEWORK_PARAMS} carries no {contract.HP_SETTINGS} with an "
                "entry_point (run the launcher through a sagemaker_tc estimator, or use `sagemaker-tc launch SCRIPT`)"
            )
    except Exception as error:
        write_failure(error, os.environ)
        raise
    run(settings.entry_point, sys.argv[1:], program=True)
