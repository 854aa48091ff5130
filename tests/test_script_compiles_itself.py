"""A ``Trainer`` script that compiles its model itself (``TrainingArguments(torch_compile=True)``, or
a model it wrapped with ``torch.compile``) keeps its own compile: the session installs no plan on the
model, says so once, and still times every step."""

from __future__ import annotations

import logging

import pytest
import torch

from sagemaker_tc import TrainingCompilerConfig, _internals
from sagemaker_tc.compiler.session import CompilerSession
from sagemaker_tc.integrations.transformers import install


class Rows(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": torch.arange(index, index + 6) % 64, "labels": torch.tensor(index % 2)}


def _tiny_bert() -> torch.nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    return BertForSequenceClassification(config)


def _wrapped(model):
    return torch.compile(model, backend="eager"), {}


def _flag(model):
    return model, {"torch_compile": True, "torch_compile_backend": "eager"}


WAYS = [(_wrapped, "a model torch.compile wrapped"), (_flag, "TrainingArguments(torch_compile=True)")]


@pytest.mark.parametrize(("compile_itself", "said"), WAYS)
def test_a_trainer_script_that_compiles_itself_keeps_its_compile_and_is_timed(tmp_path, caplog, compile_itself, said):
    from transformers import Trainer, TrainingArguments

    module = _tiny_bert()
    model, flags = compile_itself(module)
    session = CompilerSession(TrainingCompilerConfig(plan="model", baseline_steps=0)).open()
    install(session.trainer_parts())
    try:
        arguments = TrainingArguments(
            output_dir=str(tmp_path), report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
            max_steps=3, per_device_train_batch_size=4, seed=0, remove_unused_columns=False, **flags,
        )  # fmt: skip
        with caplog.at_level(logging.INFO, logger="sagemaker_tc.integrations"):
            trainer = Trainer(model=model, args=arguments, train_dataset=Rows())
            # transformers 4.56 reads the wrapper's forward(*args, **kwargs) as taking num_items_in_batch,
            # which BERT's forward refuses (the same without sagemaker-tc)
            trainer.model_accepts_loss_kwargs = False
            trainer.train()
        assert session.record.regions is None  # nothing attached: no plan prepared on the model
        assert _internals.compiled_call(module) is None  # and none installed in the module's slot
        assert len(session.timer.records) == 3
    finally:
        session.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "sagemaker_tc.integrations.transformers"]
    assert [line for line in lines if "the script compiles itself" in line] == [
        f"{said}: the script compiles itself; sagemaker-tc only measures"
    ]
