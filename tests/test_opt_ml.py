"""/opt/ml inside docker-free local mode: each host in its own mount namespace where /opt/ml is its job
folder, checkpoints synced with a local folder, and a named refusal where no namespace is available."""

import json
import shutil
import subprocess
import tarfile
import threading
from pathlib import Path

import pytest

from sagemaker_tc import (
    EstimatorArgumentError,
    OptMlNotMappedWarning,
    OptMlUnavailableError,
    PyTorch,
    TrainingCompilerConfig,
)
from sagemaker_tc.sdk.job_paths import local_path
from sagemaker_tc.sdk.local import checkpoints as local_checkpoints
from sagemaker_tc.sdk.local import namespace as job_namespace
from sagemaker_tc.sdk.local.hosts import HostCommand
from sagemaker_tc.sdk.modes.request import request_for

pytestmark = pytest.mark.slow

# Written for SageMaker: fixed /opt/ml paths only. WAIT_FOR (a folder) makes it wait, after writing, for
# every job process of the test (RENDEZVOUS_COUNT markers there) so jobs overlap, and for its checkpoint
# to reach CHECKPOINT_LOCATION while it still runs.
OPT_ML_SCRIPT = """
import json, os, pathlib, sys, time

host = os.environ["SM_CURRENT_HOST"]
data = pathlib.Path("/opt/ml/input/data/train/x").read_text()
pathlib.Path("/opt/ml/model/y").write_text(f"{data} from {host}")
checkpoints = pathlib.Path("/opt/ml/checkpoints")
previous = sorted(path.name for path in checkpoints.iterdir()) if checkpoints.is_dir() else None
if previous is not None:
    (checkpoints / "z").write_text(f"{data} checkpoint")


def wait_for(done, what):
    for _ in range(1200):
        if done():
            return
        time.sleep(0.1)
    sys.exit(f"gave up waiting for {what}")


rendezvous = os.environ.get("WAIT_FOR")
if rendezvous:
    pathlib.Path(rendezvous, f"{data}-{host}").touch()
    wait_for(lambda: len(os.listdir(rendezvous)) >= int(os.environ["RENDEZVOUS_COUNT"]), "the other jobs")
location = os.environ.get("CHECKPOINT_LOCATION")
if location:
    wait_for(lambda: pathlib.Path(location, "z").exists(), "the checkpoint sync")
pathlib.Path("/opt/ml/output/data/seen.json").write_text(json.dumps({
    "model": sorted(os.listdir("/opt/ml/model")),
    "y": pathlib.Path("/opt/ml/model/y").read_text(),
    "same_as_sm_model_dir": os.path.samefile("/opt/ml/model", os.environ["SM_MODEL_DIR"]),
    "previous_checkpoints": previous,
    "code": sorted(os.listdir("/opt/ml/code")),
}))
"""


@pytest.fixture
def host_opt_ml():
    """This machine's /opt/ml before the test, checked unchanged (or still absent) after it."""

    def snapshot():
        root = Path("/opt/ml")
        return sorted(str(path) for path in root.rglob("*")) if root.exists() else None

    before = snapshot()
    yield
    assert snapshot() == before


@pytest.fixture
def opt_ml_job(tmp_path):
    """Build a ``local_process`` PyTorch job of :data:`OPT_ML_SCRIPT` reading ``x`` = ``data``."""

    def _make(data: str, **overrides):
        code = tmp_path / f"code-{data}"
        code.mkdir()
        (code / "opt_ml_job.py").write_text(OPT_ML_SCRIPT)
        train = tmp_path / f"train-{data}"
        train.mkdir()
        (train / "x").write_text(data)
        kwargs = {
            "instance_type": "local_process",
            "output_path": str(tmp_path / "out"),
            "base_job_name": f"opt-ml-{data}",  # two jobs started at once get different names
            "max_run": 600,
        }
        kwargs.update(overrides)
        return PyTorch("opt_ml_job.py", source_dir=str(code), **kwargs), {"train": str(train)}

    return _make


def member(archive_uri: str, name: str) -> str:
    with tarfile.open(archive_uri.removeprefix("file://")) as tar:
        return tar.extractfile(name).read().decode()


def test_opt_ml_script_runs_unchanged_and_checkpoints_sync_both_ways(opt_ml_job, tmp_path, host_opt_ml, monkeypatch):
    monkeypatch.setattr(local_checkpoints, "SYNC_INTERVAL_S", 0.5)  # the script waits for the copy out
    location = tmp_path / "checkpoints"
    location.mkdir()
    (location / "seed").write_text("from an earlier job")
    estimator, inputs = opt_ml_job(
        "alpha", checkpoint_s3_uri=location.as_uri(), environment={"CHECKPOINT_LOCATION": str(location)}
    )
    estimator.fit(inputs, logs=False)

    job = estimator.latest_training_job
    assert member(estimator.model_data, "y") == "alpha from algo-1"
    seen = json.loads(member(job.output_artifacts, "seen.json"))
    assert seen["same_as_sm_model_dir"] and seen["model"] == ["y"]
    assert seen["previous_checkpoints"] == ["seed"]  # copied in at the start
    assert "opt_ml_job.py" in seen["code"]
    # Copied out while the job ran (the script waited for it), and kept after it ended.
    assert (location / "z").read_text() == "alpha checkpoint"
    assert (location / "seed").read_text() == "from an earlier job"
    assert not (job.job_dir.parent / job_namespace.STAGE_NAME).exists()


def test_two_jobs_of_two_hosts_each_at_once_stay_apart(opt_ml_job, tmp_path, host_opt_ml):
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    environment = {"WAIT_FOR": str(rendezvous), "RENDEZVOUS_COUNT": "4"}
    jobs = [opt_ml_job(data, instance_count=2, environment=environment) for data in ("one", "two")]
    errors = []

    def fit(estimator, inputs):
        try:
            estimator.fit(inputs, logs=False)
        except Exception as error:  # reported below, with the job's failure reason
            errors.append(error)

    threads = [threading.Thread(target=fit, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(path.name for path in rendezvous.iterdir()) == [
        "one-algo-1",
        "one-algo-2",
        "two-algo-1",
        "two-algo-2",
    ]
    for (estimator, _), data in zip(jobs, ("one", "two"), strict=True):
        job = estimator.latest_training_job
        assert member(estimator.model_data, "y") == f"{data} from algo-1"
        # Each host had its own /opt/ml: algo-2's model folder holds only its own file.
        assert (job.host_dirs["algo-2"] / "model" / "y").read_text() == f"{data} from algo-2"
        seen = json.loads(member(job.output_artifacts, "seen.json"))
        assert seen["model"] == ["y"] and seen["previous_checkpoints"] is None


@pytest.mark.parametrize("variant", job_namespace.UNSHARE_VARIANTS, ids=["mount", "user+mount"])
def test_each_unshare_variant_maps_opt_ml_and_keeps_the_rest_of_opt(variant, tmp_path, host_opt_ml):
    job_dir = tmp_path / "opt_ml"
    job_dir.mkdir()
    namespace = job_namespace.Namespace((shutil.which("unshare"), *variant))
    command = namespace.wrap(HostCommand(["/bin/sh", "-c", "echo hi > /opt/ml/f; ls -a /opt"], job_dir, {}), job_dir)
    listed = subprocess.run(command.argv, capture_output=True, text=True, check=True).stdout.split()
    job_namespace.remove_stages({"algo-1": job_dir})

    assert (job_dir / "f").read_text() == "hi\n"
    host_opt = sorted({".", "..", "ml", *(path.name for path in Path("/opt").iterdir())})
    assert sorted(listed) == host_opt
    assert sorted(path.name for path in tmp_path.iterdir()) == ["opt_ml"]


BUILT_PATH_SCRIPT = """
import os
with open(os.path.join("/" + "opt", "ml", "model", "weights.txt"), "w") as handle:
    handle.write("trained")
"""


def test_without_a_namespace_a_job_that_could_reach_the_hosts_opt_ml_is_refused_unless_opted_in(
    source_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("SM_TC_LOCAL_NAMESPACE", "0")
    host_opt_ml = tmp_path / "host-opt" / "ml"  # stands for this machine's /opt/ml: it can be made
    monkeypatch.setattr(job_namespace, "HOST_OPT_ML", host_opt_ml)
    (source_dir / "built.py").write_text(BUILT_PATH_SCRIPT)  # builds the path: no text search finds it
    estimator = PyTorch(
        "built.py", source_dir=str(source_dir), instance_type="local_process", output_path=str(tmp_path / "out")
    )
    with pytest.raises(OptMlUnavailableError, match=r"could reach this machine's /opt/ml.*SM_TC_ALLOW_HOST_OPT_ML=1"):
        estimator.fit(logs=False)
    assert not (tmp_path / "out").exists() and not host_opt_ml.parent.exists()
    host_opt_ml.mkdir(parents=True)  # an existing one is refused too
    output = local_path(estimator.output_path).as_uri()
    request = request_for(estimator.spec, "job-1", {}, str(tmp_path / "none.tar.gz"), output_path=output)
    with pytest.raises(OptMlUnavailableError, match=r"host-opt/ml exists on this machine"):
        job_namespace.prepare(request)
    monkeypatch.setenv("SM_TC_ALLOW_HOST_OPT_ML", "1")  # the user's explicit opt-in
    with pytest.warns(OptMlNotMappedWarning, match=r"SM_TC_ALLOW_HOST_OPT_ML=1: the job can reach"):
        assert job_namespace.prepare(request) is None
    assert job_namespace.host_opt_ml_reachable(Path("/proc/sagemaker-tc-no-opt-ml")) is None


@pytest.mark.parametrize(
    ("overrides", "script", "named"),
    [
        ({"hyperparameters": {"train_file": "/opt/ml/input/data/train/x"}}, "print('hi')", "hyperparameter train_file"),
        ({"environment": {"OUT": "/opt/ml/model"}}, "print('hi')", "environment variable OUT"),
        ({}, "open('/opt/ml/model/y', 'w')", "code file opt_ml_job.py"),
        ({"checkpoint_s3_uri": "ckpt"}, "print('hi')", "checkpoint_local_path"),
    ],
)
def test_without_a_namespace_a_job_naming_opt_ml_is_refused_before_it_starts(
    overrides, script, named, opt_ml_job, tmp_path, monkeypatch
):
    monkeypatch.setenv("SM_TC_LOCAL_NAMESPACE", "0")
    monkeypatch.chdir(tmp_path)
    estimator, inputs = opt_ml_job("x", **overrides)
    (Path(estimator.source_dir) / "opt_ml_job.py").write_text(script)
    with pytest.raises(OptMlUnavailableError, match=rf"names /opt/ml \({named}.*SM_TC_LOCAL_NAMESPACE=0.*SM_MODEL_DIR"):
        estimator.fit(inputs, logs=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "ckpt").exists()


def test_without_a_namespace_a_job_using_sm_variables_runs_with_a_warning(source_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SM_TC_LOCAL_NAMESPACE", "0")
    # Where this machine's /opt/ml does not exist and cannot be made, nothing of the host's is in reach.
    monkeypatch.setattr(job_namespace, "HOST_OPT_ML", Path("/proc/sagemaker-tc-no-opt-ml"))
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.tsv").write_text("sentence\tlabel\n")
    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        compiler_config=TrainingCompilerConfig(),  # the launcher it injects is not the user's code
        output_path=str(tmp_path / "out"),
    )
    with pytest.warns(OptMlNotMappedWarning, match="without a private /opt/ml.*SM_TC_LOCAL_NAMESPACE=0"):
        estimator.fit({"train": str(data)}, logs=False)
    assert estimator.latest_training_job.status == "Completed"


@pytest.mark.parametrize(
    ("uri", "local_path", "message"),
    [
        ("file:///tmp/ckpt", "/checkpoints", "maps only folders under /opt/ml"),
        ("ckpt", "/opt/ml/../etc", "maps only folders under /opt/ml"),
    ],
)
def test_local_process_checkpoint_arguments_are_checked_at_construction(make, uri, local_path, message):
    with pytest.raises(EstimatorArgumentError, match=message):
        make(checkpoint_s3_uri=uri, checkpoint_local_path=local_path)


def test_checkpoint_sync_copies_new_and_changed_files_only(tmp_path):
    location, folder = tmp_path / "location", tmp_path / "algo-1" / "checkpoints"
    location.mkdir()
    (location / "old").write_text("old")
    with local_checkpoints.CheckpointSync(location, [folder], interval_s=3600) as sync:
        assert (folder / "old").read_text() == "old"
        (folder / "step-1").mkdir()
        (folder / "step-1" / "weights").write_text("1")
        sync.copy_out()
        assert (location / "step-1" / "weights").read_text() == "1"
        (folder / "step-1" / "weights").write_text("22")
        (folder / "old").unlink()  # deletions are not synced, as on SageMaker
    assert (location / "step-1" / "weights").read_text() == "22"
    assert sorted(path.name for path in location.rglob("*")) == [".sagemaker-tc-job", "old", "step-1", "weights"]
    assert sorted(path.name for path in folder.rglob("*")) == ["step-1", "weights"]  # the marker never copied in
