"""Bad inputs and faults, fifth round (issue 43): hostile compile cache entries, environment variables
aimed at the launcher, source_dir leftovers, role ARNs, the CLI, output paths, max_run stops."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from sagemaker_tc.compiler.cache import META_NAME, CompileCache, restore_limit


# -- compile cache: restore is all or nothing ------------------------------------------------------
def _tar(members: dict) -> bytes:
    """A gzip tar of ``members``: name -> bytes (a file) or ``("link", target)`` (a symlink)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, content[1]
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _entry(location, cache: CompileCache, archive: bytes, files) -> None:
    """Write a cache entry for ``cache``'s environment whose archive is ``archive`` (right sha256)."""
    digest = hashlib.sha256(archive).hexdigest()
    name = f"inductor-{digest[:16]}.tar.gz"
    entry = location / cache.key
    entry.mkdir(parents=True)
    (entry / name).write_bytes(archive)
    meta = {"schema": 1, "archive": name, "sha256": digest, "bytes": len(archive), "files": files}
    (entry / META_NAME).write_text(json.dumps(meta).replace('"files": "1e400"', '"files": 1e400'))


def _restored(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.parametrize(
    "members, files, reason",
    [
        ({"fxgraph/a": b"graph", "fxgraph/loop": ("link", ".")}, 1, "not a regular file"),
        ({"fxgraph/a": b"graph", "ab/kernel.so": b"k"}, "abc", "not a count of files"),
        ({"fxgraph/a": b"graph"}, "1e400", "not a count of files"),
        ({"fxgraph/a": b"graph"}, 3, "meta.json says 3"),
        ({"fxgraph/a": b"graph", "notes/secret.txt": b"x"}, 2, "not a file the compiler writes"),
        ({"fxgraph/a": b"graph", "fxgraph/zeros": bytes(4 << 20)}, 2, "over the limit"),
    ],
    ids=["link-loop", "files-abc", "files-1e400", "files-wrong", "foreign-file", "too-large"],
)
def test_a_hostile_cache_entry_loads_cold_and_restores_nothing(tmp_path, members, files, reason):
    location, folder = tmp_path / "cache", tmp_path / "inductor"
    cache = CompileCache(str(location), folder)
    _entry(location, cache, _tar(members), files)
    outcome = cache.load()
    assert outcome.state == "cold" and "corrupt" in outcome.reason and reason in outcome.reason
    assert (outcome.files, _restored(folder)) == (0, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no staging folder left, no folder made


def test_the_restore_limit_is_relative_to_the_archive_with_a_cap():
    assert restore_limit(200_000) == 100 * 200_000 + (1 << 20)
    assert restore_limit(10**12) == 32 << 30


def test_a_restore_through_a_link_in_the_inductor_folder_puts_everything_back(tmp_path):
    """A user's Inductor folder with ``fxgraph -> /outside``: nothing is written through the link, and
    the files moved in before it was met are taken out again (the one already there is put back)."""
    location, folder, outside = tmp_path / "cache", tmp_path / "inductor", tmp_path / "outside"
    outside.mkdir()
    folder.mkdir()
    (folder / "ab").mkdir()
    (folder / "ab" / "kernel.so").write_bytes(b"users")
    (folder / "fxgraph").symlink_to(outside, target_is_directory=True)
    cache = CompileCache(str(location), folder)
    _entry(location, cache, _tar({"ab/kernel.so": b"cached", "ab/new.so": b"n", "fxgraph/a": b"g"}), 3)
    outcome = cache.load()
    assert outcome.state == "cold" and "is a link" in outcome.reason
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in (folder / "ab").iterdir()) == ["kernel.so"]
    assert (folder / "ab" / "kernel.so").read_bytes() == b"users"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "inductor", "outside"]


# -- environment variables aimed at the launcher ---------------------------------------------------
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312"


@pytest.fixture
def build_trainer(source_dir, tmp_path):
    """A sagemaker_tc.ModelTrainer for ``echo.py`` (``local=True``: ``local_process``, else a GPU job)."""
    from sagemaker.core.training.configs import Compute, SourceCode
    from sagemaker.train.model_trainer import Mode

    from sagemaker_tc import ModelTrainer, TrainingCompilerConfig

    def _build(local=True, **overrides):
        kwargs = {
            "training_image": DLC,
            "source_code": SourceCode(source_dir=str(source_dir), entry_script="echo.py"),
            "compute": Compute(instance_type="local_process" if local else "ml.g5.2xlarge"),
            "role": ROLE,
            "local_container_root": str(tmp_path / "root"),
            "compiler_config": TrainingCompilerConfig(),
            **({"training_mode": Mode.LOCAL_CONTAINER} if local else {}),
            **overrides,
        }
        return ModelTrainer(**kwargs)

    return _build


@pytest.mark.parametrize(
    "environment, message",
    [
        ({"PYTHONHOME": "/usr"}, "'PYTHONHOME' replaces where the job's Python finds its standard library"),
        ({"TORCHINDUCTOR_CACHE_DIR": "/proc/x"}, "'TORCHINDUCTOR_CACHE_DIR' = '/proc/x': a folder of a virtual"),
        ({"TORCHINDUCTOR_CACHE_DIR": "/proc/../sys/y"}, "a folder of a virtual file system"),
        ({"SAGEMAKER_PROGRAM": "other.py"}, "'SAGEMAKER_PROGRAM' is reserved: the SageMaker training toolkit reads"),
        ({"SAGEMAKER_TRAINING_MODULE": "x:main"}, "'SAGEMAKER_TRAINING_MODULE' is reserved"),
    ],
)
@pytest.mark.parametrize("local", [True, False])
def test_environment_that_breaks_the_launcher_is_refused_by_name(make, build_trainer, environment, message, local):
    from sagemaker_tc import EstimatorArgumentError

    instance = {} if local else {"instance_type": "ml.g5.2xlarge", "role": ROLE, "output_path": "s3://bucket/out"}
    with pytest.raises(EstimatorArgumentError, match=message):
        make(environment=environment, **instance)
    with pytest.raises(EstimatorArgumentError, match=message):
        build_trainer(local=local, environment=environment)


def test_a_local_inductor_folder_nothing_can_be_written_in_is_refused(make, tmp_path):
    from sagemaker_tc import EstimatorArgumentError

    (tmp_path / "file").write_text("")
    with pytest.raises(EstimatorArgumentError, match=r"'TORCHINDUCTOR_CACHE_DIR' = .*file/x.*is a file"):
        make(environment={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "file" / "x")})
    make(environment={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})  # a folder of the user's: kept


@pytest.mark.parametrize("name", ["TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE"])
def test_switching_torch_compile_off_in_the_environment_is_warned_at_construction(make, build_trainer, name):
    import warnings

    from sagemaker_tc import ConfigWarning, TrainingCompilerConfig

    with pytest.warns(ConfigWarning, match=rf"{name}=1 switches torch.compile off in the job"):
        make(environment={name: "1"})
    with pytest.warns(ConfigWarning, match=rf"{name}=1 switches torch.compile off"):
        build_trainer(environment={name: "1"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        make(environment={name: "0"})  # torch reads only "1"
        make(environment={name: "1"}, compiler_config=TrainingCompilerConfig(enabled=False))


@pytest.mark.slow
def test_a_job_with_torch_compile_disable_reports_eager_and_names_the_variable(tmp_path):
    import tarfile as tarfiles

    from sagemaker_tc import ConfigWarning, PyTorch, TrainingCompilerConfig

    code = tmp_path / "code"
    code.mkdir()
    (code / "loop.py").write_text(
        "import torch\nimport sagemaker_tc\n"
        "model = sagemaker_tc.compile_model(torch.nn.Linear(4, 1))\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "for _ in range(4):\n"
        "    model(torch.ones(2, 4)).sum().backward()\n"
        "    optimizer.step()\n"
        "    optimizer.zero_grad()\n"
    )
    with pytest.warns(ConfigWarning, match="TORCH_COMPILE_DISABLE=1"):
        estimator = PyTorch(
            "loop.py",
            source_dir=str(code),
            instance_type="local_process",
            compiler_config=TrainingCompilerConfig(plan="regional", baseline_steps=0),
            environment={"TORCH_COMPILE_DISABLE": "1"},
            output_path=str(tmp_path / "out"),
        )
    estimator.fit()
    with tarfiles.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        report = json.loads(tar.extractfile("compiler/report.json").read())
    assert report["compiled"] is False and report["graphs"] == 0
    assert report["variant"] != "compiled" and report["variant"] in (None, "eager")
    assert report["fallback_reason"].startswith("TORCH_COMPILE_DISABLE=1 in the job's environment switched")


# -- role ARNs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("role", ["arn:aws:iam::123456789012:role/Rôle", "arn:aws:iam::123456789012:role/R\u00a0"])
@pytest.mark.parametrize("local", [True, False])
def test_a_role_with_a_non_ascii_character_is_refused_in_every_mode(make, build_trainer, role, local):
    from sagemaker_tc import EstimatorArgumentError

    instance = {} if local else {"instance_type": "ml.g5.2xlarge", "output_path": "s3://bucket/out"}
    with pytest.raises(EstimatorArgumentError, match=r"not an ASCII character: IAM role ARNs are ASCII"):
        make(role=role, **instance)
    with pytest.raises(EstimatorArgumentError, match=r"not an ASCII character"):
        build_trainer(local=local, role=role)


# -- source_dir: what ModelTrainer's upload leaves out ---------------------------------------------
def test_source_dir_leaves_out_what_modeltrainers_upload_leaves_out(tmp_path):
    from sagemaker.core.training.configs import SourceCode

    from sagemaker_tc.sdk.source import build_source_archive, resolve_source

    src = tmp_path / "src"
    for name in [".env", ".cache/hub/model.bin", ".DS_Store", "pkg/.DS_Store", "pkg/.env", "pkg/util.py", "train.py"]:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text("SECRET=1" if name.endswith(".env") else "")
    (src / ".envrc").write_text("")  # not a name ModelTrainer leaves out: shipped
    archive = build_source_archive(resolve_source("train.py", str(src)), tmp_path / "out", inject_launcher=False)
    with tarfile.open(archive) as tar:
        shipped = sorted(tar.getnames())
    assert shipped == [".envrc", "pkg", "pkg/util.py", "train.py"]
    left_out = set(SourceCode.model_fields["ignore_patterns"].default)
    from sagemaker_tc.sdk.source_tree import SKIPPED_NAMES

    assert left_out <= SKIPPED_NAMES  # at least what sagemaker-train leaves out by default


def test_an_entry_point_where_nothing_is_shipped_from_is_refused(tmp_path):
    from sagemaker_tc import SourceNotFoundError
    from sagemaker_tc.sdk.source import resolve_source

    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "train.py").write_text("")
    with pytest.raises(SourceNotFoundError, match=r"'.cache/train.py' lies where source_dir is never shipped from"):
        resolve_source(".cache/train.py", str(tmp_path))


# -- the command line ------------------------------------------------------------------------------
# Each bad option comes with a later one the old code refused ("--steps 1", a multiple above the cap):
# a refusal that names the bad option shows it is checked first, and the old code, which took it,
# ends at once too instead of running the suite.
@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--models", "", "--steps", "1"], "BenchError: --models '' names nothing"),
        (["bench", "--models", ",", "--steps", "1"], "BenchError: --models ',' names nothing"),
        (["bench", "--variants", "", "--steps", "1"], "BenchError: --variants '' names nothing"),
        (["tune", "--modes", "", "--steps", "1"], "BenchError: --modes '' names nothing"),
        (["bench", "--batch-size", "100000000", "--steps", "1"], "BenchError: batch_size must be at most 65536"),
        (["tune", "--max-batch-size", "100000000", "--multiple-of", "200000000"], "max_batch must be at most 65536"),
    ],
)
def test_bench_and_tune_refuse_empty_lists_and_huge_batches_before_work(tmp_path, capsys, argv, message):
    from sagemaker_tc.cli import main

    out = tmp_path / "out"
    assert main([*argv, "--device", "cpu", "--out", str(out)]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, option",
    [
        (["bench", "--time-budget", "nan"], "--time-budget"),
        (["bench", "--timeout", "inf"], "--timeout"),
        (["tune", "--memory-budget-gib", "inf"], "--memory-budget-gib"),
        (["tune", "--time-budget", "-1"], "--time-budget"),
    ],
)
def test_non_finite_budgets_are_refused_at_parse(tmp_path, capsys, argv, option):
    from sagemaker_tc.cli import main

    with pytest.raises(SystemExit) as exited:
        main([*argv, "--steps", "1", "--device", "cpu", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"argument {option}:" in err and "takes a finite number > 0" in err


def test_verify_names_an_empty_model_and_a_script_path_that_is_no_module(tmp_path, capsys, monkeypatch):
    from sagemaker_tc.cli import main

    assert main(["verify", "--model", ""]) == 1
    assert "BenchError: unknown model ''; the suite has:" in capsys.readouterr().err
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    assert main(["verify", "--script", "../../../etc/passwd:f"]) == 1
    assert "ScriptLoadError: --script '../../../etc/passwd': no such .py file, and not a module name" in (
        capsys.readouterr().err
    )
    monkeypatch.chdir("/")
    assert main(["verify", "--script", "../../../etc/passwd:f"]) == 1  # here it is a file, but no Python module
    assert "ScriptLoadError: cannot load /etc/passwd as a Python module" in capsys.readouterr().err


def _output_archive(path, members: dict) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, content[1]
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))


@pytest.mark.parametrize(
    "kind, message",
    [
        ("link-to-nothing", "compiler/report.json is not a regular file"),
        ("link-to-member", "compiler/report.json is not a regular file"),
        ("deep", "its JSON cannot be read (nested too deeply)"),
        ("digits", "its JSON cannot be read (Exceeds the limit (4300 digits) for integer string conversion"),
    ],
)
def test_report_names_what_is_wrong_with_a_hostile_report(tmp_path, capsys, kind, message):
    from sagemaker_tc.cli import main

    if kind.startswith("link"):
        path = tmp_path / "output.tar.gz"
        target = "../../etc/passwd" if kind == "link-to-nothing" else "compiler/other.json"
        report = json.dumps({"compiled": True, "steps": 1}).encode()
        _output_archive(path, {"compiler/other.json": report, "compiler/report.json": ("link", target)})
    else:
        path = tmp_path / "report.json"
        depth = 100_000
        text = "[" * depth + "]" * depth if kind == "deep" else '{"compiled": true, "steps": ' + "1" * 5001 + "}"
        path.write_text(text)
    assert main(["report", str(path)]) == 2
    assert f"ReportNotFoundError: {path}" in (err := capsys.readouterr().err) and message in err


def test_the_command_has_a_version(capsys):
    from sagemaker_tc import __version__
    from sagemaker_tc.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"sagemaker-tc {__version__}\n"


# -- paths under an unknown user's home, max_run stops, torch's checkpoint assertion ---------------
@pytest.mark.parametrize("argument", ["output_path", "source_dir", "cache"])
def test_a_path_under_an_unknown_users_home_is_refused_by_name(make, argument):
    from sagemaker_tc import EstimatorArgumentError, TrainingCompilerConfig

    path = "~sagemaker-tc-no-such-user/x"
    given = {"cache": {"compiler_config": TrainingCompilerConfig(cache=path)}}.get(argument, {argument: path})
    with pytest.raises(
        EstimatorArgumentError,
        match=rf"{argument}='~sagemaker-tc-no-such-user/x': "
        r"'~sagemaker-tc-no-such-user' names no user's home folder on this machine",
    ):
        make(**given)


def test_wait_says_a_job_was_stopped_at_max_run_and_returns_for_a_users_stop():
    from sagemaker_tc import MaxRuntimeExceededError, TrainingJobFailedError
    from sagemaker_tc.sdk import job_status

    reason = "MaxRuntimeExceeded: the job ran longer than 8 seconds and was stopped"
    with pytest.raises(MaxRuntimeExceededError) as stopped:
        job_status.check_outcome("job-1", "Stopped", "MaxRuntimeExceeded", reason)
    assert isinstance(stopped.value, TrainingJobFailedError)  # SDK v2 code catching failures still does
    assert str(stopped.value).startswith("Training job job-1 was stopped at its max_run limit (MaxRuntimeExceeded)")
    assert "failed" not in str(stopped.value) and stopped.value.failure_reason == reason
    job_status.check_outcome("job-1", "Stopped", "Stopped", None)  # a stop() the user asked for
    with pytest.raises(TrainingJobFailedError, match="Training job job-1 failed. Reason: boom") as failed:
        job_status.check_outcome("job-1", "Failed", "Failed", "boom")
    assert not isinstance(failed.value, MaxRuntimeExceededError)


@pytest.mark.slow
def test_a_local_job_past_its_max_run_raises_max_runtime_exceeded(tmp_path):
    from sagemaker_tc import MaxRuntimeExceededError, PyTorch

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    estimator = PyTorch(
        "train.py", source_dir=str(code), instance_type="local_process", output_path=str(tmp_path / "out"), max_run=5
    )
    with pytest.raises(MaxRuntimeExceededError, match="was stopped at its max_run limit"):
        estimator.fit(logs=False)
    assert estimator.latest_training_job.describe()["SecondaryStatus"] == "MaxRuntimeExceeded"


@pytest.mark.slow
def test_a_modeltrainer_local_job_past_its_max_run_raises_max_runtime_exceeded(build_trainer, source_dir):
    from sagemaker.core.shapes import StoppingCondition
    from sagemaker.core.training.configs import SourceCode

    from sagemaker_tc import MaxRuntimeExceededError

    trainer = build_trainer(
        source_code=SourceCode(source_dir=str(source_dir), entry_script="sleeper.py"),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=5),
    )
    with pytest.raises(MaxRuntimeExceededError, match="was stopped at its max_run limit"):
        trainer.train(wait=True, logs=False)
    assert trainer.latest_local_job.secondary_status == "MaxRuntimeExceeded"


def test_torchs_checkpoint_assertion_is_named_and_explained():
    """The assertion torch's non-reentrant checkpoint raises when a recompute saves more tensors than
    the forward did (torch 2.8: a bare ``assert not target_frame.early_stop``), raised by torch itself."""
    import weakref

    import torch
    from torch.utils import checkpoint

    from sagemaker_tc.compiler.failures import error_summary

    frame = checkpoint._CheckpointFrame(None, True, None, None)  # early stop on, nothing saved in its forward
    with pytest.raises(AssertionError) as raised:
        with checkpoint._recomputation_hook(weakref.ref(frame), 0):
            torch.ones(2, requires_grad=True) * torch.ones(2, requires_grad=True)  # saves tensors: torch asserts
    bare = AssertionError().with_traceback(raised.value.__traceback__)  # what torch 2.8 raises
    for error in (raised.value, bare):
        summary = error_summary(error)
        assert summary.startswith("AssertionError: ")
        assert "at torch/utils/checkpoint.py:" in summary and "early_stop" in summary
        assert "the recompute saved more tensors than the block's first forward did" in summary
        assert "a torch limit of gradient checkpointing under torch.compile" in summary


def test_another_bare_assertion_names_its_file_and_line(tmp_path):
    from sagemaker_tc.compiler.failures import error_summary

    source = tmp_path / "user_model.py"  # a module of the user's (pytest rewrites the asserts of test files)
    source.write_text("def check(value):\n    assert value > 1\n")
    namespace: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    with pytest.raises(AssertionError) as raised:
        namespace["check"](0)
    assert error_summary(raised.value) == "AssertionError: (no message) at user_model.py:2 (assert value > 1)"
