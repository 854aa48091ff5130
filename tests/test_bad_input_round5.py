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
