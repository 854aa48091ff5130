"""Test script: a tiny Llama trained by a Hugging Face Trainer, unchanged by the compiler. One process:
no sharding (per-device batch = the global batch). Under torchrun with --fsdp 1: FSDP2 through
TrainingArguments(fsdp="full_shard", fsdp_config={"version": 2}) on gloo, each rank taking half of the
same global batch. Writes the per-step global losses and the full final parameters (rank 0) into
SM_MODEL_DIR/result.pt, and saves the model with save_model (a full state dict)."""

import argparse
import os

import torch
import torch.distributed as dist
from tiny_llama import CONFIG, tiny_llama
from transformers import Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--global_batch", type=int, default=4)
parser.add_argument("--seq", type=int, default=16)
parser.add_argument("--fsdp", type=int, default=0)
args = parser.parse_args()

world = int(os.environ.get("WORLD_SIZE", "1"))
llama = CONFIG
model = tiny_llama()
tokens = torch.randint(0, llama.vocab_size, (12, args.seq), generator=torch.Generator().manual_seed(1))
rows = [{"input_ids": row, "labels": row} for row in tokens]


class RecordingTrainer(Trainer):
    """Keeps each step's loss on the device (no host sync per step)."""

    losses = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        self.losses.append(loss.detach().clone())
        return loss


fsdp = {"fsdp": "full_shard", "fsdp_config": {"version": 2, "reshard_after_forward": True}} if args.fsdp else {}
training = TrainingArguments(
    output_dir=os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "."), "trainer"),
    max_steps=args.steps,
    per_device_train_batch_size=args.global_batch // world,
    learning_rate=3e-3,
    lr_scheduler_type="constant",
    optim="adamw_torch",
    weight_decay=0.0,
    logging_steps=5,
    save_strategy="no",
    report_to=[],
    use_cpu=True,
    ddp_backend="gloo" if world > 1 else None,
    dataloader_drop_last=True,
    seed=0,
    **fsdp,
)
trainer = RecordingTrainer(model=model, args=training, train_dataset=rows)
trainer.train()

losses = torch.stack(trainer.losses)
rank = dist.get_rank() if dist.is_initialized() else 0
if dist.is_initialized():
    dist.all_reduce(losses)
    losses /= dist.get_world_size()
params = {}
for name, param in trainer.model.named_parameters():
    full = param.full_tensor() if hasattr(param, "full_tensor") else param
    params[name] = full.detach().clone()
trainer.save_model(os.environ.get("SM_MODEL_DIR", "."))
if rank == 0:
    torch.save(
        {"world": world, "losses": losses, "params": params},
        os.path.join(os.environ.get("SM_MODEL_DIR", "."), "result.pt"),
    )
    print("losses", [round(x, 6) for x in losses.tolist()])
