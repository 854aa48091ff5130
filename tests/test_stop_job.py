"""The stop contract (issue 25, item 1): ``fit(wait=False)``, then ``latest_training_job.stop()`` /
``wait()`` / ``describe()`` / ``logs()``, and ``max_run``, as SageMaker stops a job: SIGTERM to every
process of every host, a grace period, SIGKILL. Real ``local_process`` jobs of tiny scripts (no model),
and the cloud job's StopTrainingJob against moto."""

import tarfile
import time
from pathlib import Path

import pytest
from test_local_process import running

from sagemaker_tc import PyTorch, TrainingCompilerConfig, TrainingJobFailedError, contract
from sagemaker_tc.errors import EstimatorArgumentError
from sagemaker_tc.sdk.local import checkpoints as local_checkpoints
from sagemaker_tc.sdk.local.stop import STOP_GRACE_S, stop_grace_s

# Writes what it "trained", then waits; on SIGTERM it saves a checkpoint and a marker, then exits 0.
GRACEFUL_SCRIPT = """
import os, signal, sys, time
from pathlib import Path

host = os.environ["SM_CURRENT_HOST"]
model = Path(os.environ["SM_MODEL_DIR"])
checkpoints = Path("/opt/ml/checkpoints")


def on_sigterm(signum, frame):
    (model / f"stopped-{host}.txt").write_text("saved on SIGTERM")
    if checkpoints.is_dir():
        (checkpoints / f"last-{host}.txt").write_text("step 7")
    print(f"{host} saved on SIGTERM", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
(model / f"weights-{host}.txt").write_text("trained")
print(f"{host} ready", flush=True)
while True:
    time.sleep(0.1)
"""

# Ignores SIGTERM: records its PID, then waits until it is killed.
STUBBORN_SCRIPT = """
import os, signal, time
from pathlib import Path

signal.signal(signal.SIGTERM, signal.SIG_IGN)
name = f"pid-{os.environ['SM_CURRENT_HOST']}-{os.environ.get('LOCAL_RANK', '0')}"
Path(os.environ["SM_MODEL_DIR"], name).write_text(str(os.getpid()))
while True:
    time.sleep(0.1)
"""

READY_TIMEOUT_S = 300  # how long a job may take to start its script on a loaded machine (a hang fails)


def estimator(tmp_path: Path, script: str, **arguments) -> PyTorch:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(script)
    kwargs = {"instance_type": "local_process", "output_path": str(tmp_path / "out"), "max_run": 600}
    kwargs.update(arguments)
    return PyTorch("train.py", source_dir=str(code), **kwargs)


def wait_until(job, done) -> None:
    """Poll until ``done()``; fails at once if the job ended first (with its log)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not done():
        assert job.status == "InProgress", job.logs()
        assert time.monotonic() < deadline, job.logs()
        time.sleep(0.1)


def archive_members(uri: str) -> dict[str, str]:
    with tarfile.open(uri.removeprefix("file://")) as tar:
        return {member.name: tar.extractfile(member).read().decode() for member in tar.getmembers() if member.isfile()}


@pytest.mark.slow
def test_a_stopped_two_host_job_keeps_what_each_host_saved_on_sigterm(tmp_path, monkeypatch):
    monkeypatch.setattr(local_checkpoints, "SYNC_INTERVAL_S", 3600.0)  # only the last copy out counts
    location = tmp_path / "checkpoints"
    job_estimator = estimator(tmp_path, GRACEFUL_SCRIPT, instance_count=2, checkpoint_s3_uri=str(location))

    job_estimator.fit(wait=False)

    job = job_estimator.latest_training_job
    assert job.status == "InProgress" and job.describe()["SecondaryStatus"] == "Training"
    assert job_estimator.model_data is None
    markers = {host: job_dir / "model" / f"weights-{host}.txt" for host, job_dir in job.host_dirs.items()}
    wait_until(job, lambda: all(marker.exists() for marker in markers.values()))
    for bad in ("abc", -5, float("nan"), True, "30"):  # refused before anything is signalled
        with pytest.raises(EstimatorArgumentError, match="grace_s=.* is not a grace period"):
            job.stop(grace_s=bad)
    assert job.status == "InProgress"
    job.stop()
    assert job.status in ("Stopping", "Stopped")
    job_estimator.wait(logs=False)  # a requested stop raises nothing

    described = job.describe()
    assert described["TrainingJobName"] == job.job_name
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert "FailureReason" not in described
    assert described["ModelArtifacts"]["S3ModelArtifacts"] == job_estimator.model_data == job.model_artifacts
    assert described["StoppingCondition"] == {"MaxRuntimeInSeconds": 600}
    # Each host ran its SIGTERM handler: algo-1's model folder is the archive, algo-2's stays in its folder.
    assert archive_members(job.model_artifacts) == {
        "weights-algo-1.txt": "trained",
        "stopped-algo-1.txt": "saved on SIGTERM",
    }
    assert (job.host_dirs["algo-2"] / "model" / "stopped-algo-2.txt").read_text() == "saved on SIGTERM"
    copied_out = ["last-algo-1.txt", "last-algo-2.txt"]  # and the location's marker
    assert sorted(path.name for path in location.iterdir()) == [".sagemaker-tc-job", *copied_out]
    log = job.logs()
    assert "algo-1 | algo-1 saved on SIGTERM" in log and "algo-2 | algo-2 saved on SIGTERM" in log
    job.stop()  # an ended job is left as it is
    assert job.status == "Stopped"
    with pytest.raises(EstimatorArgumentError, match=r"grace_s='abc'\) is not a grace period"):
        job.stop(grace_s="abc")


@pytest.mark.slow
def test_ranks_that_ignore_sigterm_are_killed_on_every_host_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setenv(contract.ENV_STOP_GRACE, "2")
    job_estimator = estimator(
        tmp_path,
        STUBBORN_SCRIPT,
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        compiler_config=TrainingCompilerConfig(backend="eager"),
    )

    job_estimator.fit(wait=False)

    job = job_estimator.latest_training_job
    pid_files = [job_dir / "model" / f"pid-{host}-{rank}" for host, job_dir in job.host_dirs.items() for rank in (0, 1)]
    wait_until(job, lambda: all(path.exists() and path.read_text() for path in pid_files))
    pids = [int(path.read_text()) for path in pid_files]
    assert all(map(running, pids))
    job.stop()
    assert job.wait(logs=False) == job.model_artifacts

    assert (job.status, job.describe()["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert [pid for pid in pids if running(pid)] == []  # torchrun's ranks, in sessions of their own, too
    assert set(archive_members(job.model_artifacts)) == {"pid-algo-1-0", "pid-algo-1-1"}


@pytest.mark.slow
def test_max_run_stops_the_job_by_the_same_route(tmp_path, monkeypatch):
    job_estimator = estimator(tmp_path, GRACEFUL_SCRIPT, max_run=8)

    with pytest.raises(TrainingJobFailedError, match="MaxRuntimeExceeded: the job ran longer than 8 seconds"):
        job_estimator.fit(logs=False)

    job = job_estimator.latest_training_job
    described = job.describe()
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert described["FailureReason"].startswith("MaxRuntimeExceeded: ")
    # SIGTERM, not SIGKILL: the script's handler ran and what it saved is in the archive.
    assert archive_members(job_estimator.model_data)["stopped-algo-1.txt"] == "saved on SIGTERM"


@pytest.mark.slow
def test_a_background_job_that_fails_raises_at_wait(tmp_path):
    job_estimator = estimator(tmp_path, "raise ValueError('learning rate 42 is too high')\n")

    job_estimator.fit(wait=False)

    with pytest.raises(TrainingJobFailedError, match="ExecuteUserScriptError:\nExitCode 1") as raised:
        job_estimator.latest_training_job.wait(logs=False)
    described = job_estimator.latest_training_job.describe()
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == ("Failed", "Failed")
    assert described["FailureReason"] == raised.value.failure_reason
    assert "ValueError: learning rate 42 is too high" in job_estimator.latest_training_job.logs()


def test_the_grace_comes_from_the_environment_and_is_checked():
    assert stop_grace_s({}) == STOP_GRACE_S == 120
    assert stop_grace_s({contract.ENV_STOP_GRACE: "2.5"}) == 2.5
    assert stop_grace_s({contract.ENV_STOP_GRACE: "0"}) == 0
    for bad in ("-1", "soon", "nan", "inf"):
        with pytest.raises(EstimatorArgumentError, match=f"SM_TC_STOP_GRACE_S='{bad}' is not a grace period"):
            stop_grace_s({contract.ENV_STOP_GRACE: bad})


def test_a_bad_grace_is_refused_at_fit_before_anything_starts(tmp_path):
    job_estimator = estimator(tmp_path, "print('never')\n", environment={contract.ENV_STOP_GRACE: "soon"})
    with pytest.raises(EstimatorArgumentError, match="is not a grace period"):
        job_estimator.fit(wait=False)
    assert job_estimator.latest_training_job is None
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def cloud_job(aws, tmp_path):
    """A SageMaker job created on moto with ``fit(wait=False)`` (moto's jobs are Completed at once)."""
    import boto3

    boto3.client("s3").create_bucket(Bucket="tc-stop-bucket")
    job_estimator = estimator(
        tmp_path,
        "print('hi')\n",
        role=ROLE,
        instance_type="ml.g6.xlarge",
        framework_version="2.8",
        py_version="py312",
        output_path="s3://tc-stop-bucket/jobs",
    )
    job_estimator.fit(wait=False)
    return job_estimator.latest_training_job


def test_stop_in_the_cloud_sends_stop_training_job(aws, tmp_path, monkeypatch):
    from botocore.exceptions import ClientError

    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # moto answers StopTrainingJob with an error: no retries
    job = cloud_job(aws, tmp_path)

    try:
        job.stop()
    except ClientError as error:  # moto 5.2 does not implement StopTrainingJob (HTTP 500)
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 500

    # One request, or its retries where a client made earlier in the process has its own retry setting.
    stops = [body for target, body in aws() if target == "SageMaker.StopTrainingJob"]
    assert stops and all(body == {"TrainingJobName": job.job_name} for body in stops)
    described = job.describe()
    assert described["TrainingJobName"] == job.job_name and described["TrainingJobStatus"] == "Completed"
    assert job.wait(logs=False) == described["ModelArtifacts"]["S3ModelArtifacts"] == job.model_data


def test_the_cloud_jobs_logs_are_its_cloudwatch_streams_by_host(aws, tmp_path):
    import boto3

    job = cloud_job(aws, tmp_path)
    logs = boto3.client("logs")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    now_ms = int(time.time() * 1000)  # CloudWatch refuses events older than 14 days
    for host, lines in (("algo-1", ["ready", "step 1"]), ("algo-2", ["ready"])):
        stream = f"{job.job_name}/{host}-{now_ms // 1000}"
        logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
        events = [{"timestamp": now_ms + index, "message": line} for index, line in enumerate(lines)]
        logs.put_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream, logEvents=events)
    other = f"another-job/algo-1-{now_ms // 1000}"
    logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=other)

    # Hosts interleaved by timestamp, as SDK v2 printed them (algo-2's "ready" is as old as algo-1's).
    assert job.logs() == "algo-1 | ready\nalgo-2 | ready\nalgo-1 | step 1\n"


def test_the_cloud_jobs_logs_interleave_two_hosts_by_timestamp(aws, tmp_path):
    """Two hosts' streams whose events alternate in time read back in time order, each line with
    its host, although the streams are listed algo-1 first."""
    import boto3

    job = cloud_job(aws, tmp_path)
    logs = boto3.client("logs")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    now_ms = int(time.time() * 1000)
    for host, first in (("algo-1", 1), ("algo-2", 0)):
        stream = f"{job.job_name}/{host}-{now_ms // 1000}"
        logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
        events = [{"timestamp": now_ms + 10 * step + first, "message": f"step {step}"} for step in range(3)]
        logs.put_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream, logEvents=events)

    expected = "".join(f"algo-2 | step {step}\nalgo-1 | step {step}\n" for step in range(3))
    assert job.logs() == expected
