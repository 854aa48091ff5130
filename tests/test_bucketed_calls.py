"""Static graphs only for calls the shape policy bucketed, padding only where it keeps the result, and
every sequence dimension bucketed (issue 32, points 4, 5 and 9).

Plans compile with dynamo's ``aot_eager`` backend (the ``plan_backend`` fixture of
``test_plan_call.py``): what is under test is which calls are padded and how many graphs dynamo
captures, not Inductor's kernels."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_bert
from test_plan_call import plan_backend  # noqa: F401  (a fixture)

import sagemaker_tc
from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler.dynamo import dynamo_mark, dynamo_stats
from sagemaker_tc.compiler.plans import plan_modules
from sagemaker_tc.compiler.session import current_session


class Positional(torch.nn.Module):
    """A model called with a positional token tensor (the shape policy pads keyword arguments only)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(64, 16)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(ids)).mean()


def test_a_positional_input_model_under_auto_buckets_compiles_dynamically(plan_backend):  # noqa: F811
    torch.manual_seed(0)
    model = Positional()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mark = dynamo_mark()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="model", buckets="auto", baseline_steps=0))
    for length in range(10, 30, 2):  # 10 lengths, none padded: the dynamic variant serves them all
        model(torch.randint(0, 64, (2, length))).backward()
        optimizer.step()
        optimizer.zero_grad()
    runtime = current_session().runtime
    assert runtime.active == "model"
    assert dynamo_stats(mark).frames_compiled <= 2  # the first shape, then one dynamic graph
    assert runtime.trials() == [] or all(trial.get("invalid") is None for trial in runtime.trials())


def test_a_plan_whose_trial_meets_more_unbucketed_shapes_than_its_budget_is_not_chosen(plan_backend):  # noqa: F811
    model = Positional()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="model", buckets="auto", baseline_steps=0))
    runtime = current_session().runtime
    runtime.recompile_budgets["model"] = 3  # a small budget, so that four shapes pass it
    with torch.no_grad():
        for length in (4, 5, 6, 7):
            model(torch.randint(0, 64, (2, length)))
    assert runtime.schedule.invalid["model"] == "4 distinct unbucketed input shapes, above its recompile budget of 3"


def test_padding_is_only_where_it_keeps_the_result():
    from sagemaker_tc.compiler.padding import padding_dims

    ids = torch.ones(2, 5, dtype=torch.long)
    mask, labels = torch.ones(2, 5), torch.full((2, 5), 3)
    assert padding_dims({"input_ids": ids, "attention_mask": mask}) == {"encoder": 5}
    assert padding_dims({"input_ids": ids}) is None  # bidirectional, no mask: the padding would be attended
    assert padding_dims({"input_ids": ids, "labels": labels}, causal=True) == {"encoder": 5}
    assert padding_dims({"input_ids": ids}, causal=True) is None  # no -100 labels: the outputs would grow
    assert padding_dims({"input_ids": ids, "attention_mask": torch.ones(2, 1, 5, 5)}) is None  # a 4-D mask
    packed = {"input_ids": ids, "labels": labels, "position_ids": torch.arange(5).expand(2, 5)}
    assert padding_dims(packed, causal=True) is None  # position ids without a mask: maybe packed sequences
    assert padding_dims({"input_ids": ids, "attention_mask": mask, "cu_seq_lens_q": torch.tensor([0, 5])}) is None
    assert padding_dims({"input_values": torch.ones(2, 80), "attention_mask": mask}) is None  # audio
    seq2seq = {"input_ids": ids, "attention_mask": mask, "labels": torch.full((2, 3), 1)}
    assert padding_dims(seq2seq, encoder_decoder=True) == {"encoder": 5, "decoder": 3}
    three_d = {**seq2seq, "decoder_attention_mask": torch.ones(2, 3, 3)}
    assert padding_dims(three_d, encoder_decoder=True) is None


def scaled_bert():
    """A tiny BERT whose weights are large enough that attending to padding changes its loss."""
    torch.manual_seed(0)
    return tiny_bert(
        vocab_size=64, hidden_size=16, num_hidden_layers=1, max_position_embeddings=64, initializer_range=0.5
    )


@pytest.mark.parametrize("mask", [None, "4d"], ids=["no-mask", "4d-mask"])
def test_a_bidirectional_model_compiled_trains_like_eager_where_padding_would_change_it(mask, plan_backend):  # noqa: F811
    ids = torch.randint(1, 64, (4, 13), generator=torch.Generator().manual_seed(1))
    inputs = {"input_ids": ids, "labels": torch.tensor([0, 1, 0, 1])}
    if mask == "4d":
        inputs["attention_mask"] = torch.ones(4, 1, 13, 13)
    eager = scaled_bert()(**inputs).loss
    model = scaled_bert()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="model", buckets="auto", baseline_steps=0))
    compiled = model(**inputs).loss
    runtime = current_session().runtime
    assert runtime.active == "model" and runtime.failures == []
    assert compiled.item() == pytest.approx(eager.item(), rel=1e-5)
    assert current_session().report()["shapes"]["unbucketed_batches"] == 1


@pytest.mark.parametrize("plan", ["regional", "model"])
def test_a_padded_calls_token_outputs_have_the_callers_lengths(plan, plan_backend):  # noqa: F811
    """A plain loop that computes its own token-level loss from the logits against its unpadded
    labels: the call is padded (13 -> 16 tokens) and its output cut back, so the shapes, the loss
    and the gradients are eager's."""
    import torch.nn.functional as F
    from transformers import BertConfig, BertForTokenClassification

    config = BertConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=64, num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    generator = torch.Generator().manual_seed(2)
    ids, labels = torch.randint(1, 64, (4, 13), generator=generator), torch.randint(0, 3, (4, 13), generator=generator)

    def step(model):
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
        loss = F.cross_entropy(out.logits.reshape(-1, 3), labels.reshape(-1))
        loss.backward()
        return out, loss

    torch.manual_seed(0)
    eager_model = BertForTokenClassification(config)
    torch.manual_seed(0)
    model = BertForTokenClassification(config)
    eager_out, eager_loss = step(eager_model)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan=plan, buckets="auto", baseline_steps=0))
    out, loss = step(model)

    runtime = current_session().runtime
    assert runtime.active == plan and runtime.failures == []
    assert current_session().report()["shapes"]["batches_per_length"] == {"16": 1}  # it was padded
    assert out.logits.shape == (4, 13, 3) and [h.shape[1] for h in out.hidden_states] == [13, 13, 13]
    assert loss.item() == pytest.approx(eager_loss.item(), rel=1e-5)
    grad, eager_grad = model.classifier.weight.grad, eager_model.classifier.weight.grad
    assert torch.allclose(grad, eager_grad, atol=1e-6)


def test_an_eager_rerun_gets_the_callers_unpadded_inputs():
    from sagemaker_tc.compiler.plans import GuardedCall

    seen = []

    class Model(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            seen.append(input_ids.shape[1])
            return input_ids.sum()

    def failing(module, *args, **kwargs):
        raise RuntimeError("compiled call failed")

    def pad(module, args, kwargs):
        return args, {key: torch.nn.functional.pad(value, (0, 3)) for key, value in kwargs.items()}

    failed, model = [], Model()  # the call holds its module weakly
    call = GuardedCall(model, "model", {"static": failing}, lambda m: "static", lambda p, e: failed.append(p), pad)
    ids = torch.ones(2, 5, dtype=torch.long)
    assert call(input_ids=ids, attention_mask=torch.ones(2, 5)).item() == 10
    assert seen == [5] and failed == ["model"]


class Seq2SeqRows(torch.utils.data.Dataset):
    """Rows of varying source (5 to 27 tokens) and target (2 to 12 tokens) lengths."""

    def __init__(self, count: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.rows = [
            {
                "input_ids": torch.randint(1, 64, (5 + (3 * i) % 23,), generator=generator),
                "labels": torch.randint(1, 64, (2 + (5 * i) % 11,), generator=generator),
            }
            for i in range(count)
        ]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        return self.rows[index]


def dynamic_padding(rows: list[dict]) -> dict:
    """Pad each batch to its own longest source and target (as ``DataCollatorForSeq2Seq`` does)."""
    from torch.nn.utils.rnn import pad_sequence

    ids = pad_sequence([row["input_ids"] for row in rows], batch_first=True)
    return {
        "input_ids": ids,
        "attention_mask": pad_sequence([torch.ones_like(r["input_ids"]) for r in rows], batch_first=True),
        "labels": pad_sequence([row["labels"] for row in rows], batch_first=True, padding_value=-100),
    }


def test_a_t5_seq2seq_trainer_job_compiles_at_most_one_graph_per_bucket_pair(tmp_path, plan_backend):  # noqa: F811
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, T5Config, T5ForConditionalGeneration

    from sagemaker_tc.compiler.session import CompilerSession
    from sagemaker_tc.integrations.transformers import install

    torch.manual_seed(0)
    config = T5Config(d_model=16, d_ff=32, d_kv=8, num_layers=1, num_decoder_layers=1, num_heads=2, vocab_size=64)
    config.decoder_start_token_id, config.use_cache = 0, False
    model = T5ForConditionalGeneration(config)  # one encoder and one decoder T5Block: the repeated block
    pairs = set()
    model.register_forward_pre_hook(
        lambda module, args, kwargs: pairs.add((kwargs["input_ids"].shape[1], kwargs["labels"].shape[1])),
        with_kwargs=True,
    )
    session = CompilerSession(TrainingCompilerConfig(plan="regional", buckets=[16, 32], baseline_steps=0)).open()
    install(session.trainer_parts())
    try:
        arguments = Seq2SeqTrainingArguments(
            output_dir=str(tmp_path), report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
            max_steps=4, per_device_train_batch_size=2, seed=0,
        )  # fmt: skip
        rows = Seq2SeqRows(8)
        trainer = Seq2SeqTrainer(model=model, args=arguments, train_dataset=rows, data_collator=dynamic_padding)
        mark = dynamo_mark()
        trainer.train()
        report = session.report()
    finally:
        session.close()
    assert pairs and pairs <= {(16, 16), (32, 16)}  # every call padded in both dimensions to a bucket pair
    assert report["shapes"]["unbucketed_batches"] == 0
    assert [type(block).__name__ for block in plan_modules(model, "regional")] == ["T5Block", "T5Block"]
    # One graph of the shared block per bucket pair for the encoder block and one for the decoder block
    # (their structures differ: the decoder's has cross-attention).
    assert dynamo_stats(mark).frames_compiled <= 2 * len(pairs), (dynamo_stats(mark), pairs)


def test_causal_models_are_told_from_bidirectional_ones():
    """``_hf_internals.is_causal_lm`` reads transformers' causal-LM and masked-LM class lists."""
    from transformers import BertConfig, BertLMHeadModel, GPT2Config, GPT2LMHeadModel

    from sagemaker_tc._hf_internals import is_causal_lm

    bert = {"vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}
    bert["intermediate_size"] = 8
    assert is_causal_lm(GPT2LMHeadModel(GPT2Config(vocab_size=16, n_embd=8, n_layer=1, n_head=2))) is True
    assert is_causal_lm(BertLMHeadModel(BertConfig(**bert, is_decoder=True))) is True
    assert is_causal_lm(tiny_bert(**bert)) is False  # a classifier: bidirectional
    assert is_causal_lm(torch.nn.Linear(2, 2)) is False  # no config
