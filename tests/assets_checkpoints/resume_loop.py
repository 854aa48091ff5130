"""Test script: a plain PyTorch loop (DDP under torchrun) that resumes from the newest complete
checkpoint in /opt/ml/checkpoints, checkpoints every ``--save_steps`` steps with
``sagemaker_tc.checkpoints.writing``, and stops at ``sagemaker_tc.stop_requested()`` after saving.
The data position is the step: batch ``s`` is rows ``s*B .. (s+1)*B`` of the training file."""

import argparse
import csv
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import AutoTokenizer, BertForSequenceClassification

import sagemaker_tc
from sagemaker_tc import checkpoints

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", required=True)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--save_steps", type=int, default=10)
parser.add_argument("--global_batch", type=int, default=8)
parser.add_argument("--step_sleep", type=float, default=0.0)
args = parser.parse_args()
folder = Path("/opt/ml/checkpoints")

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
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
start = 0
latest = checkpoints.latest_complete(folder)
if latest is not None:
    state = torch.load(latest / "state.pt", weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    start = state["step"]
    sagemaker_tc.resume_from(str(latest))
model = sagemaker_tc.compile_model(model)
trained = torch.nn.parallel.DistributedDataParallel(model) if distributed else model


def save(step: int) -> None:
    if rank == 0:
        with checkpoints.writing(folder, step) as target:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
            torch.save({**state, "rng": torch.get_rng_state()}, target / "state.pt")
    if distributed:
        dist.barrier()


step, ran = start, 0
while step < args.steps:
    global_rows = rows[(step * args.global_batch) % len(rows) :][: args.global_batch]
    local_rows = global_rows[rank::world]
    batch = tokenizer(
        [r["sentence"] for r in local_rows], padding="max_length", max_length=32, truncation=True, return_tensors="pt"
    )
    labels = torch.tensor([int(r["label"]) for r in local_rows])
    trained(**batch, labels=labels).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    step, ran = step + 1, ran + 1
    if rank == 0:
        checkpoints.record_progress(folder, step)
    if step % args.save_steps == 0:
        save(step)
    if sagemaker_tc.stop_requested():
        if step % args.save_steps:
            save(step)
        break
    if args.step_sleep and step >= args.save_steps:
        time.sleep(args.step_sleep)

if rank == 0:
    torch.save(model.state_dict(), Path(os.environ["SM_MODEL_DIR"]) / "model.pt")
    Path(os.environ["SM_OUTPUT_DATA_DIR"], "steps.json").write_text(json.dumps({"global_step": step, "steps_run": ran}))
if distributed:
    dist.barrier()
    dist.destroy_process_group()
