"""The launcher's own parts: the Trainer hook installed on import, its failures in output/failure, the watchdog."""

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from unittest import mock

import pytest

from sagemaker_tc import TrainingCompilerConfig, TrainingJobFailedError, contract
from sagemaker_tc.container import launcher, watchdog
from sagemaker_tc.container.post_import import when_imported
from sagemaker_tc.sdk.local import process as local_process


def settings_env(config: TrainingCompilerConfig) -> str:
    return json.dumps(contract.encode(config, entry_point=None)[contract.HP_SETTINGS])


def test_a_plain_torch_job_never_imports_transformers_and_a_trainer_script_gets_the_callback(tmp_path):
    """The Trainer hook waits for the script's own `import transformers.trainer`."""
    plain = tmp_path / "plain.py"
    plain.write_text(
        "import sys, torch\n"
        "from sagemaker_tc.compiler.session import current_session\n"
        "model = torch.nn.Linear(4, 2)\n"
        "model(torch.randn(3, 4)).sum().backward()\n"
        "assert current_session() is not None\n"
        "print('PLAIN', sorted(m for m in ('transformers', 'accelerate') if m in sys.modules))\n"
    )
    trainer = tmp_path / "trainer.py"
    trainer.write_text(
        "import transformers.trainer as t\n"
        "print('TRAINER', [type(c).__name__ for c in t.DEFAULT_CALLBACKS if 'sagemaker_tc' in type(c).__module__])\n"
    )
    code = textwrap.dedent(
        f"""
        import sys
        from sagemaker_tc.container import launcher
        launcher.run({str(plain)!r}, [])
        launcher.run({str(trainer)!r}, [])
        import transformers.trainer as t
        print('AFTER', [c for c in t.DEFAULT_CALLBACKS if 'sagemaker_tc' in type(c).__module__])
        """
    )
    env = {
        **os.environ,
        contract.ENV_SETTINGS: settings_env(TrainingCompilerConfig(backend="eager")),
        contract.ENV_OUTPUT_DATA_DIR: str(tmp_path / "data"),  # where the sessions' reports go
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    assert "PLAIN []" in out, out
    assert "TRAINER ['CompilerReportCallback']" in out, out
    assert "AFTER []" in out, out  # the session's close took it out again


def launch_as_program(tmp_path, script, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``script`` as a job's process does: the injected launcher's ``main()`` is the program."""
    env = {
        **os.environ,
        contract.ENV_SETTINGS: json.dumps(
            contract.encode(TrainingCompilerConfig(backend="eager"), entry_point=str(script))[contract.HP_SETTINGS]
        ),
        contract.ENV_OUTPUT_DIR: str(tmp_path / "output"),
        contract.ENV_OUTPUT_DATA_DIR: str(tmp_path / "output" / "data"),
    }
    env.pop(contract.ENV_FRAMEWORK_PARAMS, None)
    code = "from sagemaker_tc.container.launcher import main; main()"  # what sagemaker_tc_launcher.py runs
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def test_the_scripts_globals_live_until_interpreter_shutdown_after_the_report(tmp_path):
    """The root cause of issue 14's hang: the launcher freed the script's globals (a DDP model, and with it
    gloo's process group) as soon as the script returned, with the GIL held. As the process's program, the
    launcher now leaves them to the interpreter's shutdown, as `python train.py` does, after its report."""
    # The model's class lives in a module of its own, so the script's globals are in no reference cycle:
    # like a plain DDP script's, they are freed the moment nothing holds them.
    (tmp_path / "model_lib.py").write_text(
        "import json, os, sys\n"
        "class Model:\n"
        "    def __del__(self):\n"
        "        report = os.path.join(os.environ['SM_OUTPUT_DATA_DIR'], 'compiler', 'report.json')\n"
        "        seen = {'finalizing': sys.is_finalizing(), 'report': os.path.exists(report)}\n"
        "        print('TEARDOWN', json.dumps(seen), flush=True)\n"
    )
    script = tmp_path / "train.py"
    script.write_text("from model_lib import Model\nmodel = Model()\n")
    done = launch_as_program(tmp_path, script)
    assert done.returncode == 0, done
    line = next(line for line in done.stdout.splitlines() if line.startswith("TEARDOWN"))
    assert json.loads(line.split(" ", 1)[1]) == {"finalizing": True, "report": True}


# What gloo's process group does when the last reference to it (a DDP model's) goes: its C++ destructor joins
# the worker threads while holding the GIL, and a worker that is finishing a piece of work needs the GIL to free
# the work's tensors. Here the same thing without the network's timing, so it happens every time: the
# object's finalizer starts a native thread that takes the GIL (a ctypes callback) and joins it with the GIL
# held (PyDLL). In its own module, so the script's globals are in no reference cycle, as a plain DDP script's.
GIL_JOIN_LIB = """
import ctypes, sys
libc = ctypes.PyDLL(None)  # its calls keep the GIL, as a C++ destructor does
@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
def worker(_arg):  # ctypes takes the GIL before this runs: gloo's worker in gil_scoped_acquire
    return None
class ProcessGroupLike:
    def __del__(self):
        thread = ctypes.c_ulong()
        libc.pthread_create(ctypes.byref(thread), None, worker, None)
        libc.pthread_join(thread, None)
        print("JOINED finalizing=%s" % sys.is_finalizing(), flush=True)
"""


def test_a_script_whose_teardown_joins_a_thread_that_needs_the_gil_exits_as_under_python(tmp_path):
    """Issue 14's hang, made deterministic. Under `python train.py` the object is freed at interpreter shutdown,
    where a thread that asks for the GIL is let go, so the join returns; the launcher on main freed it when
    `runpy.run_path` returned, with the GIL held and not finalizing: the join waited for ever."""
    (tmp_path / "gil_join_lib.py").write_text(GIL_JOIN_LIB)
    script = tmp_path / "train.py"
    script.write_text("from gil_join_lib import ProcessGroupLike\ngroup = ProcessGroupLike()\n")
    try:
        plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.skip("plain python hangs on this script here (a Python that hangs threads asking for the GIL at exit)")
    assert plain.returncode == 0 and "JOINED finalizing=True" in plain.stdout, plain
    try:
        launched = launch_as_program(tmp_path, script, timeout=120)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the launcher hung where `python train.py` exits: {hung.stdout!r}")
    assert launched.returncode == 0 and "JOINED finalizing=True" in launched.stdout, launched


def test_a_post_import_hook_runs_after_the_module_once_and_can_be_taken_out(tmp_path, monkeypatch):
    (tmp_path / "tc_hooked_a.py").write_text("VALUE = 1\n")
    (tmp_path / "tc_hooked_b.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    when_imported("tc_hooked_a", lambda module: seen.append((module.__name__, module.VALUE)))
    remove_b = when_imported("tc_hooked_b", seen.append)
    assert seen == []
    remove_b()

    import tc_hooked_a
    import tc_hooked_b

    assert seen == [("tc_hooked_a", 1)]
    assert type(tc_hooked_a.__loader__).__name__ == "SourceFileLoader" and tc_hooked_b.VALUE == 2
    when_imported("tc_hooked_b", lambda module: seen.append(module.VALUE))  # imported already: at once
    assert seen == [("tc_hooked_a", 1), 2]
    for name in ("tc_hooked_a", "tc_hooked_b"):
        monkeypatch.delitem(sys.modules, name)


def test_a_launcher_setup_step_that_raises_writes_its_type_and_message(tmp_path, monkeypatch):
    """Debug mode makes the compiler folder; a file in its place makes that setup step raise."""
    monkeypatch.setenv(contract.ENV_SETTINGS, settings_env(TrainingCompilerConfig(debug=True)))
    monkeypatch.delenv(contract.ENV_FRAMEWORK_PARAMS, raising=False)
    monkeypatch.delenv(contract.ENV_CONFIGURED, raising=False)
    for name in (contract.ENV_TORCH_LOGS, contract.ENV_TORCH_TRACE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(contract.ENV_OUTPUT_DIR, str(tmp_path / "output"))
    monkeypatch.setenv(contract.ENV_OUTPUT_DATA_DIR, str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "compiler").write_text("not a folder")
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script must not run')\n")

    # The launcher exports its settings (SM_TRAINING_COMPILER_CONFIGURED, TORCH_LOGS, TORCH_TRACE) into
    # os.environ; monkeypatch.delenv of an unset name records nothing to undo, so put it all back here.
    with mock.patch.dict(os.environ), pytest.raises(FileExistsError):
        launcher.run(str(script), [])

    failure = (tmp_path / "output" / "failure").read_text()
    assert failure.startswith("FileExistsError: [Errno 17] File exists: "), failure
    assert str(tmp_path / "data" / "compiler") in failure.splitlines()[0]


def test_a_bad_watchdog_setting_fails_the_job_with_its_message(make, tmp_path):
    """The estimators refuse a bad value when built (tests/test_bad_input_round3.py); a job whose request
    carries one anyway (an SDK v2 estimator with our image, say) fails with the launcher's message."""
    job = make()
    job.environment[contract.ENV_HANG_GRACE] = "soon"

    with pytest.raises(TrainingJobFailedError) as raised:
        job.fit()

    assert raised.value.failure_reason.startswith(
        "LauncherError: SM_TC_HANG_GRACE_S='soon' is not a grace period: give a positive number of seconds"
    ), raised.value.failure_reason


def test_the_grace_period_comes_from_the_config_then_the_environment():
    assert watchdog.grace_seconds(None, {}) == watchdog.SAGEMAKER_GRACE_S == 600
    assert watchdog.grace_seconds(None, {contract.ENV_HANG_GRACE: "120"}) == 120
    assert watchdog.grace_seconds(30, {contract.ENV_HANG_GRACE: "120"}) == 30
    for bad in ("0", "-1", "inf", "nan"):
        with pytest.raises(launcher.LauncherError, match="is not a grace period"):
            watchdog.grace_seconds(None, {contract.ENV_HANG_GRACE: bad})


def test_local_process_jobs_get_a_shorter_grace_period_unless_the_job_sets_one(monkeypatch):
    """SageMaker's default is 600 s; a job on this machine waits 120 s, unless its environment says otherwise."""
    monkeypatch.delenv(contract.ENV_HANG_GRACE, raising=False)
    request = SimpleNamespace(training_job_name="grace", environment={})
    assert local_process._job_environment(request)[contract.ENV_HANG_GRACE] == "120"
    request.environment = {contract.ENV_HANG_GRACE: "30"}
    assert local_process._job_environment(request)[contract.ENV_HANG_GRACE] == "30"


def test_a_stack_report_lists_the_main_thread_first():
    text = (
        "Thread 0x00007f0000000002 (most recent call first):\n"
        '  File "worker.py", line 3 in loop\n'
        "\n"
        "Current thread 0x00007f0000000001 (most recent call first):\n"
        '  File "train.py", line 9 in <module>\n'
        "\n"
        "Extension modules: numpy.core._multiarray_umath (total: 1)\n"
    )
    ordered = watchdog.main_thread_first(text, 0x7F0000000001)
    assert ordered.splitlines() == [
        "Current thread 0x00007f0000000001 (most recent call first):",
        '  File "train.py", line 9 in <module>',
        "Thread 0x00007f0000000002 (most recent call first):",
        '  File "worker.py", line 3 in loop',
    ]


# A job process, as the launcher makes it, in its own Python: a watchdog, then what the script does.
PROCESS = """
import os, sys, threading
from sagemaker_tc.container.watchdog import Watchdog
dog = Watchdog.start(label="algo-1", grace_s=float(sys.argv[1]), environ=os.environ)
{body}
"""


def run_job_process(tmp_path, body: str, grace_s: float = 2.0) -> tuple[subprocess.CompletedProcess, str | None]:
    env = {**os.environ, contract.ENV_OUTPUT_DIR: str(tmp_path / "output")}
    env.pop(contract.ENV_RANK_STATE_DIR, None)
    code = PROCESS.format(body=textwrap.dedent(body))
    # run() returns once the output pipes close: after the process and its watcher have both ended.
    done = subprocess.run([sys.executable, "-c", code, str(grace_s)], env=env, capture_output=True, text=True)
    failure = tmp_path / "output" / "failure"
    return done, failure.read_text() if failure.exists() else None


def test_the_watchdog_stops_a_process_that_does_not_exit_after_its_script(tmp_path):
    done, failure = run_job_process(
        tmp_path,
        """
        def stuck_in_teardown():
            threading.Event().wait()
        dog.script_ended("finished")
        stuck_in_teardown()
        """,
    )
    assert done.returncode == -9, done.stderr
    assert failure.startswith(
        "algo-1: StuckRankError: its script finished and the process did not exit within 2 s; sagemaker-tc's "
        "watchdog stopped it (hang_grace_s=2). Its Python stack (main thread first):\n"
    ), failure
    # The main thread's frames, innermost first, within the 1024 characters SageMaker keeps.
    assert "in stuck_in_teardown" in failure[:1024], failure


def test_the_watchdog_stops_a_process_idle_after_another_rank_ended(tmp_path):
    done, failure = run_job_process(tmp_path, 'dog.peer_ended("algo-2 rank 1 failed its script")\n'
                                    "threading.Event().wait()\n")  # fmt: skip
    assert done.returncode == -9, done.stderr
    assert failure.startswith(
        "algo-1: StuckRankError: it made no progress (less than 1 CPU second) for 2 s after algo-2 rank 1 failed "
        "its script"
    ), failure


def test_a_process_that_crashes_at_exit_after_its_script_is_reported_as_that(tmp_path):
    done, failure = run_job_process(
        tmp_path, 'dog.script_ended("finished"); dog.record_outcome("finished"); os.abort()\n', grace_s=60
    )
    assert done.returncode == -6
    # The watcher, which shares the process's output, has ended too: the reason is there.
    assert failure.startswith(
        "algo-1: its script finished, then the process died at exit (Fatal Python error: Aborted): training had ended"
    ), failure


FLIGHT_RECORDER_NAMES = (
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
)


def run_script_seeing_flight_recorder(tmp_path, monkeypatch, **environ) -> dict:
    """Run a script through the launcher (no compiler settings) with ``environ``; what it saw."""
    for name in (*FLIGHT_RECORDER_NAMES, contract.ENV_SETTINGS, contract.ENV_FRAMEWORK_PARAMS, contract.ENV_NUM_GPUS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(contract.ENV_LOCAL_RANK, raising=False)
    monkeypatch.setenv(contract.ENV_OUTPUT_DATA_DIR, str(tmp_path / "data"))
    seen = tmp_path / "seen.json"
    script = tmp_path / "train.py"
    names = list(FLIGHT_RECORDER_NAMES)
    script.write_text(
        f"import json, os\njson.dump({{n: os.environ.get(n) for n in {names!r}}}, open({str(seen)!r}, 'w'))\n"
    )
    with mock.patch.dict(os.environ, environ):  # the launcher sets os.environ: put it back
        launcher.run(str(script), [])
    return json.loads(seen.read_text())


def test_a_cpu_job_gets_no_flight_recorder_variables(tmp_path, monkeypatch):
    assert set(run_script_seeing_flight_recorder(tmp_path, monkeypatch).values()) == {None}
    assert set(run_script_seeing_flight_recorder(tmp_path, monkeypatch, SM_NUM_GPUS="0").values()) == {None}


def test_a_gpu_job_gets_torchs_flight_recorder_with_its_dump_beside_our_evidence(tmp_path, monkeypatch):
    seen = run_script_seeing_flight_recorder(tmp_path, monkeypatch, SM_NUM_GPUS="8")
    prefix = str(tmp_path / "data" / "flight_recorder" / "nccl_trace_rank_")
    assert seen == {
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": prefix,
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix,
    }
    assert (tmp_path / "data" / "flight_recorder").is_dir()  # torch writes its files there, it makes no folder


def test_the_users_flight_recorder_values_are_kept_with_their_pair(tmp_path, monkeypatch):
    """A user who set one name of a pair (torch 2.9+ reads the new name first) keeps it, and the
    other name of that pair is not set behind their back."""
    seen = run_script_seeing_flight_recorder(
        tmp_path,
        monkeypatch,
        SM_NUM_GPUS="1",
        TORCH_NCCL_TRACE_BUFFER_SIZE="0",
        TORCH_NCCL_DUMP_ON_TIMEOUT="0",
        TORCH_FR_DUMP_TEMP_FILE="/mine/trace_",
    )
    assert seen == {
        "TORCH_FR_BUFFER_SIZE": None,
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "0",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "0",
        "TORCH_FR_DUMP_TEMP_FILE": "/mine/trace_",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": None,
    }
