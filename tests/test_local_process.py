"""Docker-free local mode with the real sagemaker-training toolkit in a subprocess."""

import json
import tarfile
from pathlib import Path

import pytest
from conftest import TRICKY_HYPERPARAMETERS

from sagemaker_tc import HuggingFace, PyTorch, TrainingCompilerConfig, TrainingJobFailedError
from sagemaker_tc.container.launcher import LOG_CONFIGURING, LOG_DEBUG, LOG_FOUND

pytestmark = pytest.mark.slow


def fit(estimator, capsys, inputs=None):
    """Run fit(); returns the job log it streamed to stdout."""
    try:
        estimator.fit(inputs)
    finally:
        log = capsys.readouterr().out
    return log


def member(archive_uri: str, name: str):
    with tarfile.open(archive_uri.removeprefix("file://")) as tar:
        return tar.extractfile(name).read().decode()


def test_hyperparameters_reach_the_script_exactly(source_dir, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.tsv").write_text("sentence\tlabel\n")
    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        hyperparameters=TRICKY_HYPERPARAMETERS,
        compiler_config=TrainingCompilerConfig(),
        output_path=str(tmp_path / "out"),
    )
    log = fit(estimator, capsys, {"train": str(data), "extra": (data / "rows.tsv").as_uri()})
    echo = json.loads(member(estimator.latest_training_job.output_artifacts, "echo.json"))

    assert echo["hps"] == TRICKY_HYPERPARAMETERS
    args = dict(zip(echo["argv"][::2], echo["argv"][1::2], strict=True))
    assert args["--greeting"] == "hello world"
    assert args["--quoted"] == "say \"hi\" and 'bye'"
    assert args["--unicode"] == "naïve café ✓ 日本"
    assert args["--numeric_text"] == "007"
    assert args["--epochs"] == "3" and args["--lr"] == "3e-05"
    assert echo["main"] == "__main__"
    assert echo["job_name"] == estimator.latest_training_job.job_name
    assert echo["channels"] == {"SM_CHANNEL_EXTRA": ["rows.tsv"], "SM_CHANNEL_TRAIN": ["rows.tsv"]}
    # Compiler settings reach the launcher through SM_FRAMEWORK_PARAMS, never the script's argv.
    assert echo["framework_params"]["sagemaker_training_compiler_enabled"] is True
    assert not any(arg.startswith("--sagemaker_") for arg in echo["argv"])
    assert not any(name.startswith("ACCELERATE_DYNAMO_") for name in echo["env"])  # compiled in process
    assert echo["env"]["SM_TRAINING_COMPILER_CONFIGURED"] == "1"
    assert LOG_FOUND in log and LOG_CONFIGURING in log and LOG_DEBUG not in log
    assert member(estimator.model_data, "weights.txt") == "trained"
    assert estimator.latest_training_job.status == "Completed"
    assert (estimator.latest_training_job.job_dir / "output" / "success").exists()


def test_channel_folder_holding_the_output_path_is_linked_not_copied(source_dir, tmp_path, capsys):
    (tmp_path / "rows.tsv").write_text("sentence\tlabel\n")
    estimator = PyTorch(
        "echo.py", source_dir=str(source_dir), instance_type="local_process", output_path=str(tmp_path / "out")
    )
    fit(estimator, capsys, str(tmp_path))  # the channel folder holds the output folder itself
    echo = json.loads(member(estimator.latest_training_job.output_artifacts, "echo.json"))
    assert echo["channels"] == {"SM_CHANNEL_TRAINING": ["out", "rows.tsv", "src"]}
    assert (estimator.latest_training_job.job_dir / "input" / "data" / "training").is_symlink()


def test_failing_script_raises_with_its_message(source_dir, tmp_path, capsys):
    estimator = HuggingFace(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        environment={"ECHO_FAIL_WITH": "learning rate 42 is too high"},
        compiler_config=TrainingCompilerConfig(),
        output_path=str(tmp_path / "out"),
    )
    with pytest.raises(TrainingJobFailedError, match="learning rate 42 is too high") as raised:
        fit(estimator, capsys)
    job = estimator.latest_training_job
    failure = job.job_dir / "output" / "failure"
    assert failure.exists() and "learning rate 42 is too high" in failure.read_text()
    assert raised.value.job_name == job.job_name and job.status == "Failed"
    # What the job produced before failing is kept.
    assert member(estimator.model_data, "weights.txt") == "trained"
    report = json.loads(member(job.output_artifacts, "compiler/report.json"))
    assert report["compiled"] is False and report["steps"] == 0


def test_disabled_config_runs_a_plain_script_mode_job(source_dir, tmp_path, capsys):
    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        compiler_config=TrainingCompilerConfig(enabled=False),
        output_path=str(tmp_path / "out"),
    )
    log = fit(estimator, capsys)
    echo = json.loads(member(estimator.latest_training_job.output_artifacts, "echo.json"))
    assert LOG_FOUND not in log and LOG_CONFIGURING not in log
    assert echo["env"] == {}
    assert echo["framework_params"]["sagemaker_training_compiler_enabled"] is False
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        assert "compiler/report.json" not in tar.getnames()


def test_a_local_job_leaves_no_pipe_open(source_dir, tmp_path):
    """Each host's log pipe is closed when the host ends (it was left to the garbage collector, which
    warned ``ResourceWarning: unclosed file``)."""
    import gc
    import warnings

    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        instance_count=2,
        compiler_config=TrainingCompilerConfig(enabled=False),
        output_path=str(tmp_path / "out"),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        estimator.fit(None, logs=False)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_user_environment_is_never_overwritten_and_debug_mode_logs(source_dir, tmp_path, capsys):
    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        environment={"TORCH_LOGS": "recompiles"},
        compiler_config=TrainingCompilerConfig(debug=True),
        output_path=str(tmp_path / "out"),
    )
    log = fit(estimator, capsys)
    echo = json.loads(member(estimator.latest_training_job.output_artifacts, "echo.json"))
    assert echo["env"]["TORCH_LOGS"] == "recompiles"
    assert "TORCH_LOGS is already set to 'recompiles'; keeping it" in log
    assert LOG_DEBUG in log
    assert Path(echo["env"]["TORCH_TRACE"]).parent.name == "compiler"


def test_max_run_stops_the_job_and_the_script_under_it(source_dir, tmp_path, capsys):
    estimator = PyTorch(
        "sleeper.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        max_run=20,
        output_path=str(tmp_path / "out"),
    )
    with pytest.raises(TrainingJobFailedError, match="MaxRuntimeExceeded: the job ran longer than 20 seconds"):
        fit(estimator, capsys)
    pid = int(member(estimator.latest_training_job.output_artifacts, "pid"))
    assert not running(pid)


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed orphan waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_batch_size_nothing_applied_is_reported_not_silent(source_dir, tmp_path, capsys):
    estimator = PyTorch(
        "echo.py",
        source_dir=str(source_dir),
        instance_type="local_process",
        compiler_config=TrainingCompilerConfig(batch_size="auto"),
        output_path=str(tmp_path / "out"),
    )
    log = fit(estimator, capsys)
    report = json.loads(member(estimator.latest_training_job.output_artifacts, "compiler/report.json"))
    assert report["batch_tuning"]["applied"] is False and report["batch_tuning"]["requested"] == "auto"
    assert "sagemaker_tc.tune_batch_size" in report["batch_tuning"]["note"]
    assert "BATCH SIZE NOT TUNED: batch_size='auto' was set, but nothing in the script applied it" in log


def test_links_inside_source_dir_reach_the_job_and_links_outside_never_do(source_dir, tmp_path, capsys):
    """Issue 15: a link to a file outside source_dir is refused before the job folder exists (also
    when it appears after the estimator was built); links inside are in the job's code folder."""
    from sagemaker_tc import SourceLinkError

    secrets = tmp_path / "home" / ".aws"
    secrets.mkdir(parents=True)
    (secrets / "credentials").write_text("secret")
    (source_dir / "helpers").mkdir()
    (source_dir / "helpers" / "util.py").write_text("VALUE = 1\n")
    (source_dir / "util_link.py").symlink_to(source_dir / "helpers" / "util.py")
    (source_dir / "helpers_link").symlink_to("helpers", target_is_directory=True)
    (source_dir / "awsdir").symlink_to(secrets)
    common = {"source_dir": str(source_dir), "instance_type": "local_process", "output_path": str(tmp_path / "out")}
    with pytest.raises(SourceLinkError, match=r"link 'awsdir' points to '.*\.aws', outside source_dir"):
        PyTorch("echo.py", **common)
    (source_dir / "awsdir").unlink()
    estimator = PyTorch("echo.py", **common)
    (source_dir / "passwd_link").symlink_to("/etc/passwd")
    with pytest.raises(SourceLinkError, match=r"link 'passwd_link' points to '/etc/passwd'"):
        estimator.fit()
    assert not (tmp_path / "out").exists()

    (source_dir / "passwd_link").unlink()
    fit(estimator, capsys)
    code = estimator.latest_training_job.job_dir / "code"
    assert (code / "util_link.py").read_text() == (code / "helpers_link" / "util.py").read_text() == "VALUE = 1\n"
    assert not (code / "util_link.py").is_symlink() and not (code / "helpers_link").is_symlink()
