"""Test script: a tiny Llama trained by a plain PyTorch loop in the documented order (docs/distributed.md):
activation checkpointing (--checkpointing 1), compile_model (per block, in place), then fully_shard per
block, then the root (--shard_first 1 shards before compile_model instead). One process: no sharding.
Under torchrun (gloo): FSDP2, each rank taking its half of the same global batch, so every step matches
one process with the whole batch. Rank 0 saves the full model (save_pretrained) and writes per-step global
losses, all-gathers per step and the full final parameters into SM_MODEL_DIR/result.pt."""

import argparse
import os

import torch
import torch.distributed as dist
from transformers import LlamaConfig, LlamaForCausalLM

import sagemaker_tc
import sagemaker_tc.compiler.session

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--global_batch", type=int, default=4)
parser.add_argument("--seq", type=int, default=16)
parser.add_argument("--compile", type=int, default=1)
parser.add_argument("--shard_first", type=int, default=0)
parser.add_argument("--checkpointing", type=int, default=0)
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

llama = LlamaConfig(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    use_cache=False,
)
torch.manual_seed(0)
model = LlamaForCausalLM(llama)
model.train()
if args.checkpointing:  # activation checkpointing first: before the compile and fully_shard
    model.activation_checkpointing_enable({"use_reentrant": False})


def shard(model):
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)


if distributed and args.shard_first:
    shard(model)
if args.compile:  # per block, in place: before fully_shard. In a job, the estimator's compiler_config.
    in_job = "SM_TRAINING_ENV" in os.environ
    compiler = None if in_job else sagemaker_tc.TrainingCompilerConfig(plan="regional", baseline_steps=0)
    model = sagemaker_tc.compile_model(model, compiler)
if distributed and not args.shard_first:
    shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

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

losses = torch.stack(losses)
if distributed:
    dist.all_reduce(losses, op=dist.ReduceOp.SUM)
    losses /= world
params = {}
for name, param in model.named_parameters():
    full = param.full_tensor() if hasattr(param, "full_tensor") else param
    params[name] = full.detach().clone()
if rank == 0:  # a full state dict on rank 0: what model.tar.gz needs, loadable by plain transformers
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
