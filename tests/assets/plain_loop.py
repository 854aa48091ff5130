"""Test script: a plain PyTorch loop that turns the compiler on with one call."""

import argparse
import csv
import os
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertForSequenceClassification

import sagemaker_tc

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", required=True)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--batch_size", type=int, default=8)
args = parser.parse_args()

with open(Path(os.environ["SM_CHANNEL_TRAIN"]) / "train.tsv", newline="", encoding="utf-8") as handle:
    rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
model = BertForSequenceClassification.from_pretrained(args.model_dir)
model.train()
model = sagemaker_tc.compile_model(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(args.steps):
    batch_rows = rows[step * args.batch_size : (step + 1) * args.batch_size]
    batch = tokenizer(
        [r["sentence"] for r in batch_rows], padding="max_length", max_length=32, truncation=True, return_tensors="pt"
    )
    labels = torch.tensor([int(r["label"]) for r in batch_rows])
    loss = model(**batch, labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step={step} loss={loss.item():.4f}")
model.save_pretrained(os.environ["SM_MODEL_DIR"])
