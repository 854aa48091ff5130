"""FSDP2 (fully_shard) with the compiler, proven on CPU (gloo) with 2-host local_process jobs: the same tiny
Llama, seed and data train the same in one process (eager), on 2 ranks sharded (eager), and on 2 ranks
sharded and compiled (plan="regional"), with activation checkpointing too; FSDP2's all-gathers fire the
same compiled as eager; the report says how the model was sharded and compiled. A Trainer asked for FSDP on
CPU runs DDP (accelerate shards only on GPUs); the report says so, and it trains as one process.

Tolerance: fp32, 20 AdamW steps. Measured here (torch 2.13, CPU): losses differ by at most 7.2e-7 between
the runs of the plain loop, parameters by at most 1.8e-6 (compiled vs eager FSDP2, with or without
activation checkpointing). The bound below is 1e-5 absolute on both, about 5x the largest seen.
"""

import json
import tarfile

import pytest
import torch
from conftest import REPO

from sagemaker_tc import PyTorch, TrainingCompilerConfig, _internals

GLOO_SUMS = _internals.gloo_reduce_scatter_average() == 2.0
pytestmark = [
    pytest.mark.slow,
    # torch 2.8's gloo reduce_scatter sums where FSDP2 asks for an average (pytorch#162338): sagemaker-tc
    # refuses FSDP2 on gloo there (tests/test_sharding.py), so these gloo jobs cannot run in that lane.
    pytest.mark.skipif(GLOO_SUMS, reason="this torch's gloo sums under ReduceOp.AVG (pytorch#162338): FSDP2 refused"),
]

LOSS_ATOL = 1e-5
PARAM_ATOL = 1e-5
TRAINER_PARAM_ATOL = 5e-5
"""The Trainer's compiled DDP run measured 7.6e-6 on parameters (layer 1's MLP weights, |w| ~0.1: a 7e-5
relative difference after 20 AdamW steps, which amplify tiny gradient differences where gradients are
near zero), 4.8e-7 on losses; its eager DDP run 5.4e-7."""
STEPS = 20


EAGER = TrainingCompilerConfig(backend="eager")  # through the launcher (torchrun), nothing compiled


def run_job(tmp_path, script, *, hosts, compiler=EAGER, **hyperparameters):
    """``script`` (tests/assets) as a local_process job on ``hosts`` hosts (torchrun, one process each, gloo
    when more than one). Returns ``(result.pt's content, report.json or None)``; the result's world size
    is checked (``hosts``)."""
    job = PyTorch(
        script,
        source_dir=str(REPO / "tests" / "assets"),
        instance_type="local_process",
        instance_count=hosts,
        distribution={"torch_distributed": {"enabled": True}} if hosts > 1 else None,
        hyperparameters={"steps": STEPS, **hyperparameters},
        compiler_config=compiler,
        output_path=str(tmp_path / "out"),
        max_run=600,
    )
    job.fit()
    with tarfile.open(job.model_data.removeprefix("file://")) as tar:
        tar.extractall(tmp_path / "model", filter="data")
    result = torch.load(tmp_path / "model" / "result.pt")
    assert result["world"] == hosts
    report = None
    with tarfile.open(job.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        if "compiler/report.json" in tar.getnames():
            report = json.load(tar.extractfile("compiler/report.json"))
    return result, report


def assert_same_training(result, reference, what, param_atol=PARAM_ATOL):
    torch.testing.assert_close(result["losses"], reference["losses"], rtol=0, atol=LOSS_ATOL, msg=f"{what}: losses")
    assert result["params"].keys() == reference["params"].keys()
    for name, tensor in result["params"].items():
        torch.testing.assert_close(tensor, reference["params"][name], rtol=0, atol=param_atol, msg=f"{what}: {name}")


def assert_fsdp2_report(report, plan):
    assert report["compiled"] is True and report["plan"] == plan
    assert report["recompiles"] == 0
    distributed = report["distributed"]
    assert distributed["strategy"] == "fsdp2" and distributed["world_size"] == 2
    assert distributed["units_sharded"] == 3 and distributed["activation_checkpointing"] is False
    units = {unit["module"]: unit for unit in distributed["units"]}
    assert units.keys() == {"<root>", "model.layers.0", "model.layers.1"}
    assert units["model.layers.0"] == {
        "module": "model.layers.0",
        "class": "LlamaDecoderLayer",
        "reshard_after_forward": True,
        "plan": plan,
    }
    assert units["<root>"]["plan"] == "eager" and units["<root>"]["class"] == "LlamaForCausalLM"


@pytest.fixture(scope="module")
def loop_runs(tmp_path_factory):
    """The plain loop three ways: one process eager, 2 hosts FSDP2 eager, 2 hosts FSDP2 compiled."""
    runs = {}
    runs["single"], _ = run_job(tmp_path_factory.mktemp("single"), "fsdp2_loop.py", hosts=1, compile=0)
    runs["eager"], _ = run_job(tmp_path_factory.mktemp("eager"), "fsdp2_loop.py", hosts=2, compile=0)
    folder = tmp_path_factory.mktemp("compiled")
    runs["compiled_model_dir"] = folder / "model"
    runs["compiled"] = run_job(
        folder,
        "fsdp2_loop.py",
        hosts=2,
        compile=1,
        compiler=TrainingCompilerConfig(plan="regional", baseline_steps=0),
    )
    return runs


def test_plain_loop_fsdp2_compiled_trains_as_one_process(loop_runs):
    single, eager, (compiled, report) = loop_runs["single"], loop_runs["eager"], loop_runs["compiled"]
    assert len(single["losses"]) == STEPS and single["losses"][-1] < single["losses"][0] - 0.5  # it learns
    assert_same_training(eager, single, "FSDP2 eager vs one process")
    assert_same_training(compiled, single, "FSDP2 compiled vs one process")
    assert_same_training(compiled, eager, "FSDP2 compiled vs FSDP2 eager")
    assert_fsdp2_report(report, "regional")
    assert report["graphs"] == 1 and report["steps"] == STEPS
    # Rank 0's full state dict in model.tar.gz: no _orig_mod., loadable by plain transformers.
    from transformers import LlamaForCausalLM

    loaded = LlamaForCausalLM.from_pretrained(loop_runs["compiled_model_dir"])
    for name, tensor in loaded.named_parameters():
        torch.testing.assert_close(tensor, compiled["params"][name], rtol=0, atol=0, msg=name)


def test_fsdp2_all_gathers_fire_the_same_compiled_as_eager(loop_runs):
    eager, compiled = loop_runs["eager"]["gathers"], loop_runs["compiled"][0]["gathers"]
    # Per step: forward gathers the root and both blocks (3), backward gathers the blocks again (2:
    # they reshard after forward, the root does not).
    assert eager == [5] * STEPS
    assert compiled == eager


def test_activation_checkpointing_then_compile_then_fully_shard_trains_as_eager_fsdp2(loop_runs, tmp_path):
    checkpointed, report = run_job(
        tmp_path,
        "fsdp2_loop.py",
        hosts=2,
        compile=1,
        checkpointing=1,
        compiler=TrainingCompilerConfig(plan="regional", baseline_steps=0),
    )
    assert_same_training(checkpointed, loop_runs["eager"], "FSDP2 + checkpointing compiled vs FSDP2 eager")
    assert checkpointed["gathers"] == loop_runs["eager"]["gathers"]
    assert report["compiled"] is True and report["graphs"] == 1 and report["recompiles"] == 0
    assert report["distributed"]["activation_checkpointing"] is True
    assert report["distributed"]["strategy"] == "fsdp2"


def test_lora_then_compile_then_fully_shard_trains_as_eager_fsdp2(tmp_path_factory):
    """peft LoRA adapters (q_proj, v_proj; the base model frozen) under FSDP2: compiled (regional)
    trains as eager FSDP2 does, with the same all-gathers."""
    eager, _ = run_job(tmp_path_factory.mktemp("lora-eager"), "fsdp2_loop.py", hosts=2, compile=0, lora=1)
    compiled, report = run_job(
        tmp_path_factory.mktemp("lora-compiled"),
        "fsdp2_loop.py",
        hosts=2,
        compile=1,
        lora=1,
        compiler=TrainingCompilerConfig(plan="regional", baseline_steps=0),
    )
    assert_same_training(compiled, eager, "FSDP2 + LoRA compiled vs FSDP2 + LoRA eager")
    assert compiled["gathers"] == eager["gathers"] and eager["gathers"][0] > 0
    assert any("lora_A" in name for name in compiled["params"])
    assert report["compiled"] is True and report["plan"] == "regional"
    assert report["distributed"]["strategy"] == "fsdp2" and report["distributed"]["units_sharded"] == 3


def test_a_sharded_checkpoint_of_the_compiled_model_loads_back_under_the_compiled_plan(loop_runs, tmp_path):
    """At step 10 each rank saves its shards of the compiled, sharded model and optimizer
    (torch.distributed.checkpoint, keys without ``_orig_mod.``), and a freshly built one (compiled,
    then sharded) loads them and trains on: the 20 steps end as the uninterrupted compiled run does."""
    reloaded, report = run_job(
        tmp_path,
        "fsdp2_loop.py",
        hosts=2,
        compile=1,
        reload_at=STEPS // 2,
        shared_dir=str(tmp_path / "shared"),
        compiler=TrainingCompilerConfig(plan="regional", baseline_steps=0),
    )
    assert (tmp_path / "shared" / f"checkpoint-{STEPS // 2}" / ".metadata").is_file()
    assert_same_training(reloaded, loop_runs["compiled"][0], "FSDP2 compiled, reloaded at step 10 vs uninterrupted")
    assert reloaded["gathers"] == loop_runs["eager"]["gathers"]
    assert report["compiled"] is True and report["recompiles"] == 0


def test_trainer_with_fsdp_asked_on_cpu_runs_ddp_compiled_as_one_process_and_says_so(tmp_path_factory, capsys):
    """TrainingArguments(fsdp="full_shard", fsdp_config={"version": 2}) with use_cpu=True on 2 hosts: accelerate
    (1.15) turns FSDP on only for GPU-like devices, so the Trainer runs DDP on CPU. The report says so
    (strategy "ddp", no units) and compiled DDP trains as one process does."""
    single, _ = run_job(tmp_path_factory.mktemp("t-single"), "fsdp2_trainer.py", hosts=1)
    folder = tmp_path_factory.mktemp("t-compiled")
    compiled, report = run_job(
        folder, "fsdp2_trainer.py", hosts=2, fsdp=1, compiler=TrainingCompilerConfig(plan="regional", baseline_steps=0)
    )
    assert_same_training(
        compiled, single, "Trainer (fsdp asked, DDP on CPU) compiled vs one process", param_atol=TRAINER_PARAM_ATOL
    )
    assert "asked for FSDP2, but the model is not sharded" in capsys.readouterr().out
    assert report["compiled"] is True and report["plan"] == "regional" and report["integration"] == "transformers"
    assert report["distributed"] == {
        "strategy": "ddp",
        "world_size": 2,
        "units_sharded": 0,
        "reshard_after_forward": None,
        "activation_checkpointing": False,
        "units": [],
    }
    # The saved model: a full state dict without _orig_mod., loadable by plain transformers.
    from transformers import LlamaForCausalLM

    loaded = LlamaForCausalLM.from_pretrained(folder / "model")
    for name, tensor in loaded.named_parameters():
        torch.testing.assert_close(tensor, compiled["params"][name], rtol=0, atol=0, msg=name)
