"""The in-container launcher: find the compiler settings, configure the process, run the user's script.

The SDK ships this as ``sagemaker_tc_launcher.py`` and names it the job's ``sagemaker_program``, so
the stock sagemaker-training toolkit runs it (``python -- sagemaker_tc_launcher.py --hp value ...``)
with no custom image. The launcher then:

1. reads the settings from ``SM_FRAMEWORK_PARAMS`` (or ``SM_TRAINING_COMPILER_SETTINGS``, for
   launchers that bypass the toolkit);
2. logs SMTC's lines (``Found configuration for Training Compiler``, ``Configuring SM Training
   Compiler...``, and ``Training Compiler set to debug mode``);
3. sets the compiler's environment variables, never overwriting one the user set (it warns);
4. with ``cache=...``, restores the compile cache into a fresh Inductor folder
   (:mod:`sagemaker_tc.compiler.job_cache`), once per host, before any rank starts;
5. opens the job's compiler session (:class:`~sagemaker_tc.compiler.session.CompilerSession`),
   adds the Hugging Face ``Trainer`` callback that compiles and measures for it, then runs the
   user's entry point in this process (``runpy``, as ``__main__``, with the same arguments), so the
   runtime measures what runs (distributed jobs: torchrun runs the launcher once per rank);
6. closes the session, also when the script fails: global rank 0 saves the compile cache, writes
   ``$SM_OUTPUT_DATA_DIR/compiler/report.json`` (the job's one writer) and prints the metric lines;
7. when the script raises, writes ``$SM_OUTPUT_DIR/failure`` with the exception's type and message
   first (SageMaker keeps the first 1024 characters as the job's FailureReason; the toolkit only
   writes the file when it does not exist, and without a framework module it captures no error
   text), then lets the exception propagate so the process exits non-zero.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import runpy
import subprocess
import sys
import traceback
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

from sagemaker_tc import contract
from sagemaker_tc.compiler.job_cache import JobCache
from sagemaker_tc.compiler.session import CompilerSession, compiler_dir
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.container.distributed import rank_label, torchrun_command
from sagemaker_tc.errors import LauncherError, SagemakerTCError

logger = logging.getLogger("sagemaker_tc.launcher")

# SMTC's log lines, which users grep for (SMTC docs FAQ "How do I know it is working?").
LOG_FOUND = "Found configuration for Training Compiler"
LOG_CONFIGURING = "Configuring SM Training Compiler..."
LOG_DEBUG = "Training Compiler set to debug mode"
MAX_TRACEBACK_CHARS = 3000


def _setup_logging() -> None:
    package_logger = logging.getLogger("sagemaker_tc")
    if not package_logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s sagemaker-tc %(levelname)s %(message)s"))
        package_logger.addHandler(handler)
        package_logger.setLevel(logging.INFO)
        package_logger.propagate = False


def setup_logging() -> None:
    """Send the package's log lines to stdout, once per process, as a job's launcher does (for drivers
    that run before it, such as :mod:`sagemaker_tc.container.modeltrainer`)."""
    _setup_logging()


def compiler_environment(config: TrainingCompilerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables the launcher wants for ``config`` (before the user's win).

    SMTC's marker ``SM_TRAINING_COMPILER_CONFIGURED=1``; in debug mode ``TORCH_LOGS`` (graph breaks,
    recompiles) and ``TORCH_TRACE`` (structured compile logs, for tlparse) under the compiler output
    folder. Compilation itself is done in process by the integrations, not through variables.
    """
    env = {contract.ENV_CONFIGURED: "1"}
    if config.debug:
        env[contract.ENV_TORCH_LOGS] = "graph_breaks,recompiles"
        env[contract.ENV_TORCH_TRACE] = str(compiler_dir(environ) / "torch_trace")
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
            compiler_dir(environ).mkdir(parents=True, exist_ok=True)
    if not (config.cache and config.compiles):
        return None
    return JobCache.inherited(config, environ) if inherited else JobCache.open(config, environ)


def open_session(
    config: TrainingCompilerConfig, environ: MutableMapping[str, str], job_cache: JobCache | None
) -> CompilerSession:
    """The job process's compiler session, open, with the Hugging Face ``Trainer`` callback
    installed for it (when transformers is)."""
    session = CompilerSession(config, environ=environ, writes_report=True, job_cache=job_cache).open()
    if importlib.util.find_spec("torch") is not None:
        from sagemaker_tc.integrations import transformers as hf_integration

        hf_integration.install(session)
    return session


def failure_reason(error: BaseException, script: Path | None = None) -> str:
    """``"<Type>: <message>"`` first, then the traceback from the user's ``script`` on (the launcher's
    and runpy's frames are dropped so the 1024-character FailureReason keeps the user's own)."""
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


def run(entry_point: str, args: Sequence[str]) -> None:
    """Configure the compiler from the environment's settings and run ``entry_point`` with ``args``:
    settings -> open the session -> run the script -> close the session (report, cache save).

    Raises:
        LauncherError: the entry point does not exist.
        ConfigError: the settings in the environment are malformed.
        BaseException: whatever the user's script raises (including ``SystemExit``).
    """
    _setup_logging()
    try:
        settings = contract.settings_from_environment(os.environ)
        script = _resolve_script(entry_point)
        command = torchrun_command(str(script), args, os.environ)
    except SagemakerTCError as error:
        write_failure(error, os.environ)
        raise
    config = settings.config if settings is not None and settings.config.enabled else None
    job_cache = configure(config, os.environ) if config is not None else None
    if command is not None:
        if job_cache is not None:
            job_cache.export(os.environ)
        try:
            _run_ranks(command)
        finally:
            if job_cache is not None:
                job_cache.remove_private_dir()
        return
    session = open_session(config, os.environ, job_cache) if config is not None else None
    try:
        _run_script(script, args)
    finally:
        if session is not None:
            session.close()


def _run_script(script: Path, args: Sequence[str]) -> None:
    """Run the user's script as ``__main__`` in this process; write the failure file when it fails."""
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as error:
        if error.code not in (None, 0):
            write_failure(error, os.environ, script)
        raise
    except BaseException as error:
        write_failure(error, os.environ, script)
        raise


def _run_ranks(command: Sequence[str]) -> None:
    """Run torchrun and exit as the job should: non-zero when torchrun or any rank failed.

    A rank that raised has written ``output/failure`` (first writer wins); a torchrun that exits 0
    while a failure file exists is still a failure.
    """
    logger.info("Launching torchrun: %s", " ".join(command))
    exit_code = subprocess.run(command, check=False).returncode
    failure = Path(os.environ.get(contract.ENV_OUTPUT_DIR, ".")) / "failure"
    if exit_code == 0 and failure.exists():
        logger.error("torchrun exited 0 but a rank reported a failure: %s", failure.read_text()[:200])
        exit_code = 1
    if exit_code != 0:
        if not failure.exists() and os.environ.get(contract.ENV_OUTPUT_DIR):
            host = os.environ.get(contract.ENV_CURRENT_HOST, "host")
            failure.write_text(f"{host}: torchrun exited with code {exit_code}", encoding="utf-8")
        sys.exit(exit_code)


def main() -> None:
    """Entry of the injected ``sagemaker_tc_launcher.py``: the user's entry point comes from the
    settings, the arguments from the command line (the toolkit's ``--name value`` hyperparameters).

    Raises:
        LauncherError: the settings name no entry point.
    """
    try:
        settings = contract.settings_from_environment(os.environ)
        if settings is None or not settings.entry_point:
            raise LauncherError(
                f"no entry point: {contract.ENV_FRAMEWORK_PARAMS} carries no {contract.HP_SETTINGS} with an "
                "entry_point (run the launcher through a sagemaker_tc estimator, or use `sagemaker-tc launch SCRIPT`)"
            )
    except SagemakerTCError as error:
        write_failure(error, os.environ)
        raise
    run(settings.entry_point, sys.argv[1:])
