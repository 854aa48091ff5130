"""The model suite: SMTC's tested Hugging Face architectures, built from their config classes.

Models are real ``transformers`` architectures with random weights (no Hub download), each with a
head it can train with:

- sequence classification (2 labels, SST-2) for the encoders: bert, roberta, distilbert,
  xlm-roberta, albert;
- causal language modelling for gpt2 (labels = the input ids, padding ignored) and for
  llama-3.2-1b, a ~1.2B-parameter Llama decoder whose rows are packed (below);
- sequence-to-sequence language modelling for t5 (the SST-2 label word as target, as T5 was
  trained for SST-2).

Two sizes:

- ``full``: the published base hyperparameters, i.e. each model's ``config.json`` on the Hugging
  Face Hub (``huggingface.co/<name>/blob/main/config.json``). For bert-base-uncased, gpt2 and
  distilbert-base-uncased the config classes' defaults are those numbers; for roberta-base,
  xlm-roberta-base, t5-base and albert-base-v2 the defaults differ (RobertaConfig and
  XLMRobertaConfig default to BERT's vocabulary, 512 positions and 2 token types; T5Config defaults
  to t5-small; AlbertConfig to albert-xxlarge), so those fields are set explicitly below.
- ``tiny``: the same architecture at toy size for CPUs and tests: 2 layers, hidden 64, 2 heads,
  feed-forward 128, vocabulary 1,024 (ALBERT: embedding 32; T5: d_kv 32). Position tables and
  everything else stay as in ``full``.

Inputs (:func:`make_batches`): real SST-2 sentences tokenized with MiniLM's BERT-uncased WordPiece
tokenizer (:mod:`sagemaker_tc_bench.data`), padded/truncated to a fixed ``seq_len``, with the ids
mapped into each model's vocabulary by ``id % vocab_size`` (:func:`map_ids`). The models have
random weights, so the mapping only has to keep shapes and padding real, not meaning. A ``packed``
model (llama-3.2-1b) gets its rows' real tokens end to end instead, with no padding
(:func:`sagemaker_tc_bench.data.pack_rows`), as decoders are trained at long sequence lengths.

Models with ``default=False`` (llama-3.2-1b: 1.2B parameters) run only when named (``--models``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sagemaker_tc_bench.data import map_ids
from sagemaker_tc_bench.errors import BenchError

if TYPE_CHECKING:
    import torch

    from sagemaker_tc_bench.data import TokenizedSST2

Size = Literal["tiny", "full"]
Task = Literal["classification", "causal-lm", "seq2seq-lm"]
SIZES: tuple[str, ...] = ("tiny", "full")
TINY_VOCAB = 1024

_BERT_LIKE_TINY = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "vocab_size": TINY_VOCAB,
}
# roberta-base's and xlm-roberta-base's config.json: where they differ from RobertaConfig's defaults
# (which are BERT's), all but the vocabulary.
_ROBERTA_LIKE_FULL = {
    "num_labels": 2,
    "max_position_embeddings": 514,
    "type_vocab_size": 1,
    "layer_norm_eps": 1e-5,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
}


@dataclass(frozen=True)
class ModelSpec:
    """One suite model.

    Attributes:
        name: the Hub name of the published model whose hyperparameters ``full`` uses.
        config_class: ``transformers`` config class name.
        model_class: ``transformers`` model class name (architecture + task head).
        task: ``classification``, ``causal-lm`` or ``seq2seq-lm``.
        full: config fields set explicitly for ``full`` (beyond the class defaults).
        tiny: config fields that shrink ``full`` to ``tiny``.
        dropout_fields: the config's dropout probabilities (set to 0 for numerical checks).
        max_positions: the longest sequence the position table allows (None: relative positions).
        source: where the ``full`` numbers come from.
        packed: each row is the real tokens of consecutive SST-2 rows end to end, no padding
            (causal LM only; :func:`make_batches`).
        default: part of the runs that name no models (False: only when named).
    """

    name: str
    config_class: str
    model_class: str
    task: Task
    full: dict[str, Any] = field(default_factory=dict)
    tiny: dict[str, Any] = field(default_factory=dict)
    dropout_fields: tuple[str, ...] = ()
    max_positions: int | None = 512
    source: str = ""
    packed: bool = False
    default: bool = True


SUITE: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="bert-base-uncased",
            config_class="BertConfig",
            model_class="BertForSequenceClassification",
            task="classification",
            full={"num_labels": 2},
            tiny=_BERT_LIKE_TINY,
            dropout_fields=("hidden_dropout_prob", "attention_probs_dropout_prob"),
            source="BertConfig defaults = bert-base-uncased config.json (vocab 30522, 12x768, 12 heads, FFN 3072)",
        ),
        ModelSpec(
            name="roberta-base",
            config_class="RobertaConfig",
            model_class="RobertaForSequenceClassification",
            task="classification",
            full={**_ROBERTA_LIKE_FULL, "vocab_size": 50265},
            tiny=_BERT_LIKE_TINY,
            dropout_fields=("hidden_dropout_prob", "attention_probs_dropout_prob"),
            # 514 positions: RoBERTa offsets positions by padding_idx + 1 = 2.
            max_positions=512,
            source="roberta-base config.json (vocab 50265, 514 positions, 1 token type, eps 1e-5, 12x768)",
        ),
        ModelSpec(
            name="gpt2",
            config_class="GPT2Config",
            model_class="GPT2LMHeadModel",
            task="causal-lm",
            tiny={
                "n_layer": 2,
                "n_embd": 64,
                "n_head": 2,
                "n_inner": 128,
                "vocab_size": TINY_VOCAB,
                "bos_token_id": TINY_VOCAB - 1,
                "eos_token_id": TINY_VOCAB - 1,
            },
            dropout_fields=("resid_pdrop", "embd_pdrop", "attn_pdrop"),
            max_positions=1024,
            source="GPT2Config defaults = gpt2 config.json (124M: vocab 50257, 1024 positions, 12x768, 12 heads)",
        ),
        ModelSpec(
            name="distilbert-base-uncased",
            config_class="DistilBertConfig",
            model_class="DistilBertForSequenceClassification",
            task="classification",
            full={"num_labels": 2},
            tiny={"n_layers": 2, "dim": 64, "n_heads": 2, "hidden_dim": 128, "vocab_size": TINY_VOCAB},
            dropout_fields=("dropout", "attention_dropout", "seq_classif_dropout"),
            source="DistilBertConfig defaults = distilbert-base-uncased config.json (6x768, 12 heads, FFN 3072)",
        ),
        ModelSpec(
            name="t5-base",
            config_class="T5Config",
            model_class="T5ForConditionalGeneration",
            task="seq2seq-lm",
            # T5Config's defaults are t5-small's; t5-base's config.json differs in these.
            full={
                "d_model": 768,
                "d_ff": 3072,
                "d_kv": 64,
                "num_layers": 12,
                "num_decoder_layers": 12,
                "num_heads": 12,
                "vocab_size": 32128,
                # In t5-base's config.json; the config class has no default for it.
                "decoder_start_token_id": 0,
            },
            tiny={
                "d_model": 64,
                "d_ff": 128,
                "d_kv": 32,
                "num_layers": 2,
                "num_decoder_layers": 2,
                "num_heads": 2,
                "vocab_size": TINY_VOCAB,
            },
            dropout_fields=("dropout_rate",),
            max_positions=None,
            source="t5-base config.json (d_model 768, d_ff 3072, 12+12 layers, 12 heads, vocab 32128, relu FFN)",
        ),
        ModelSpec(
            name="xlm-roberta-base",
            config_class="XLMRobertaConfig",
            model_class="XLMRobertaForSequenceClassification",
            task="classification",
            full={**_ROBERTA_LIKE_FULL, "vocab_size": 250002},
            tiny=_BERT_LIKE_TINY,
            dropout_fields=("hidden_dropout_prob", "attention_probs_dropout_prob"),
            max_positions=512,
            source="xlm-roberta-base config.json (vocab 250002, 514 positions, 1 token type, eps 1e-5, 12x768)",
        ),
        ModelSpec(
            name="albert-base-v2",
            config_class="AlbertConfig",
            model_class="AlbertForSequenceClassification",
            task="classification",
            # AlbertConfig's defaults are albert-xxlarge's; albert-base-v2's config.json differs in these.
            full={
                "num_labels": 2,
                "vocab_size": 30000,
                "embedding_size": 128,
                "hidden_size": 768,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "hidden_act": "gelu_new",
                "hidden_dropout_prob": 0.0,
                "attention_probs_dropout_prob": 0.0,
            },
            tiny={**_BERT_LIKE_TINY, "embedding_size": 32},
            dropout_fields=("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"),
            source="albert-base-v2 config.json (embedding 128, 12x768 shared layer, 12 heads, FFN 3072, "
            "gelu_new, dropout 0)",
        ),
        ModelSpec(
            name="llama-3.2-1b",
            config_class="LlamaConfig",
            model_class="LlamaForCausalLM",
            task="causal-lm",
            # LlamaConfig's defaults are Llama 2 7B's; every field of the published config.json that
            # shapes the computation is set.
            full={
                "vocab_size": 128256,
                "hidden_size": 2048,
                "intermediate_size": 8192,
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 64,
                "hidden_act": "silu",
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-5,
                "rope_parameters": {
                    "rope_type": "llama3",
                    "rope_theta": 500000.0,
                    "factor": 32.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                },
                "tie_word_embeddings": True,
                "bos_token_id": 128000,
                "eos_token_id": 128001,
            },
            tiny={
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "intermediate_size": 128,
                "vocab_size": TINY_VOCAB,
                "bos_token_id": TINY_VOCAB - 2,
                "eos_token_id": TINY_VOCAB - 1,
            },
            dropout_fields=("attention_dropout",),
            max_positions=131072,
            source="meta-llama/Llama-3.2-1B config.json (1,235,814,400 parameters: vocab 128256 tied, 16x2048, "
            "32 heads, 8 KV heads, head_dim 64, FFN 8192 SiLU, RMSNorm eps 1e-5, RoPE llama3 theta 500000 factor 32); "
            "the gated repository itself was not read: the numbers are those of its public copies "
            "(unsloth/Llama-3.2-1B and fine-tunes naming it as their base), and its model card's 1.23B",
            packed=True,
            default=False,
        ),
    )
}
"""SMTC's tested models (its FAQ's list, base sizes), by Hub name, and a ~1B Llama decoder (named only)."""
DEFAULT_MODELS: tuple[str, ...] = tuple(name for name, spec in SUITE.items() if spec.default)
"""What a run that names no models runs: the suite without the ``default=False`` models."""


def get_spec(name: str) -> ModelSpec:
    """The suite entry for ``name``.

    Raises:
        BenchError: ``name`` is not in the suite (the message lists the suite).
    """
    try:
        return SUITE[name]
    except KeyError:
        raise BenchError(f"unknown model {name!r}; the suite has: {', '.join(SUITE)}") from None


def check_size(size: str) -> str:
    """Return ``size`` if it is ``tiny`` or ``full``.

    Raises:
        BenchError: any other value.
    """
    if size not in SIZES:
        raise BenchError(f"unknown size {size!r}; accepted: {', '.join(SIZES)}")
    return size


def check_seq_len(spec: ModelSpec, seq_len: int) -> None:
    """Check that ``seq_len`` tokens fit ``spec``'s position table (t5's relative positions take any).

    Raises:
        BenchError: ``seq_len`` < 4 or longer than the model's positions.
    """
    if seq_len < 4:
        raise BenchError(f"seq_len must be >= 4 (got {seq_len})")
    if spec.max_positions is not None and seq_len > spec.max_positions:
        raise BenchError(f"seq_len {seq_len} is longer than {spec.name}'s {spec.max_positions} positions")


def config_fields(spec: ModelSpec, size: str, *, dropout: bool = True) -> dict[str, Any]:
    """The config fields :func:`build_model` sets for ``spec`` at ``size`` (plain values, JSON-ready).

    Args:
        dropout: False sets every dropout probability in ``spec.dropout_fields`` to 0.
    """
    fields = dict(spec.full)
    if check_size(size) == "tiny":
        fields.update(spec.tiny)
    if not dropout:
        fields.update(dict.fromkeys(spec.dropout_fields, 0.0))
    return fields


def build_model(
    name: str, size: str, *, dropout: bool = True, attn_implementation: str | None = None
) -> torch.nn.Module:
    """Build suite model ``name`` at ``size`` with random weights (seed with ``torch.manual_seed`` first).

    Args:
        name: a :data:`SUITE` name.
        size: ``tiny`` or ``full``.
        dropout: False builds it with every dropout probability 0 (for numerical comparison).
        attn_implementation: passed to the config (``"sdpa"``, ``"eager"``); None keeps transformers'
            default (SDPA for all suite models in transformers 5.x).

    Returns:
        The model in training mode, fp32, on the CPU.

    Raises:
        BenchError: unknown name or size.
    """
    import transformers

    spec = get_spec(name)
    fields = config_fields(spec, size, dropout=dropout)
    if attn_implementation is not None:
        fields["attn_implementation"] = attn_implementation
    config = getattr(transformers, spec.config_class)(**fields)
    model = getattr(transformers, spec.model_class)(config)
    model.train()
    return model


def make_batches(
    model: torch.nn.Module, name: str, data: TokenizedSST2, batch_size: int, device: str | torch.device = "cpu"
) -> list[dict[str, torch.Tensor]]:
    """Cut tokenized SST-2 rows into training batches for suite model ``name``.

    Each batch is a dict of int64 tensors for ``model(**batch)``, all on ``device``:

    - ``input_ids``, ``attention_mask``: (batch_size, seq_len);
    - ``labels``: (batch_size,) class ids for classification; (batch_size, seq_len) for causal LM
      (= input ids, -100 on padding); (batch_size, target_len) for seq2seq (label word ids, -100 on
      padding). A ``packed`` model's rows are real tokens end to end (:func:`~sagemaker_tc_bench.data.
      pack_rows`): its attention mask is all ones and its labels are the input ids.

    Returns:
        ``len(data.labels) // batch_size`` batches (at least one row per batch is required).
    """
    import torch

    from sagemaker_tc_bench.data import pack_rows

    spec = get_spec(name)
    config = model.config
    pad_id = config.pad_token_id if config.pad_token_id is not None else 0
    mapped = map_ids(data.input_ids, data.attention_mask, config.vocab_size, pad_id)
    if spec.packed:
        mapped = pack_rows(mapped, data.attention_mask)
    ids = torch.tensor(mapped, dtype=torch.long)
    mask = torch.ones_like(ids) if spec.packed else torch.tensor(data.attention_mask, dtype=torch.long)
    labels = torch.tensor(data.labels, dtype=torch.long)
    if spec.task == "causal-lm":
        targets = ids.masked_fill(mask == 0, -100)
    elif spec.task == "seq2seq-lm":
        words = torch.tensor(data.target_ids, dtype=torch.long)
        word_mask = (words != 0).long()
        words = torch.tensor(map_ids(words.tolist(), word_mask.tolist(), config.vocab_size, pad_id))
        targets = words[labels].masked_fill(word_mask[labels] == 0, -100)
    else:
        targets = labels
    batches = []
    for start in range(0, len(labels) - batch_size + 1, batch_size):
        rows = slice(start, start + batch_size)
        batches.append(
            {
                "input_ids": ids[rows].to(device),
                "attention_mask": mask[rows].to(device),
                "labels": targets[rows].to(device),
            }
        )
    return batches
