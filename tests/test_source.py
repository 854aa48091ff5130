"""Source packaging: the user's code plus the injected launcher."""

import tarfile
from pathlib import Path

import pytest

from sagemaker_tc import EstimatorArgumentError, SourceNotFoundError
from sagemaker_tc.contract import LAUNCHER_PROGRAM
from sagemaker_tc.errors import SourceLinkError
from sagemaker_tc.sdk.source import build_source_archive, resolve_source


def names(archive):
    with tarfile.open(archive) as tar:
        return sorted(tar.getnames())


def test_source_dir_archive_has_code_and_launcher(tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "train.py").write_text("print('hi')")
    (src / "pkg" / "util.py").write_text("")
    (src / "pkg" / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"")
    archive = build_source_archive(resolve_source("train.py", str(src)), tmp_path / "out", inject_launcher=True)
    listed = names(archive)
    user = [name for name in listed if not name.startswith("sagemaker_tc/") and name != "sagemaker_tc"]
    assert user == sorted([LAUNCHER_PROGRAM, "pkg", "pkg/util.py", "train.py"])
    with tarfile.open(archive) as tar:
        assert "sagemaker_tc.container.launcher" in tar.extractfile(LAUNCHER_PROGRAM).read().decode()
    # The container side of the runtime travels with the code; the SDK does not.
    for module in (
        "__init__.py",
        "config.py",
        "contract.py",
        "container/launcher.py",
        "compiler/session.py",
        "_internals.py",
    ):
        assert f"sagemaker_tc/{module}" in listed
    assert not any(name.startswith("sagemaker_tc/sdk") or name.endswith(".pyc") for name in listed)


# The in-job runtime: these folders of sagemaker_tc and its top-level modules but the command (cli.py).
RUNTIME_FOLDERS = {"compiler", "container", "integrations", "tuning"}


def test_a_job_ships_exactly_the_runtime_modules_and_no_bench(tmp_path):
    import sagemaker_tc

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('hi')")
    archive = build_source_archive(resolve_source("train.py", str(src)), tmp_path / "out", inject_launcher=True)
    shipped = {name.removeprefix("sagemaker_tc/") for name in names(archive) if name.startswith("sagemaker_tc/")}
    shipped_modules = {name for name in shipped if name.endswith(".py")}
    package = Path(sagemaker_tc.__file__).parent
    runtime_modules = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if "__pycache__" not in path.parts
        and (
            path.relative_to(package).parts[0] in RUNTIME_FOLDERS or (path.parent == package and path.name != "cli.py")
        )
    }
    assert shipped_modules == runtime_modules
    assert {name.split("/")[0] for name in shipped if "/" in name} == RUNTIME_FOLDERS
    assert {"__init__.py", "config.py", "errors.py", "_internals.py"} <= shipped_modules
    assert "cli.py" not in shipped and not any(name.startswith("sdk") for name in shipped)
    assert not any("bench" in name or "verify" in name for name in names(archive))


def test_entry_point_alone_is_shipped_by_its_name(tmp_path):
    script = tmp_path / "scripts" / "train.py"
    script.parent.mkdir()
    script.write_text("")
    spec = resolve_source(str(script), None)
    assert spec.entry_point == "train.py"
    assert names(build_source_archive(spec, tmp_path / "out", inject_launcher=False)) == ["train.py"]


def test_symlinks_are_packed_as_the_files_they_point_to(tmp_path):
    """With the documented opt-in, links to files outside source_dir are shipped as those files."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "helpers.py").write_text("VALUE = 1\n")
    (shared / "train.py").write_text("import helpers\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "helpers.py").symlink_to(shared / "helpers.py")
    (src / "train.py").symlink_to(shared / "train.py")  # an entry point that is a link inside source_dir
    spec = resolve_source("train.py", str(src), allow_outside_links=True)
    archive = build_source_archive(spec, tmp_path / "out", inject_launcher=False)
    with tarfile.open(archive) as tar:
        assert tar.getmember("helpers.py").isfile()
        assert tar.extractfile("helpers.py").read() == b"VALUE = 1\n"


def test_missing_entry_point_is_an_error(tmp_path):
    with pytest.raises(EstimatorArgumentError, match="entry_point is required"):
        resolve_source("", str(tmp_path))


def test_missing_source_dir_is_an_error(tmp_path):
    with pytest.raises(SourceNotFoundError, match="is not a folder"):
        resolve_source("train.py", str(tmp_path / "nope"))


def test_entry_point_outside_source_dir_is_an_error(tmp_path):
    (tmp_path / "outside.py").write_text("")
    (tmp_path / "src").mkdir()
    with pytest.raises(SourceNotFoundError, match="was not found in source_dir"):
        resolve_source("train.py", str(tmp_path / "src"))
    with pytest.raises(SourceNotFoundError, match="must be inside source_dir"):
        resolve_source("../outside.py", str(tmp_path / "src"))


def test_user_file_named_like_the_launcher_is_refused(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / LAUNCHER_PROGRAM).write_text("")
    spec = resolve_source("train.py", str(tmp_path))
    with pytest.raises(EstimatorArgumentError, match="already contains"):
        build_source_archive(spec, tmp_path / "out", inject_launcher=True)
    with pytest.raises(EstimatorArgumentError, match="may not be named"):
        resolve_source(LAUNCHER_PROGRAM, str(tmp_path))


# --- symbolic links (issue 15): nothing outside source_dir is shipped unless the user opts in -------------
@pytest.fixture
def linked_source(tmp_path):
    """A source_dir with links inside it (a file, a folder) and, next to it, a secrets folder."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("import pkg.util\n")
    (src / "pkg" / "util.py").write_text("VALUE = 1\n")
    (src / "util_link.py").symlink_to(src / "pkg" / "util.py")
    (src / "pkg_link").symlink_to("pkg", target_is_directory=True)  # a relative link
    secrets = tmp_path / "home" / ".aws"
    secrets.mkdir(parents=True)
    (secrets / "credentials").write_text("[default]\naws_secret_access_key = hunter2\n")
    return src, secrets


def test_links_inside_source_dir_are_packed_as_what_they_point_to(linked_source, tmp_path):
    src, _ = linked_source
    archive = build_source_archive(resolve_source("train.py", str(src)), tmp_path / "out", inject_launcher=False)
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == [
            "pkg",
            "pkg/util.py",
            "pkg_link",
            "pkg_link/util.py",
            "train.py",
            "util_link.py",
        ]
        assert tar.getmember("pkg_link").isdir() and tar.getmember("util_link.py").isfile()
        assert tar.extractfile("pkg_link/util.py").read() == tar.extractfile("util_link.py").read() == b"VALUE = 1\n"


@pytest.mark.parametrize(
    ("name", "target", "message"),
    [
        ("passwd_link", "/etc/passwd", r"link 'passwd_link' points to '/etc/passwd', outside source_dir"),
        ("awsdir", "SECRETS", r"link 'awsdir' points to '.*/home/\.aws', outside source_dir"),
        ("up", "..", r"link 'up' points to '.*', outside source_dir"),
        ("pkg/up", "..", r"link 'pkg/up' points to '\.\.', a folder that contains the link: .*symlink loop"),
        ("gone.py", "missing.py", r"link 'gone.py' points to 'missing.py', which does not exist \(a dangling link\)"),
        ("loop_a", "loop_b", r"link 'loop_[ab]' points to 'loop_[ab]', which leads back to itself \(a symlink loop\)"),
    ],
)
def test_bad_links_are_refused_naming_the_link_and_its_target(linked_source, tmp_path, name, target, message):
    src, secrets = linked_source
    link = src / name
    link.symlink_to(secrets if target == "SECRETS" else target)
    if name == "loop_a":
        (src / "loop_b").symlink_to("loop_a")
    with pytest.raises(SourceLinkError, match=message):
        resolve_source("train.py", str(src))


def test_links_outside_are_shipped_only_with_the_opt_in_and_checked_again_when_packing(linked_source, tmp_path):
    src, secrets = linked_source
    spec = resolve_source("train.py", str(src))  # clean when the estimator is built
    (src / "awsdir").symlink_to(secrets)  # ... and a link appears before fit()
    with pytest.raises(SourceLinkError, match="allow_symlinks_outside_source_dir=True"):
        build_source_archive(spec, tmp_path / "out", inject_launcher=False)
    assert not (tmp_path / "out" / "sourcedir.tar.gz").exists()
    opted_in = resolve_source("train.py", str(src), allow_outside_links=True)
    with tarfile.open(build_source_archive(opted_in, tmp_path / "out2", inject_launcher=False)) as tar:
        assert b"hunter2" in tar.extractfile("awsdir/credentials").read()


def test_the_folders_sagemaker_tc_writes_are_never_packed_wherever_they_lie(tmp_path, monkeypatch):
    from sagemaker_tc import PyTorch, TrainingCompilerConfig

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('hi')")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "util.py").write_text("")
    for folder in ("sagemaker-tc-output/job-1", "my-output/job-2", "cache/key", "ckpt"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "hyperparameters.json").write_text('{"db_password": "hunter2"}')
    (tmp_path / "link-to-output").symlink_to(tmp_path / "my-output")
    config = TrainingCompilerConfig(cache="cache")
    local = PyTorch(
        "train.py",
        source_dir=".",
        instance_type="local_process",
        framework_version="2.8",
        py_version="py312",
        output_path="my-output",
        compiler_config=config,
        checkpoint_s3_uri="ckpt",
    )
    archive = build_source_archive(local.source, tmp_path / "out1", inject_launcher=False)
    assert names(archive) == ["lib", "lib/util.py", "train.py"]
    # A SageMaker job from the same folder leaves the default local output folder (earlier local jobs) out too.
    cloud = PyTorch(
        "train.py",
        source_dir=".",
        instance_type="ml.g5.xlarge",
        framework_version="2.8",
        py_version="py312",
        role="arn:aws:iam::111122223333:role/R",
    )
    archive = build_source_archive(cloud.source, tmp_path / "out2", inject_launcher=False)
    assert "sagemaker-tc-output" not in names(archive) and "out1" in names(archive)


def test_an_earlier_local_jobs_folder_is_never_packed_nor_its_channel_links_refused(tmp_path, monkeypatch):
    """A second estimator with ``source_dir="."`` after a ``local_process`` job there: the first job's
    folder (its hyperparameters, its channel link to data outside the source folder) is left out of
    the code and its links are not checked, whatever ``output_path`` the second estimator names."""
    from sagemaker_tc import PyTorch

    project, data = tmp_path / "project", tmp_path / "data"
    project.mkdir()
    data.mkdir()
    (data / "rows.csv").write_text("a,b\n")
    (project / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(project)

    def estimator(output_path: str | None) -> PyTorch:
        given = {"output_path": output_path} if output_path else {}
        versions = {"framework_version": "2.8", "py_version": "py312"}
        return PyTorch("train.py", source_dir=".", instance_type="local_process", **versions, **given)

    estimator("runs-a").fit({"train": str(data)})
    estimator(None).fit({"train": str(data)})  # the default output folder
    assert sorted(path.name for path in project.iterdir()) == ["runs-a", "sagemaker-tc-output", "train.py"]

    later = estimator("runs-b")  # constructing it lists the folder: no SourceLinkError for the old links
    assert names(build_source_archive(later.source, tmp_path / "out", inject_launcher=False)) == ["runs-a", "train.py"]


def test_an_earlier_jobs_checkpoint_location_and_compile_cache_are_never_packed(tmp_path, monkeypatch):
    """A job's local checkpoint location and a local compile cache hold the marker once written, so a
    later estimator that names neither never ships them (checkpoints can be gigabytes); the marker is
    never copied into a job's checkpoint folder."""
    from sagemaker_tc import PyTorch
    from sagemaker_tc.compiler.cache_store import CacheStore

    project, data = tmp_path / "project", tmp_path / "data"
    project.mkdir()
    data.mkdir()
    (project / "train.py").write_text(
        "import os, pathlib\n"
        "folder = pathlib.Path('/opt/ml/checkpoints')\n"
        "(pathlib.Path(os.environ['SM_MODEL_DIR']) / 'seen.txt').write_text(' '.join(sorted(os.listdir(folder))))\n"
        "(folder / 'checkpoint-1').mkdir(exist_ok=True)\n"
        "(folder / 'checkpoint-1' / 'w.bin').write_bytes(b'weights')\n"
    )
    monkeypatch.chdir(project)
    versions = {"framework_version": "2.8", "py_version": "py312", "instance_type": "local_process"}
    versions["output_path"] = str(tmp_path / "out")
    for _ in range(2):  # the second job copies the first's checkpoint in: never the marker
        job = PyTorch("train.py", source_dir=".", checkpoint_s3_uri="ckpts", **versions)
        job.fit({"train": str(data)}, logs=False)
    with tarfile.open(job.model_data.removeprefix("file://")) as archive:
        assert archive.extractfile("seen.txt").read() == b"checkpoint-1"
    assert (project / "ckpts" / "checkpoint-1" / "w.bin").read_bytes() == b"weights"
    CacheStore(str(project / "compile-cache")).write("key/meta.json", b"{}")  # what a job's cache save writes

    later = PyTorch("train.py", source_dir=".", **versions)
    assert names(build_source_archive(later.source, tmp_path / "archive", inject_launcher=False)) == ["train.py"]
