"""Test script: a tiny Llama trained by a plain PyTorch loop in the documented order (docs/distributed.md):
activation checkpointing (--checkpointing 1), compile_model (per block, in place), then fully_shard per
block, then the root (--shard_first 1 shards before compile_model instead). One process: no sharding.
Under torchrun (gloo): FSDP2, each rank taking its half of the same global batch, so every step matches
one process with the whole batch. Rank 0 saves the full model (save_pretrained) and writes per-step global
losses, all-gathers per step and the full final parameters into SM_MODEL_DIR/result.pt. --lora 1 trains
peft LoRA adapters instead of the whole model; --reload_at N saves a sharded checkpoint after step N into
--shared_dir and goes on with a freshly built model that loaded it."""

import argparse
import os

import torch
import torch.distributed as dist
from tiny_llama import CONFIG, tiny_llama

import sagemaker_tc
import sagemaker_tc.compiler.session

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--global_batch", type=int, default=4)
parser.add_argument("--seq", type=int, default=16)
parser.add_argument("--compile", type=int, default=1)
parser.add_argument("--shard_first", type=int, default=0)
parser.add_argument("--checkpointing", type=int, default=0)
parser.add_argument("--lora", type=int, default=0)
parser.add_argument("--reload_at", type=int, default=0)  # with --shared_dir: save sharded, reload, go on
parser.add_argument("--shared_dir", default="")
args = parser.parse_args()

distributed = "RANK" in os.environ
if distributed:
    dist.init_process_group("gloo")
rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)

gathers = [0]
if distributed:  # count FSDP2's all-gathers: every name torch has used for it
    for name in ("all_gather_single", "all_gather_into_tensor"):
        original = getattr(dist, name, None)
        if original is not None:

            def counted(*a, _original=original, **k):
                gathers[0] += 1
                return _original(*a, **k)

            setattr(dist, name, counted)

llama = CONFIG


def shard(model):
    from torch.distributed.fsdp import fully_shard

    for layer in [m for m in model.modules() if type(m).__name__ == "LlamaDecoderLayer"]:
        fully_shard(layer)
    fully_shard(model)


def build():
    """The model in the documented order (module docstring) and its optimizer."""
    model = tiny_llama()
    model.train()
    if args.checkpointing:  # activation checkpointing first: before the compile and fully_shard
        model.activation_checkpointing_enable({"use_reentrant": False})
    if args.lora:  # LoRA adapters on the attention projections (peft); only they train
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
        model.train()
    if distributed and args.shard_first:
        shard(model)
    if args.compile:  # per block, in place: before fully_shard. In a job, the estimator's compiler_config.
        in_job = "SM_TRAINING_ENV" in os.environ
        compiler = None if in_job else sagemaker_tc.TrainingCompilerConfig(plan="regional", baseline_steps=0)
        model = sagemaker_tc.compile_model(model, compiler)
    if distributed and not args.shard_first:
        shard(model)
    return model, torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)


def reload(model, optimizer, folder):
    """Save a sharded checkpoint (each rank its shards: torch.distributed.checkpoint) of the compiled,
    sharded model and its optimizer, then load it into a freshly built one: what a resumed job does."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    assert not any("_orig_mod" in key for key in model_state)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=folder)
    fresh, fresh_optimizer = build()
    model_state, optimizer_state = get_state_dict(fresh, fresh_optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    dcp.load(state, checkpoint_id=folder)
    set_state_dict(fresh, fresh_optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    return fresh, fresh_optimizer


model, optimizer = build()

data = torch.randint(0, llama.vocab_size, (3, args.global_batch, args.seq), generator=torch.Generator().manual_seed(1))
losses, per_step_gathers = [], []
for step in range(args.steps):
    tokens = data[step % len(data)]
    local = tokens[rank::world]
    before = gathers[0]
    loss = model(input_ids=local, labels=local).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.detach())
    per_step_gathers.append(gathers[0] - before)
    if args.reload_at and step + 1 == args.reload_at:
        model, optimizer = reload(model, optimizer, os.path.join(args.shared_dir, f"checkpoint-{step + 1}"))

losses = torch.stack(losses)
if distributed:
    dist.all_reduce(losses, op=dist.ReduceOp.SUM)
    losses /= world
params = {}
for name, param in model.named_parameters():
    full = param.full_tensor() if hasattr(param, "full_tensor") else param
    params[name] = full.detach().clone()
if rank == 0:  # a full state dict on rank 0: what model.tar.gz needs, loadable by plain transformers
    if not args.lora:  # (a peft model's save_pretrained saves its adapters only)
        model.save_pretrained(os.environ.get("SM_MODEL_DIR", "."), state_dict=dict(params))  # it edits the dict
    torch.save(
        {"world": world, "losses": losses, "params": params, "gathers": per_step_gathers},
        os.path.join(os.environ.get("SM_MODEL_DIR", "."), "result.pt"),
    )
    session = sagemaker_tc.compiler.session.current_session()
    if session is not None and not session.writes_report:
        report = session.report()
        print(
            "report",
            {k: report[k] for k in ("compiled", "plan", "graphs", "recompiles", "graph_breaks", "distributed")},
        )
    print("losses", [round(x, 6) for x in losses.tolist()], "gathers", per_step_gathers)
if distributed:
    dist.barrier()
    dist.destroy_process_group()
