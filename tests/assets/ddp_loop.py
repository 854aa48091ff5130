"""Test script: a plain PyTorch loop with one compile_model call; under torchrun it is DDP (gloo on
CPU). Each rank takes its share of the same global batch, so the result matches one process with the
whole batch; rank 0 saves the model."""

import argparse
import csv
import os
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import AutoTokenizer, BertForSequenceClassification

import sagemaker_tc

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", required=True)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--global_batch", type=int, default=8)
parser.add_argument("--fail_rank", type=int, default=-1)
parser.add_argument("--fail_step", type=int, default=-1)
args = parser.parse_args()

distributed = "RANK" in os.environ
if distributed:
    dist.init_process_group("gloo")
rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)

with open(Path(os.environ["SM_CHANNEL_TRAIN"]) / "train.tsv", newline="", encoding="utf-8") as handle:
    rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
torch.manual_seed(0)
model = BertForSequenceClassification.from_pretrained(args.model_dir)
model.train()
model = sagemaker_tc.compile_model(model)  # compile per block, in place, before DDP wraps it
trained = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

for step in range(args.steps):
    if rank == args.fail_rank and step == args.fail_step:
        raise RuntimeError(f"rank {rank} failed on purpose at step {step}")
    global_rows = rows[step * args.global_batch : (step + 1) * args.global_batch]
    local_rows = global_rows[rank::world]
    batch = tokenizer(
        [r["sentence"] for r in local_rows], padding="max_length", max_length=32, truncation=True, return_tensors="pt"
    )
    labels = torch.tensor([int(r["label"]) for r in local_rows])
    loss = trained(**batch, labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"rank={rank} step={step} loss={loss.item():.6f}")

if rank == 0:
    model.save_pretrained(os.environ["SM_MODEL_DIR"])
if distributed:
    dist.barrier()
    dist.destroy_process_group()
