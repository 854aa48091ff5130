"""Bad inputs and faults, fifth round (issue 43): local jobs and hyperparameters.

A ``local_process`` job lives like a SageMaker container (every process it started ends when its script
exits, on ``stop()``, at ``max_run`` and when the process that called ``fit()`` dies); a full disk loses
no archive; hyperparameters and environments the cloud refuses are refused here too. Real
``local_process`` jobs of tiny scripts, the compiler off."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagemaker_tc import PyTorch, TrainingCompilerConfig, TrainingJobFailedError, contract

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 300  # how long a job may take on a loaded machine (a hang fails)

# Starts a child (sleep) and a daemon (double fork + setsid, stdout closed), writes their PIDs, and
# then does what MODE says: "exit" (ends at once, 0), "wait" (runs until stopped), "ignore" (ignores
# SIGTERM and runs until killed).
SPAWNING_SCRIPT = """
import os, signal, subprocess, sys, time
from pathlib import Path

mode = sys.argv[sys.argv.index("--mode") + 1]
model = Path(os.environ["SM_MODEL_DIR"])
if mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "3600"])
read_end, write_end = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(write_end, str(os.getpid()).encode())
        os.close(write_end)
        os.close(1)
        os.close(2)
        while True:
            time.sleep(0.2)
    os._exit(0)
os.close(write_end)
daemon = os.read(read_end, 32).decode()
os.wait()
(model / "pids").write_text(f"{os.getpid()} {child.pid} {daemon}")
print("spawned", flush=True)
if mode != "exit":
    while True:
        time.sleep(0.1)
"""


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def kill_all(pids) -> None:
    """Test cleanup: SIGKILL whatever of ``pids`` still runs."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def make_estimator(tmp_path: Path, script: str, **arguments) -> PyTorch:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(script)
    kwargs = {
        "instance_type": "local_process",
        "output_path": str(tmp_path / "out"),
        "max_run": 600,
        "compiler_config": TrainingCompilerConfig(enabled=False),
    }
    kwargs.update(arguments)
    return PyTorch("train.py", source_dir=str(code), **kwargs)


def poll(done, what: str, job=None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen" + (f"\n{job.logs()}" if job else "")
        time.sleep(0.1)


def spawned_pids(model_dir: Path) -> list[int]:
    path = model_dir / "pids"
    return [int(pid) for pid in path.read_text().split()] if path.exists() and path.read_text() else []


# -- 1. a job's processes end with it -------------------------------------------------------------


@pytest.mark.slow
def test_a_job_whose_script_exited_ends_and_its_children_with_it(tmp_path):
    job_estimator = make_estimator(tmp_path, SPAWNING_SCRIPT, hyperparameters={"mode": "exit"})
    job_estimator.fit(wait=False)
    job = job_estimator.latest_training_job
    pids: list[int] = []
    try:
        poll(lambda: job.status != "InProgress", "the job's end", job)
        pids = spawned_pids(job.job_dir / "model")
        assert len(pids) == 3, job.logs()
        job.wait(logs=False)  # Completed: the script succeeded
        assert (job.status, job.secondary_status) == ("Completed", "Completed")
        assert [pid for pid in pids if running(pid)] == []
        assert "ending the 2 process(es) it left running" in job.logs()
    finally:
        job.stop(grace_s=0)
        kill_all(pids or spawned_pids(job.job_dir / "model"))


@pytest.mark.slow
def test_stop_ends_a_daemon_the_script_started(tmp_path):
    job_estimator = make_estimator(
        tmp_path, SPAWNING_SCRIPT, hyperparameters={"mode": "wait"}, environment={contract.ENV_STOP_GRACE: "5"}
    )
    job_estimator.fit(wait=False)
    job = job_estimator.latest_training_job
    pids: list[int] = []
    try:
        poll(lambda: len(spawned_pids(job.job_dir / "model")) == 3, "the script's start", job)
        pids = spawned_pids(job.job_dir / "model")
        job.stop()
        job.wait(logs=False)
        assert (job.status, job.secondary_status) == ("Stopped", "Stopped")
        assert [pid for pid in pids if running(pid)] == []
    finally:
        job.stop(grace_s=0)
        kill_all(pids)


@pytest.mark.slow
def test_max_run_ends_a_daemon_the_script_started(tmp_path):
    job_estimator = make_estimator(
        tmp_path,
        SPAWNING_SCRIPT,
        hyperparameters={"mode": "ignore"},
        max_run=8,
        environment={contract.ENV_STOP_GRACE: "1"},
    )
    pids: list[int] = []
    try:
        with pytest.raises(TrainingJobFailedError, match="MaxRuntimeExceeded"):
            job_estimator.fit(logs=False)
        job = job_estimator.latest_training_job
        pids = spawned_pids(job.job_dir / "model")
        assert len(pids) == 3, job.logs()
        assert (job.status, job.secondary_status) == ("Stopped", "MaxRuntimeExceeded")
        assert [pid for pid in pids if running(pid)] == []
    finally:
        kill_all(pids)


CALLER = """
import sys
from sagemaker_tc import PyTorch, TrainingCompilerConfig

PyTorch(
    "train.py",
    source_dir=sys.argv[1],
    instance_type="local_process",
    output_path=sys.argv[2],
    hyperparameters={"mode": "ignore"},
    compiler_config=TrainingCompilerConfig(enabled=False),
    environment={"SM_TC_STOP_GRACE_S": "1"},
).fit(logs=False)
"""


@pytest.mark.slow
def test_a_job_does_not_outlive_the_process_that_called_fit(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(SPAWNING_SCRIPT)
    out = tmp_path / "out"
    staging = tmp_path / "tmp"  # the killed caller cannot remove its staged code: keep it in tmp_path
    staging.mkdir()
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, str(code), str(out)],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "TMPDIR": str(staging),
        },
    )
    pids: list[int] = []
    try:

        def started() -> bool:
            assert caller.poll() is None, "the caller ended before its job started"
            return any(len(spawned_pids(model)) == 3 for model in out.glob("*/opt_ml/model"))

        poll(started, "the script's start")
        pids = next(spawned_pids(model) for model in out.glob("*/opt_ml/model"))
        caller.kill()
        caller.wait()
        poll(lambda: not any(map(running, pids)), "the end of the job's processes")
    finally:
        caller.kill()
        caller.wait()
        kill_all(pids)


# -- 2, 3. a full disk loses no archive and leaves no torn file ----------------------------------

# Raises its own file size limit (the caller's is 1 MiB), trains a little, then writes a 2 MiB file
# into the checkpoint folder or the model folder (--big checkpoint|model).
BIG_FILE_SCRIPT = """
import os, resource, sys
from pathlib import Path

resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
where = sys.argv[sys.argv.index("--big") + 1]
model = Path(os.environ["SM_MODEL_DIR"])
(model / "weights.txt").write_text("trained")
(Path(os.environ["SM_OUTPUT_DATA_DIR"]) / "metrics.txt").write_text("loss 0.1")
folder = model.parent / "checkpoints" if where == "checkpoint" else model
folder.mkdir(exist_ok=True)
(folder / "small.txt").write_text("step 1")
(folder / "step-1.bin").write_bytes(os.urandom(2 << 20))
"""

# Runs a job with a 1 MiB file size limit on this process (the one that writes the archives and
# copies the checkpoints out: a disk that is full for it), then prints what fit() raised and the job.
LIMITED_CALLER = """
import json, resource, sys

resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))
from sagemaker_tc import PyTorch, TrainingCompilerConfig

estimator = PyTorch(
    "train.py",
    instance_type="local_process",
    compiler_config=TrainingCompilerConfig(enabled=False),
    **json.loads(sys.argv[1]),
)
result = {}
try:
    estimator.fit(logs=False)
except Exception as error:
    result["error"], result["message"] = type(error).__name__, str(error)
job = estimator.latest_training_job
if job is not None:
    described = job.describe()
    result["status"], result["reason"] = described["TrainingJobStatus"], described.get("FailureReason")
    result["job_dir"] = str(job.job_dir)
print("RESULT " + json.dumps(result))
"""


def run_limited(tmp_path: Path, big: str, **arguments) -> dict:
    """Run the job of BIG_FILE_SCRIPT under LIMITED_CALLER; returns its result."""
    import json

    if hard_fsize_limit() is not None:
        pytest.skip("this machine caps the file size limit already")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(BIG_FILE_SCRIPT)
    kwargs = {"source_dir": str(code), "output_path": str(tmp_path / "out"), "hyperparameters": {"big": big}}
    kwargs.update(arguments)
    done = subprocess.run(
        [sys.executable, "-c", LIMITED_CALLER, json.dumps(kwargs)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[-1].removeprefix("RESULT "))


def hard_fsize_limit() -> int | None:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def members(archive: Path) -> dict[str, bytes]:
    import tarfile

    with tarfile.open(archive) as tar:
        return {member.name: tar.extractfile(member).read() for member in tar.getmembers() if member.isfile()}


@pytest.mark.slow
def test_a_full_checkpoint_location_loses_no_archive_and_leaves_no_partial_file(tmp_path):
    location = tmp_path / "checkpoints"
    result = run_limited(tmp_path, "checkpoint", checkpoint_s3_uri=str(location))

    assert result["error"] == "CheckpointSyncError", result
    assert f"into the folder {str(location)!r}" in result["message"] and "'step-1.bin'" in result["message"]
    assert "it needs up to 2097152 bytes" in result["message"]
    assert result["status"] == "Failed" and result["reason"].startswith("CheckpointSyncError: checkpoint sync")
    artifacts = Path(result["job_dir"]).parent / "output"
    assert members(artifacts / "model.tar.gz") == {"weights.txt": b"trained"}
    assert members(artifacts / "output.tar.gz") == {"metrics.txt": b"loss 0.1"}
    assert sorted(path.name for path in location.iterdir()) == [".sagemaker-tc-job", "small.txt"]  # no partial file


@pytest.mark.slow
def test_a_full_output_folder_leaves_no_torn_archive_and_the_failed_job_has_a_handle(tmp_path):
    result = run_limited(tmp_path, "model")

    artifacts = Path(result["job_dir"]).parent / "output"
    assert result["error"] == "JobArtifactsError", result
    assert f"into the folder {str(artifacts)!r}: model.tar.gz" in result["message"]
    assert "it needs up to 2097165 bytes" in result["message"]  # the model folder's files, uncompressed
    assert result["status"] == "Failed" and result["reason"].startswith("JobArtifactsError: ")
    assert sorted(path.name for path in artifacts.iterdir()) == ["output.tar.gz"]  # no torn model.tar.gz
    assert members(artifacts / "output.tar.gz") == {"metrics.txt": b"loss 0.1"}
    assert (Path(result["job_dir"]) / "model" / "step-1.bin").stat().st_size == 2 << 20  # kept in the job's folder


# -- 5. the checkpoint copy never writes through a link ---------------------------------------------


def test_the_checkpoint_copy_never_writes_through_a_link_in_its_destination(tmp_path, caplog):
    from sagemaker_tc.sdk.local.checkpoints import copy_new

    job_folder, location, outside = tmp_path / "job", tmp_path / "location", tmp_path / "outside"
    (job_folder / "sub").mkdir(parents=True)
    (job_folder / "sub" / "x").write_text("the job's")
    (job_folder / "y").write_text("the job's")
    location.mkdir()
    outside.mkdir()
    (location / "sub").symlink_to(outside, target_is_directory=True)
    (location / ".y.sagemaker-tc-partial").symlink_to(outside / "y")  # the partial file's name, as a link

    with caplog.at_level("WARNING", logger="sagemaker_tc.sdk.local.checkpoints"):
        copy_new(job_folder, location)

    assert list(outside.iterdir()) == []
    assert (location / "y").read_text() == "the job's" and not (location / "y").is_symlink()
    assert sorted(path.name for path in location.iterdir()) == ["sub", "y"]
    assert f"not copying sub/x into {location}: {location / 'sub'} there is a symbolic link" in caplog.text


# -- 4. hyperparameters no job can hold are refused at construction ---------------------------------


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("hyperparameters", "message"),
    [
        ({"lr": "\ud800"}, r"hyperparameter 'lr' holds a lone surrogate \(U\+D800 at position 1\)"),
        ({"tags": ["ok", "a\udc80"]}, r"hyperparameter 'tags' holds a lone surrogate \(U\+DC80 at position 9\)"),
        ({"x\ud800": 1}, r"hyperparameter name 'x\\ud800' holds a lone surrogate \(U\+D800 at position 1\)"),
        ({"deep": nested(3000)}, "hyperparameter 'deep' nests lists more than 100 deep"),
        ({"deep": [nested(99)]}, "hyperparameter 'deep' nests lists more than 100 deep"),
    ],
)
def test_hyperparameters_no_job_can_hold_are_refused_when_the_estimator_is_built(tmp_path, hyperparameters, message):
    from sagemaker_tc.errors import HyperparameterError

    with pytest.raises(HyperparameterError, match=message):
        make_estimator(tmp_path, "print('never')\n", hyperparameters=hyperparameters)
    assert not (tmp_path / "out").exists()


def test_hyperparameters_of_real_text_and_modest_nesting_are_accepted(tmp_path):
    job_estimator = make_estimator(
        tmp_path, "print('hi')\n", hyperparameters={"label": "café 😀", "grid": nested(99), "big": list(range(500))}
    )
    assert job_estimator.hyperparameters()["label"] == '"café 😀"'


def test_a_value_that_holds_itself_or_repeats_a_list_is_refused_without_a_long_walk(tmp_path):
    from sagemaker_tc.errors import HyperparameterError

    loop: list = []
    loop.append(loop)
    repeated: list = [1]
    for _ in range(60):  # 2**60 items once expanded
        repeated = [repeated, repeated]
    for value, message in ((loop, "nests lists more than 100 deep"), (repeated, "holds more than 2500 items")):
        with pytest.raises(HyperparameterError, match=message):
            make_estimator(tmp_path, "print('never')\n", hyperparameters={"v": value})


def test_model_trainer_hyperparameter_text_with_a_lone_surrogate_is_refused():
    from sagemaker_tc.errors import HyperparameterError
    from sagemaker_tc.sdk.hyperparameters import check_value_text

    with pytest.raises(HyperparameterError, match="lone surrogate"):
        check_value_text("lr", "0.1\udfff")


# -- 6. environment names and values the cloud refuses --------------------------------------------


def test_local_process_refuses_environment_names_and_values_over_512_characters(tmp_path, monkeypatch):
    from sagemaker_tc.errors import EstimatorArgumentError

    with pytest.raises(EstimatorArgumentError, match=r"environment variable 'TOKEN': its value is 513 characters"):
        make_estimator(tmp_path, "print('never')\n", environment={"TOKEN": "s" * 513})
    long_name = "N" * 513
    with pytest.raises(EstimatorArgumentError, match=r"'N{40}'\.\.\. \(513 characters\): its name is 513 characters"):
        make_estimator(tmp_path, "print('never')\n", environment={long_name: "1"})
    assert not (tmp_path / "out").exists()
    make_estimator(tmp_path, "print('hi')\n", environment={"TOKEN": "s" * 512, "N" * 512: "1"})
    # PATH keeps this machine's folders, however long they are.
    monkeypatch.setenv("PATH", os.pathsep.join(f"/opt/tool{index}/bin" for index in range(60)))
    make_estimator(tmp_path, "print('hi')\n", environment={"PATH": "/my/bin:" + os.environ["PATH"]})


def test_model_trainer_local_process_refuses_an_environment_value_over_512_characters(tmp_path):
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    from sagemaker_tc import ModelTrainer
    from sagemaker_tc.errors import EstimatorArgumentError

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('never')\n")
    with pytest.raises(EstimatorArgumentError, match=r"environment variable 'TOKEN': its value is 600 characters"):
        ModelTrainer(
            training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312",
            source_code=SourceCode(source_dir=str(code), entry_script="train.py"),
            compute=Compute(instance_type="local_process"),
            training_mode=Mode.LOCAL_CONTAINER,
            local_container_root=str(tmp_path / "root"),
            compiler_config=TrainingCompilerConfig(),
            environment={"TOKEN": "v" * 600},
        )
    assert not (tmp_path / "root").exists()


def test_a_host_never_overwrites_another_hosts_new_checkpoint_with_its_stale_copy(tmp_path):
    from sagemaker_tc.sdk.local.checkpoints import CheckpointSync

    location, first, second = tmp_path / "location", tmp_path / "algo-1", tmp_path / "algo-2"
    location.mkdir()
    (location / "latest.pt").write_text("v1 from an earlier job")
    (location / "kept.txt").write_text("untouched")

    with CheckpointSync(location, [first, second], interval_s=3600) as sync:
        assert (second / "latest.pt").read_text() == "v1 from an earlier job"
        (first / "latest.pt").write_text("v2 saved by rank 0 on algo-1")
        os.utime(first / "latest.pt", ns=(1, 2_000_000_000_000_000_000))  # surely another time than v1's
        (second / "only-on-algo-2.txt").write_text("algo-2's own file")

    assert sync.failure is None
    assert (location / "latest.pt").read_text() == "v2 saved by rank 0 on algo-1"  # algo-2 copies out last
    assert (location / "only-on-algo-2.txt").read_text() == "algo-2's own file"
    assert (location / "kept.txt").read_text() == "untouched"


@pytest.mark.parametrize("replacement", ["removed", "a file"])
def test_a_model_folder_the_script_removed_gives_an_empty_archive_and_says_why(tmp_path, caplog, replacement):
    import tarfile

    from sagemaker_tc.sdk.local.process import _write_artifacts

    job_dir, artifacts = tmp_path / "opt_ml", tmp_path / "output"
    (job_dir / "output" / "data").mkdir(parents=True)
    (job_dir / "output" / "data" / "metrics.txt").write_text("loss 0.1")
    if replacement == "a file":
        (job_dir / "model").write_text("the script's own file")

    with caplog.at_level("WARNING", logger="sagemaker_tc.sdk.local.process"):
        model_tar, output_tar = _write_artifacts(job_dir, artifacts)

    with tarfile.open(model_tar) as tar:
        assert tar.getnames() == []
    assert members(output_tar) == {"metrics.txt": b"loss 0.1"}
    found = "nothing" if replacement == "removed" else "a file or link"
    said = f"model.tar.gz is empty: the job's script removed its folder {job_dir / 'model'} ({found} stands"
    assert said in caplog.text
    if replacement == "a file":
        assert (job_dir / "model").read_text() == "the script's own file"


@pytest.mark.parametrize("existing", ["checkpoint", "link", "file"])
def test_writing_replaces_whatever_holds_the_checkpoints_name_and_keeps_the_old_one_until_then(
    tmp_path, monkeypatch, existing
):
    from sagemaker_tc import checkpoints

    folder, outside = tmp_path / "checkpoints", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("not the job's")
    target = folder / "checkpoint-5"
    if existing == "checkpoint":
        with checkpoints.writing(folder, 5) as first:
            (first / "state.pt").write_text("old")
    elif existing == "link":
        target.symlink_to(outside, target_is_directory=True)
    else:
        target.write_text("a stray file")
    seen_during_rename = []
    real_replace = os.replace

    def watching_replace(source, destination):
        if Path(destination) == target:  # the new checkpoint takes its name: the old one is still whole
            aside = folder / ".checkpoint-5.replaced"
            seen_during_rename.append(aside.exists() or aside.is_symlink())
        return real_replace(source, destination)

    monkeypatch.setattr(os, "replace", watching_replace)
    with checkpoints.writing(folder, 5) as second:
        (second / "state.pt").write_text("new")
    monkeypatch.undo()

    assert seen_during_rename == [True]
    assert not target.is_symlink() and (target / "state.pt").read_text() == "new" and checkpoints.is_complete(target)
    assert sorted(path.name for path in folder.iterdir()) == ["checkpoint-5"]
    assert checkpoints.latest_complete(folder) == target
    assert (outside / "keep.txt").read_text() == "not the job's"  # a link's target is never touched
