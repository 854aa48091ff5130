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
   (:mod:`sagemaker_tc.compiler.cache`), once per host, before any rank starts;
5. adds the Hugging Face ``Trainer`` callback that compiles and measures, then runs the user's
   entry point in this process (``runpy``, as ``__main__``, with the same arguments), so the
   runtime measures what runs (distributed jobs: torchrun runs the launcher once per rank);
6. saves the compile cache (first host, after every rank), writes
   ``$SM_OUTPUT_DATA_DIR/compiler/report.json`` (rank 0) and prints the metric lines, also when
   the script fails;
7. when the script raises, writes ``$SM_OUTPUT_DIR/failure`` with the exception's type and message
   first (SageMaker keeps the first 1024 characters as the job's FailureReason; the toolkit only
   writes the file when it does not exist, and without a framework module it captures no error
   text), then lets the exception propagate so the process exits non-zero.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

from sagemaker_tc import contract
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.container.distributed import rank_label, torchrun_command
from sagemaker_tc.errors import LauncherError, SagemakerTCError

logger = logging.getLogger("sagemaker_tc.launcher")

# SMTC's log lines, which users grep for (SMTC docs FAQ "How do I know it is working?").
LOG_FOUND = "Found configuration for Training Compiler"
LOG_CONFIGURING = "Configuring SM Training Compiler..."
LOG_DEBUG = "Training Compiler set to debug mode"
MAX_TRACEBACK_CHARS = 3000
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
ENV_CACHE = "SM_TC_CACHE"  # the cache outcome (JSON), passed from the launcher to its ranks


def _setup_logging() -> None:
    package_logger = logging.getLogger("sagemaker_tc")
    if not package_logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s sagemaker-tc %(levelname)s %(message)s"))
        package_logger.addHandler(handler)
        package_logger.setLevel(logging.INFO)
        package_logger.propagate = False


def compiler_dir(environ: Mapping[str, str]) -> Path:
    """``$SM_OUTPUT_DATA_DIR/compiler`` (SMTC's debug path), or ``./compiler`` outside a job."""
    base = environ.get(contract.ENV_OUTPUT_DATA_DIR)
    return (Path(base) if base else Path.cwd()) / contract.COMPILER_OUTPUT_DIRNAME


def compiler_environment(config: TrainingCompilerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables the launcher wants for ``config`` (before the user's win).

    SMTC's marker ``SM_TRAINING_COMPILER_CONFIGURED=1``; in debug mode ``TORCH_LOGS`` (graph breaks,
    recompiles) and ``TORCH_TRACE`` (structured compile logs, for tlparse) under the compiler output
    folder. Compilation itself is done in process by the integrations, not through variables.
    """
    env = {contract.ENV_CONFIGURED: "1"}
    if config.debug:
        env["TORCH_LOGS"] = "graph_breaks,recompiles"
        env["TORCH_TRACE"] = str(compiler_dir(environ) / "torch_trace")
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


def _finish(config: TrainingCompilerConfig) -> None:
    """Write the report (and the debug files) and print the metric lines; never raises (the
    script's outcome matters more)."""
    from sagemaker_tc.compiler import debug
    from sagemaker_tc.compiler.recorder import RECORDER, dynamo_stats, inductor_cache_counters, summarize
    from sagemaker_tc.compiler.report import build_report, print_metric_lines, write_report
    from sagemaker_tc.compiler.runtime import RUNTIME
    from sagemaker_tc.compiler.shapes import STATS

    if os.environ.get("RANK", "0") != "0":
        return  # one report per job, from rank 0
    try:
        plan = RECORDER.plan
        regional = (
            getattr(plan, "regional", None) if plan is not None else (config.regional if config.compiles else None)
        )
        attached = RUNTIME.config is not None
        variant = RUNTIME.final_label() if attached else None
        fallback_reason = RUNTIME.fallback_reason
        ran_final = any(step.variant == variant for step in RECORDER.steps)
        if attached and fallback_reason is None and variant.startswith("compiled") and not ran_final:
            fallback_reason = (
                f"no training step ran compiled: the job's {len(RECORDER.steps)} step(s) all ran before the switch "
                f"to compiled (baseline_steps={config.baseline_steps})"
            )
        batch_tuning = RECORDER.batch_tuning
        if config.batch_size is not None and batch_tuning is None:
            note = (
                "nothing in the script applied it: a Hugging Face Trainer applies it when it is built; a plain "
                "PyTorch loop calls sagemaker_tc.tune_batch_size"
            )
            logger.warning("BATCH SIZE NOT TUNED: batch_size=%r was set, but %s", config.batch_size, note)
            batch_tuning = {"requested": config.batch_size, "applied": False, "note": note}
        report = build_report(
            config=config,
            steps=summarize(RECORDER.steps, variant),
            dynamo=dynamo_stats(),
            integration=RECORDER.integration,
            regional=regional,
            fallback_reason=fallback_reason,
            variant=variant,
            trials=RUNTIME.trials() if attached else None,
            eager_step_seconds=RUNTIME.eager_step_seconds() if attached else None,
            cache=_cache_state(os.environ),
            shapes=STATS.summary(),
            recompile_limit_hits=RECORDER.recompile_limit_hits,
            training_compiles=RECORDER.training_compiles,
            inductor_cache=inductor_cache_counters(),
            attention=RUNTIME.attention,
            batch_tuning=batch_tuning,
        )
        folder = compiler_dir(os.environ)
        if config.debug:
            report["debug_files"] = debug.write(folder)
        path = write_report(report, folder)
        logger.info(
            "Compiler report written to %s: compiled=%s variant=%s compile_seconds=%s steady_step_seconds=%s "
            "eager_step_seconds=%s break_even_steps=%s cache=%s",
            path,
            report["compiled"],
            report["variant"],
            _fmt(report["compile_seconds"]),
            _fmt(report["steady_step_seconds"]),
            _fmt(report["eager_step_seconds"]),
            report["break_even_steps"],
            report["cache"]["state"],
        )
        print_metric_lines(report)
    except Exception:  # a broken report must not hide the job's own result
        logger.exception("Could not write the compiler report")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _cache_state(environ: Mapping[str, str]) -> dict:
    """The cache outcome the launcher put in ``SM_TC_CACHE`` (``{"state": "disabled"}`` without one)."""
    try:
        return json.loads(environ[ENV_CACHE])
    except (KeyError, ValueError):
        return {"state": "disabled"}


def _open_cache(config: TrainingCompilerConfig, environ: MutableMapping[str, str]):
    """Point Inductor at a folder of this job's and restore the cache entry into it.

    The folder is ``TORCHINDUCTOR_CACHE_DIR`` when the user set it to a folder of their own, else a
    fresh private folder, so a warm start comes from the cache, not from what an earlier job left
    in torch's default folder on this host (importing transformers writes that default into
    ``os.environ``, so a ``local_process`` job can inherit it without anyone choosing it). Returns the
    :class:`~sagemaker_tc.compiler.cache.CompileCache` and whether the launcher made the folder.
    """
    from sagemaker_tc.compiler.cache import CompileCache

    made = environ.get(INDUCTOR_CACHE_ENV) in (None, "", _default_inductor_dir())
    if made:
        environ[INDUCTOR_CACHE_ENV] = tempfile.mkdtemp(prefix="sagemaker-tc-inductor-")
    cache = CompileCache(config.cache, Path(environ[INDUCTOR_CACHE_ENV]))
    outcome = cache.load()
    environ[ENV_CACHE] = json.dumps(outcome.to_dict())
    return cache, made


def _default_inductor_dir() -> str:
    """torch's default ``TORCHINDUCTOR_CACHE_DIR``: ``<tempdir>/torchinductor_<user>``
    (``torch/_inductor/runtime/cache_dir_utils.py``)."""
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + user)


def _close_cache(cache, made: bool, environ: MutableMapping[str, str]) -> None:
    """Save the cache from the first host (after every rank here has finished), record the outcome
    for the report, and remove the private folder. Never raises."""
    try:
        if _is_first_host(environ):
            saved = cache.save()
            state = _cache_state(environ)
            state["saved"] = saved.state
            state["saved_bytes"] = saved.saved_bytes
            if saved.reason and saved.state != "saved":
                state["save_reason"] = saved.reason
            environ[ENV_CACHE] = json.dumps(state)
    except Exception:
        logger.exception("Could not save the compile cache")
    finally:
        if made:
            shutil.rmtree(environ.get(INDUCTOR_CACHE_ENV, ""), ignore_errors=True)


def _is_first_host(environ: Mapping[str, str]) -> bool:
    try:
        hosts = json.loads(environ.get("SM_HOSTS", "[]"))
    except ValueError:
        hosts = []
    return not hosts or environ.get("SM_CURRENT_HOST", hosts[0]) == hosts[0]


def _patch_report_cache(environ: Mapping[str, str]) -> None:
    """After torchrun, put the saved cache's outcome into the report rank 0 wrote."""
    path = compiler_dir(environ) / contract.REPORT_FILENAME
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        report["cache"] = _cache_state(environ)
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except (OSError, ValueError):
        pass


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
    """Configure the compiler from the environment's settings and run ``entry_point`` with ``args``.

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
    cache = None
    if config is not None:
        logger.info(LOG_FOUND)
        if os.environ.get(contract.ENV_CONFIGURED) == "1":
            logger.info("Training Compiler already configured by a parent process")
        else:
            logger.info(LOG_CONFIGURING)
            applied = apply_environment(compiler_environment(config, os.environ), os.environ)
            logger.info("Compiler settings: %s; environment: %s", config.model_dump(), applied)
            if config.debug:
                logger.info(LOG_DEBUG)
                compiler_dir(os.environ).mkdir(parents=True, exist_ok=True)
            if config.cache and config.compiles:
                cache = _open_cache(config, os.environ)
        if command is None and importlib.util.find_spec("torch") is not None:  # ranks measure, not torchrun's parent
            from sagemaker_tc.integrations import transformers as hf_integration
            from sagemaker_tc.integrations.pytorch import connect_runtime

            connect_runtime()
            if config.debug:
                from sagemaker_tc.compiler import debug

                debug.install()
            hf_integration.install()
    if command is not None:
        try:
            _run_ranks(command)
        finally:
            if cache is not None:
                _close_cache(*cache, os.environ)
                _patch_report_cache(os.environ)
        return
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
    finally:
        if cache is not None:
            _close_cache(*cache, os.environ)
        if config is not None:
            _finish(config)


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
            failure.write_text(
                f"{os.environ.get('SM_CURRENT_HOST', 'host')}: torchrun exited with code {exit_code}", encoding="utf-8"
            )
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
