"""Compile cache across jobs: entries by environment, corrupt/stale/missing ignored, S3 through moto, jobs."""

import hashlib
import json
import logging
import tarfile

import pytest
from conftest import REPO, write_sst2_slice

from sagemaker_tc import PyTorch, TrainingCompilerConfig
from sagemaker_tc.compiler.cache import META_NAME, CompileCache, environment, environment_key


def fill(folder, files):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def entry_files(location):
    return sorted(p.name for p in location.rglob("*") if p.is_file())


def test_save_then_load_restores_the_folder_into_a_new_path(tmp_path):
    first = tmp_path / "job1"
    cache = CompileCache(str(tmp_path / "cache"), first)
    assert cache.load().state == "cold"
    fill(first, {"fxgraph/ab/entry": "graph", "xy/kernel.so": "binary", "locks/x.lock": ""})  # what the job compiled
    saved = cache.save()
    assert saved.state == "saved" and saved.files == 2 and saved.saved_bytes > 0  # lock files left out
    meta = json.loads((tmp_path / "cache" / cache.key / META_NAME).read_text())
    archive = tmp_path / "cache" / cache.key / meta["archive"]
    # The entry is keyed by this environment and names its archive by content: size, hash and members.
    assert meta["environment"] == environment() and cache.key == environment_key(meta["environment"])
    assert meta["files"] == 2 and meta["bytes"] == archive.stat().st_size == saved.saved_bytes
    assert meta["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert meta["archive"] == f"inductor-{meta['sha256'][:16]}.tar.gz"
    with tarfile.open(archive) as tar:
        assert sorted(member.name for member in tar.getmembers() if member.isfile()) == [
            "fxgraph/ab/entry",
            "xy/kernel.so",
        ]

    second = tmp_path / "job2"
    warm = CompileCache(str(tmp_path / "cache"), second)
    outcome = warm.load()
    assert (outcome.state, outcome.files) == ("warm", 2)
    assert (second / "fxgraph/ab/entry").read_text() == "graph" and (second / "xy/kernel.so").read_text() == "binary"
    # A job that compiled nothing new leaves the entry as it was.
    assert warm.save().state == "unchanged"


def test_a_new_save_replaces_the_archive_and_removes_the_old_one(tmp_path):
    folder = tmp_path / "inductor"
    cache = CompileCache(str(tmp_path / "cache"), folder)
    cache.load()
    fill(folder, {"fxgraph/a": "1"})
    cache.save()
    fill(folder, {"fxgraph/b": "2"})
    cache.save()
    names = entry_files(tmp_path / "cache")
    assert names.count(META_NAME) == 1 and len([n for n in names if n.endswith(".tar.gz")]) == 1


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("archive", "corrupt: inductor-"),
        ("meta", "unreadable: JSONDecodeError"),
        ("missing-archive", "is missing"),
    ],
)
def test_a_corrupt_cache_is_ignored_with_a_warning(tmp_path, caplog, damage, reason):
    source = tmp_path / "source"
    fill(source, {"fxgraph/entry": "graph"})
    CompileCache(str(tmp_path / "cache"), source).save()
    entry = tmp_path / "cache" / environment_key(CompileCache(str(tmp_path / "cache"), source).env)
    archive = next(entry.glob("*.tar.gz"))
    if damage == "archive":
        archive.write_bytes(archive.read_bytes()[:-20] + b"garbage-garbage-garb")
    elif damage == "meta":
        (entry / META_NAME).write_text("{not json")
    else:
        archive.unlink()
    target = tmp_path / "target"
    with caplog.at_level(logging.WARNING, logger="sagemaker_tc.compiler.cache"):
        outcome = CompileCache(str(tmp_path / "cache"), target).load()
    assert outcome.state == "cold" and reason in outcome.reason
    assert "Compile cache ignored, compiling cold" in caplog.text
    assert not (target / "fxgraph" / "entry").exists()


@pytest.mark.parametrize("named", ["../../victim.txt", "../meta.json", "/etc/hostname", 7])
def test_an_archive_name_outside_the_entry_is_never_read_nor_deleted(tmp_path, named):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    location = tmp_path / "cache"
    folder = tmp_path / "inductor"
    cache = CompileCache(str(location), folder)
    entry = location / cache.key
    entry.mkdir(parents=True)
    named = "../" * (len(entry.relative_to(tmp_path).parts)) + "victim.txt" if named == "../../victim.txt" else named
    (entry / META_NAME).write_text(json.dumps({"archive": named, "sha256": "x"}))
    outcome = cache.load()
    assert outcome.state == "cold" and "names no archive" in outcome.reason
    fill(folder, {"fxgraph/new": "graph"})
    assert cache.save().state == "saved"  # replaces the bad entry...
    assert victim.read_text() == "keep me"  # ...and deletes nothing outside it
    assert len(list(entry.glob("inductor-*.tar.gz"))) == 1


def test_a_users_inductor_folder_gives_only_the_compilers_files_to_the_cache(tmp_path):
    folder = tmp_path / "my-inductor"
    fill(folder, {".aws/credentials": "secret", "notes.txt": "mine", "data/x.csv": "1", "fxgraph/.hidden": "h"})
    (folder / "ab").mkdir()
    (folder / "ab" / "link.so").symlink_to(folder / "notes.txt")
    cache = CompileCache(str(tmp_path / "cache"), folder)
    cache.load()
    fill(folder, {"fxgraph/ab/entry": "graph", "xy/kernel.so": "binary", "triton/0/k.cubin": "k"})
    assert cache.save().files == 3
    archive = next((tmp_path / "cache" / cache.key).glob("*.tar.gz"))
    with tarfile.open(archive) as tar:
        assert sorted(m.name for m in tar.getmembers() if m.isfile()) == [
            "fxgraph/ab/entry",
            "triton/0/k.cubin",
            "xy/kernel.so",
        ]


def test_what_a_users_inductor_folder_held_before_the_job_is_never_cached(tmp_path):
    """Issue 33's recount: TORCHINDUCTOR_CACHE_DIR set to a folder of the user's whose own folders
    have compiler-like names (two characters, ``cache/``): their files stay out of the cache; the
    launcher records them (FOREIGN_INDEX) and a rank's cache on the same folder reads that."""
    from sagemaker_tc.compiler.job_cache import JobCache

    folder = tmp_path / "home"
    fill(folder, {"go/pkg/secret.txt": "hunter2", "cache/notes.txt": "mine", "fxgraph/old": "earlier"})
    environ = {"TORCHINDUCTOR_CACHE_DIR": str(folder)}
    config = TrainingCompilerConfig(cache=str(tmp_path / "cache"))
    launcher = JobCache.open(config, environ)
    assert launcher.private_dir is None  # the user's own folder is used as it is
    fill(folder, {"fxgraph/new": "graph", "xy/kernel.so": "binary"})  # what the job compiled
    rank = CompileCache(config.cache, folder)  # a torchrun rank's cache: reads the launcher's index
    for cache in (launcher.cache, rank):
        saved = cache.save()
        assert saved.state == "saved" and saved.files == 2, saved
        archive = next((tmp_path / "cache" / cache.key).glob("*.tar.gz"))
        with tarfile.open(archive) as tar:
            assert sorted(m.name for m in tar.getmembers() if m.isfile()) == ["fxgraph/new", "xy/kernel.so"]


def test_a_cache_entry_folder_that_is_a_link_is_never_written_through(tmp_path, caplog):
    """An entry folder linked to another folder: the save writes nothing there (its meta.json is
    kept), and the load does not read through it."""
    elsewhere = tmp_path / "elsewhere"
    fill(elsewhere, {META_NAME: "theirs"})
    location, folder = tmp_path / "cache", tmp_path / "inductor"
    cache = CompileCache(str(location), folder)
    location.mkdir()
    (location / cache.key).symlink_to(elsewhere, target_is_directory=True)
    fill(folder, {"fxgraph/a": "1"})
    with caplog.at_level(logging.WARNING):
        assert cache.save().state == "failed"
        assert CompileCache(str(location), tmp_path / "other").load().state == "cold"
    assert sorted(p.name for p in elsewhere.iterdir()) == [META_NAME]
    assert (elsewhere / META_NAME).read_text() == "theirs"
    assert "a link leads elsewhere" in caplog.text


def _workload(model="Bert"):
    from sagemaker_tc.compiler import history

    return history.WorkloadKey(model=model, parameters=10, device="cpu", world_size=1, samples_per_step=8)


def _measured(plans):
    return {"eager_step_seconds": 0.5, "chosen": next(iter(plans)), "plans": plans}


def test_the_plan_history_travels_with_the_cache_entry(tmp_path):
    """``sagemaker_tc_plans.json`` (at the Inductor folder's top, written before the save) is saved in
    the entry and restored with it, so the next job estimates plans from what this one measured."""
    from sagemaker_tc.compiler import history

    first, second = tmp_path / "job1", tmp_path / "job2"
    cache = CompileCache(str(tmp_path / "cache"), first)
    cache.load()
    fill(first, {"fxgraph/ab/entry": "graph"})
    history.write(first, _workload(), _measured({"regional": {"compile_seconds": 3.0, "steady_step_seconds": 0.2}}))
    assert cache.save().files == 2
    outcome = CompileCache(str(tmp_path / "cache"), second).load()
    assert (outcome.state, outcome.files) == ("warm", 2)
    assert history.read(second, _workload())["plans"]["regional"]["steady_step_seconds"] == 0.2


def test_a_warm_job_saves_again_when_it_measured_a_plan_or_workload_the_history_lacked(tmp_path):
    """Nothing newly compiled: a history that only re-measured the same plans keeps the entry; a plan
    (or workload) the history did not hold is saved."""
    from sagemaker_tc.compiler import history

    location, first = tmp_path / "cache", tmp_path / "job1"
    cache = CompileCache(str(location), first)
    cache.load()
    fill(first, {"fxgraph/ab/entry": "graph"})
    history.write(first, _workload(), _measured({"regional": {"compile_seconds": 3.0, "steady_step_seconds": 0.2}}))
    cache.save()

    again = tmp_path / "job2"
    warm = CompileCache(str(location), again)
    assert warm.load().state == "warm"
    history.write(again, _workload(), _measured({"regional": {"compile_seconds": 0.1, "steady_step_seconds": 0.21}}))
    assert warm.save().state == "unchanged"
    history.write(again, _workload(), _measured({"model": {"compile_seconds": 4.0, "steady_step_seconds": 0.15}}))
    assert warm.save().state == "saved"
    third = tmp_path / "job3"
    assert CompileCache(str(location), third).load().state == "warm"
    assert sorted(history.read(third, _workload())["plans"]) == ["model", "regional"]


def test_entries_of_other_environments_are_stale_not_loaded(tmp_path, caplog):
    other = tmp_path / "cache" / "0123456789abcdef"
    other.mkdir(parents=True)
    (other / META_NAME).write_text(json.dumps({"archive": "x.tar.gz", "environment": {"torch": "2.6.0"}}))
    with caplog.at_level(logging.WARNING):
        outcome = CompileCache(str(tmp_path / "cache"), tmp_path / "inductor").load()
    assert outcome.state == "cold" and outcome.reason.startswith("stale") and "torch 2.6.0" in outcome.reason
    assert "stale" in caplog.text


def test_s3_cache_round_trip_through_moto(aws, tmp_path):
    import boto3

    boto3.client("s3").create_bucket(Bucket="compile-cache")
    source = tmp_path / "source"
    first = CompileCache("s3://compile-cache/team/bert", source)
    assert first.load().reason.startswith("empty")
    fill(source, {"fxgraph/entry": "graph", "xy/kernel.so": "bin"})
    assert first.save().state == "saved"
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket="compile-cache")["Contents"]]
    assert f"team/bert/{first.key}/{META_NAME}" in keys
    target = tmp_path / "target"
    assert CompileCache("s3://compile-cache/team/bert", target).load().state == "warm"
    assert (target / "xy/kernel.so").read_text() == "bin"
    # An unreachable bucket is a cold start, not a crash.
    assert CompileCache("s3://no-such-bucket/x", tmp_path / "t2").load().state == "cold"


def test_an_s3_cache_larger_than_one_part_goes_up_in_parts_and_round_trips(aws, tmp_path, monkeypatch):
    """An archive over the transfer's part size goes up as a multipart upload (boto3's managed
    transfer; S3 gives such an object an ETag ending in ``-<parts>``) and comes back whole."""
    import random

    import boto3

    from sagemaker_tc.compiler import cache_store

    monkeypatch.setattr(cache_store, "PART_BYTES", 5 << 20)  # S3's smallest part
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="compile-cache")
    source = tmp_path / "source"
    first = CompileCache("s3://compile-cache/team", source)
    assert first.load().reason.startswith("empty")
    kernel = random.Random(0).randbytes(11 << 20)  # random bytes: gzip leaves the archive ~11 MiB, 3 parts
    fill(source, {"fxgraph/entry": "graph"})
    (source / "ab").mkdir()
    (source / "ab" / "kernel.so").write_bytes(kernel)
    saved = first.save()
    assert saved.state == "saved" and saved.saved_bytes > 2 * (5 << 20)
    meta = json.loads(s3.get_object(Bucket="compile-cache", Key=f"team/{first.key}/{META_NAME}")["Body"].read())
    head = s3.head_object(Bucket="compile-cache", Key=f"team/{first.key}/{meta['archive']}")
    assert head["ContentLength"] == meta["bytes"] == saved.saved_bytes
    assert head["ETag"].strip('"').endswith("-3")  # three parts of at most 5 MiB, not one PutObject

    target = tmp_path / "target"
    outcome = CompileCache("s3://compile-cache/team", target).load()
    assert (outcome.state, outcome.files, outcome.bytes) == ("warm", 2, saved.saved_bytes)
    assert (target / "ab" / "kernel.so").read_bytes() == kernel
    assert (target / "fxgraph" / "entry").read_text() == "graph"


def run_job(tmp_path, name, channels, tiny_bert_dir, cache_uri):
    estimator = PyTorch(
        "ddp_loop.py",
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        hyperparameters={"model_dir": str(tiny_bert_dir), "steps": 6, "global_batch": 8},
        compiler_config=TrainingCompilerConfig(plan="regional", cache=cache_uri, baseline_steps=0),
        output_path=str(tmp_path / name),
    )
    estimator.fit(channels)
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        return json.loads(tar.extractfile("compiler/report.json").read())


@pytest.mark.slow
def test_second_job_starts_warm_from_the_first_jobs_cache(tmp_path, tiny_bert_dir, capsys):
    write_sst2_slice(tmp_path / "train", "train", 64)
    channels = {"train": str(tmp_path / "train")}
    cache_uri = str(tmp_path / "compile-cache")

    first = run_job(tmp_path, "first", channels, tiny_bert_dir, cache_uri)
    assert first["compiled"] is True
    assert first["cache"]["state"] == "cold" and first["cache"]["saved"] == "saved"
    assert first["inductor_cache"]["fx_graph_misses"] > 0

    second = run_job(tmp_path, "second", channels, tiny_bert_dir, cache_uri)
    assert second["compiled"] is True and second["cache"]["state"] == "warm"
    # Every compiled graph came from the cache: the private Inductor folder started empty.
    assert second["inductor_cache"]["fx_graph_misses"] == 0 and second["inductor_cache"]["fx_graph_hits"] > 0
    assert second["cache"]["saved"] == "unchanged"

    entry = next((tmp_path / "compile-cache").glob("*/*.tar.gz"))
    entry.write_bytes(b"not a gzip archive")
    capsys.readouterr()
    third = run_job(tmp_path, "third", channels, tiny_bert_dir, cache_uri)
    assert third["compiled"] is True and third["cache"]["state"] == "cold"
    assert "corrupt" in third["cache"]["reason"] and third["cache"]["saved"] == "saved"
    assert "Compile cache ignored, compiling cold" in capsys.readouterr().out
