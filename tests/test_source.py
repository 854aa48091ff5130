"""Source packaging: the user's code plus the injected launcher."""

import tarfile

import pytest

from sagemaker_tc import EstimatorArgumentError, SourceNotFoundError
from sagemaker_tc.contract import LAUNCHER_PROGRAM
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


def test_entry_point_alone_is_shipped_by_its_name(tmp_path):
    script = tmp_path / "scripts" / "train.py"
    script.parent.mkdir()
    script.write_text("")
    spec = resolve_source(str(script), None)
    assert spec.entry_point == "train.py"
    assert names(build_source_archive(spec, tmp_path / "out", inject_launcher=False)) == ["train.py"]


def test_symlinks_are_packed_as_the_files_they_point_to(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "helpers.py").write_text("VALUE = 1\n")
    (shared / "train.py").write_text("import helpers\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "helpers.py").symlink_to(shared / "helpers.py")
    (src / "train.py").symlink_to(shared / "train.py")  # an entry point that is a link inside source_dir
    archive = build_source_archive(resolve_source("train.py", str(src)), tmp_path / "out", inject_launcher=False)
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
