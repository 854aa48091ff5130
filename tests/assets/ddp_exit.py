"""Test script: an ordinary DDP loop on gloo (a small MLP, six SGD steps, rank 0 saves), as a user writes
it, with switches for how it ends: with or without ``compile_model``, with or without
``dist.destroy_process_group()``, and a rank that blocks at exit, blocks before its script ends, or
dies at exit after training."""

import argparse
import atexit
import os
import threading

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--compile", type=int, default=0)
parser.add_argument("--destroy", type=int, default=1)
parser.add_argument("--block_at_exit_rank", type=int, default=-1)
parser.add_argument("--block_rank", type=int, default=-1)
parser.add_argument("--die_at_exit_rank", type=int, default=-1)
args = parser.parse_args()

distributed = "RANK" in os.environ
if distributed:
    dist.init_process_group("gloo")
rank = dist.get_rank() if distributed else 0

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
if args.compile:
    import sagemaker_tc

    model = sagemaker_tc.compile_model(model)
ddp_model = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
inputs = torch.randn(8, 16, generator=torch.Generator().manual_seed(rank))
labels = torch.arange(8) % 2

for step in range(args.steps):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(ddp_model(inputs), labels)
    loss.backward()
    optimizer.step()
    print(f"rank={rank} step={step} loss={loss.item():.6f}", flush=True)

if rank == 0:
    torch.save(model.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))

if rank == args.block_rank:
    print(f"rank {rank} blocks before its script ends", flush=True)
    threading.Event().wait()  # never set: this rank makes no progress from here on
if rank == args.block_at_exit_rank:

    def never_ends():
        threading.Event().wait()

    # A thread nobody stops: the interpreter waits for it at exit, for ever.
    threading.Thread(target=never_ends, name="never-ends").start()
if rank == args.die_at_exit_rank:
    atexit.register(os.abort)  # dies at exit, after its script finished (as torch's gloo teardown can)
if distributed and args.destroy:
    dist.destroy_process_group()
print(f"rank={rank} done", flush=True)
