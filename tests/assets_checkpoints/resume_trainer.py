"""Test script: a Hugging Face Trainer job that checkpoints into /opt/ml/checkpoints (SageMaker's
checkpoint folder) every ``--save_steps`` steps and calls ``trainer.train()`` with no resume argument
(``TrainingCompilerConfig(resume="auto")`` resumes it). ``--step_sleep`` slows each step after the
first checkpoint, so a test can stop the job while it trains. Saves the final model and
``steps.json`` (the global step reached, the optimizer steps this job ran)."""

import argparse
import csv
import json
import os
import time
from pathlib import Path

import torch
from transformers import (
    AutoTokenizer,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", required=True)
parser.add_argument("--max_steps", type=int, default=30)
parser.add_argument("--save_steps", type=int, default=10)
parser.add_argument("--step_sleep", type=float, default=0.0)
args = parser.parse_args()


class Encoded(torch.utils.data.Dataset):
    def __init__(self, encodings, labels):
        self.encodings, self.labels = encodings, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        item = {key: torch.tensor(values[index]) for key, values in self.encodings.items()}
        item["labels"] = torch.tensor(self.labels[index])
        return item


class Progress(TrainerCallback):
    """Counts this job's optimizer steps; sleeps after each once the first checkpoint exists."""

    steps = 0

    def on_step_end(self, args_, state, control, **kwargs):
        Progress.steps += 1
        if args.step_sleep and state.global_step >= args.save_steps:
            time.sleep(args.step_sleep)


set_seed(0)
with open(Path(os.environ["SM_CHANNEL_TRAIN"]) / "train.tsv", newline="", encoding="utf-8") as handle:
    rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
model = BertForSequenceClassification.from_pretrained(args.model_dir)
encodings = tokenizer([r["sentence"] for r in rows], truncation=True, padding="max_length", max_length=32)
train_set = Encoded(encodings, [int(r["label"]) for r in rows])
training_args = TrainingArguments(
    output_dir="/opt/ml/checkpoints",
    max_steps=args.max_steps,
    per_device_train_batch_size=4,
    learning_rate=1e-3,
    save_strategy="steps",
    save_steps=args.save_steps,
    logging_steps=1000,
    report_to="none",
    seed=0,
    use_cpu=True,
    ddp_backend="gloo" if "RANK" in os.environ else None,
    dataloader_num_workers=0,
)
trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=train_set,
    data_collator=DataCollatorWithPadding(tokenizer),
    callbacks=[Progress()],
)
trainer.train()
if trainer.is_world_process_zero():
    trainer.save_model(os.environ["SM_MODEL_DIR"])
    steps = {"global_step": trainer.state.global_step, "steps_run": Progress.steps}
    Path(os.environ["SM_OUTPUT_DATA_DIR"], "steps.json").write_text(json.dumps(steps))
