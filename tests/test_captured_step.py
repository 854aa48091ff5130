"""The captured step's parts on the CPU (sagemaker_tc/compiler/step_body.py, captured_step.py): the
restructured step equals the Trainer's clip, optimizer step, schedule and zero sequence bit for bit; per
bucket key two warm-ups, one recording, then replays, in any key order, no step run twice; a changed model
drops the recordings; a failing recording marks its key and runs nothing."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import tiny_bert

from sagemaker_tc.compiler.captured_step import (
    WARM_UP_STEPS,
    CallReplay,
    CapturedStep,
    bucket_key,
)
from sagemaker_tc.compiler.step_body import StepBody
from sagemaker_tc.errors import CaptureFailed, GraphsInvalidated, StepBodyUnsupported
from sagemaker_tc.integrations.captured_trainer import fingerprint

STEPS = 8


def _model():
    torch.manual_seed(0)
    return tiny_bert(vocab_size=100, hidden_dropout_prob=0.1)


def _optimizer(model):
    decay = [p for n, p in model.named_parameters() if "bias" not in n]
    other = [p for n, p in model.named_parameters() if "bias" in n]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": other, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-3, fused=True)
    # a learning rate that changes at every step: warm-up, then decay
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: (s + 1) / 3 if s < 3 else max(0.0, (10 - s) / 7))
    return optimizer, scheduler


def _batches(lengths):
    generator = torch.Generator().manual_seed(3)
    return [
        {
            "input_ids": torch.randint(0, 100, (4, length), generator=generator),
            "labels": torch.randint(0, 2, (4,), generator=generator),
        }
        for length in lengths
    ]


def _trainer_sequence(model, batches):
    """The Trainer's step: zero_grad (to None), forward, backward, clip 1.0, step, schedule."""
    optimizer, scheduler = _optimizer(model)
    losses = []
    for batch in batches:
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        model.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    return losses, optimizer, scheduler


def _captured(model, batches, backend=None):
    """The first batch as the Trainer runs it (finds the gradients), then every batch through CapturedStep."""
    optimizer, scheduler = _optimizer(model)
    first, rest = batches[0], batches[1:]
    loss = model(**first).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    losses = [loss.detach()]
    params = [p for p in model.parameters() if p.grad is not None]
    body = StepBody(optimizer, params, 1.0, lambda batch: model(**batch).loss)
    step = CapturedStep(body, backend or CallReplay(), lambda: fingerprint(model))
    kinds = []
    for batch in rest:
        kinds.append(step.run(bucket_key(batch), batch))
        scheduler.step()
        losses.append(body.loss.clone())
    return losses, optimizer, scheduler, step, kinds


def _same(model_a, model_b, opt_a, opt_b):
    assert all(torch.equal(a, b) for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True))
    state_a, state_b = opt_a.state_dict(), opt_b.state_dict()
    for index, entry in state_a["state"].items():
        assert all(torch.equal(value, state_b["state"][index][name]) for name, value in entry.items())
    assert state_a["param_groups"] == state_b["param_groups"]


@pytest.mark.parametrize(
    "lengths", [[16] * STEPS, [16, 32, 32, 16, 32, 16, 16, 32, 32, 16]], ids=["one key", "two keys ABBA"]
)
def test_captured_steps_equal_the_trainers_sequence_bit_for_bit(lengths):
    base = _model()
    batches = _batches(lengths)
    ours, theirs = copy.deepcopy(base), copy.deepcopy(base)
    torch.manual_seed(1)
    captured_losses, opt_a, sched_a, step, _ = _captured(ours, batches)
    torch.manual_seed(1)
    trainer_losses, opt_b, sched_b = _trainer_sequence(theirs, batches)
    assert all(torch.equal(a, b) for a, b in zip(captured_losses, trainer_losses, strict=True))
    _same(ours, theirs, opt_a, opt_b)
    # the learning rates stay Python floats: get_last_lr() never reads the device
    assert all(isinstance(lr, float) for lr in sched_a.get_last_lr())
    assert all(isinstance(group["lr"], float) for group in opt_a.param_groups)


def test_each_key_warms_up_twice_then_records_once_then_replays():
    model = _model()
    lengths = [16, 16, 32, 16, 32, 32, 16, 32, 16]
    _, _, _, step, kinds = _captured(model, _batches(lengths))
    by_key: dict[int, list[str]] = {}
    for length, kind in zip(lengths[1:], kinds, strict=True):
        by_key.setdefault(length, []).append(kind)
    assert by_key[16] == ["warm-up"] * WARM_UP_STEPS + ["recorded", "replayed"]
    assert by_key[32] == ["warm-up"] * WARM_UP_STEPS + ["recorded", "replayed"]
    counts = step.counts
    assert (counts.keys, counts.warm_ups, counts.recordings, counts.replays) == (2, 4, 2, 4)


class FailingRecorder(CallReplay):
    def capture(self, body):
        raise RuntimeError("operation not permitted when stream is capturing")


def test_a_failing_recording_marks_its_key_and_runs_nothing():
    model = _model()
    batches = _batches([16] * 4)
    _, optimizer, _, step, kinds = _captured(model, batches[:3], FailingRecorder())
    assert kinds == ["warm-up", "warm-up"]
    before = [p.detach().clone() for p in model.parameters()]
    key = bucket_key(batches[3])
    with pytest.raises(CaptureFailed, match="operation not permitted"):
        step.run(key, batches[3])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert not step.can_run(key)
    assert step.counts.capture_failures[0]["reason"].startswith("RuntimeError")


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.bert.embeddings.word_embeddings.weight.requires_grad_(False),  # gradual unfreezing
        lambda m: m.resize_token_embeddings(120),  # a parameter replaced
        lambda m: m.classifier.register_forward_hook(lambda *a: None),  # a new hook
        lambda m: m.eval(),  # eval() left on
        lambda m: setattr(m.classifier.weight, "grad", None),  # a gradient freed by user code
    ],
    ids=["requires_grad", "resized embeddings", "forward hook", "eval", "grad set to None"],
)
def test_a_changed_model_drops_the_recordings(change):
    model = _model()
    batches = _batches([16] * 5)
    _, _, _, step, kinds = _captured(model, batches[:4])
    assert kinds[-1] == "recorded" and step.keys()
    change(model)
    with pytest.raises(GraphsInvalidated):
        step.run(bucket_key(batches[4]), batches[4])
    assert step.keys() == [] and len(step.counts.invalidations) == 1


def test_bucket_keys():
    a = {"input_ids": torch.zeros(4, 16, dtype=torch.long), "num_items_in_batch": 7}
    assert bucket_key(a) != bucket_key({**a, "input_ids": torch.zeros(4, 32, dtype=torch.long)})
    assert bucket_key(a) != bucket_key({**a, "input_ids": torch.zeros(3, 16, dtype=torch.long)})
    assert bucket_key({**a, "extra": [1, 2]}) is None  # cannot be held fixed


def test_an_optimizer_the_step_cannot_hold_is_refused_with_the_reason():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(StepBodyUnsupported, match="torch.optim.sgd.SGD"):
        StepBody(optimizer, list(model.parameters()), 1.0, lambda batch: None)


class FailingBody(CallReplay):
    def warm_up(self, body):
        raise RuntimeError("expected scalar type Float but found Double")


def test_a_warm_up_that_fails_drops_every_recording_and_says_why():
    from sagemaker_tc.errors import StepBodyFailed

    model = _model()
    with pytest.raises(StepBodyFailed, match="expected scalar type Float"):
        _captured(model, _batches([16, 16]), FailingBody())


def test_the_learning_rate_tensor_is_what_the_fused_kernel_reads():
    from sagemaker_tc.compiler.step_body import learning_rate_dtype

    assert learning_rate_dtype("cuda") == torch.float32  # the CUDA kernel reads a float
    assert learning_rate_dtype("cpu") == torch.float64  # bit for bit the Python-float update on the CPU
