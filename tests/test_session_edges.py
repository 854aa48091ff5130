"""The session's edges: what the report counts (only what compiled after the session opened), the
one setup both integrations share (``use_cache``), and the one world-size helper."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

import sagemaker_tc
from sagemaker_tc.compiler.dynamo import dynamo_stats
from sagemaker_tc.compiler.ranks import process_group_size, world_size
from sagemaker_tc.compiler.session import CompilerSession, current_session
from sagemaker_tc.config import TrainingCompilerConfig


def _branchy(x):
    y = torch.sin(x) * 2
    if y.sum() > 0:  # data-dependent branch: a graph break
        return y + 1
    return y - 1


def test_what_dynamo_compiled_before_the_session_opened_is_not_in_its_report():
    compiled_before = torch.compile(_branchy, backend="eager")
    compiled_before(torch.ones(4))
    compiled_before(torch.ones(4, 3))  # another shape: a recompile
    process = dynamo_stats()
    assert process.graphs >= 2 and process.recompiles >= 1

    with CompilerSession(TrainingCompilerConfig()) as session:
        compiled_before(torch.ones(4))  # cached: nothing new
        nothing = session.report()
        during = torch.compile(lambda x: torch.cos(x) + 3, backend="eager")
        during(torch.ones(5))
        one = session.report()
    assert (nothing["graphs"], nothing["recompiles"], nothing["graph_breaks"]) == (0, 0, 0)
    assert nothing["graph_break_reasons"] == {}
    assert (one["graphs"], one["recompiles"], one["graph_breaks"]) == (1, 0, 0)
    assert dynamo_stats().graphs == process.graphs + 1  # the process-wide count goes on


class _TwoLayers(torch.nn.Module):
    """Defined here: dynamo traces its forward (it skips the frames of torch's own modules)."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(6, 8), torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


def test_a_compile_model_session_counts_its_own_graph_only():
    warm = torch.compile(lambda x: torch.tanh(x) * 5, backend="eager")
    warm(torch.ones(3))
    assert dynamo_stats().graphs >= 1
    model = _TwoLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="model", baseline_steps=0))
    for _ in range(3):
        model(torch.ones(4, 6)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    report = current_session().report()
    current_session().close()
    assert report["compiled"] is True and report["steps"] == 3
    assert report["graphs"] == 1  # the model's forward; the function compiled before is not counted


# -- use_cache: the same in both integrations --------------------------------------------------------
def _tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=2, n_head=2)
    return GPT2LMHeadModel(config).train()


def _through_compile_model(session, model):
    sagemaker_tc.compile_model(model)


def _through_the_trainer(session, model):
    from sagemaker_tc.integrations.transformers import prepare_training

    args = SimpleNamespace(gradient_accumulation_steps=1)
    prepare_training(session.trainer_parts(), model, None, args, SimpleNamespace(max_steps=10), torch_compile=False)


@pytest.mark.parametrize("setup", [_through_compile_model, _through_the_trainer])
@pytest.mark.parametrize("plan", ["regional", "model"])
def test_both_integrations_switch_use_cache_off_while_training_and_back_at_close(setup, plan, caplog):
    model = _tiny_gpt2()
    assert model.config.use_cache is True
    with caplog.at_level(logging.INFO, logger="sagemaker_tc.integrations"):
        with CompilerSession(TrainingCompilerConfig(plan=plan)) as session:
            setup(session, model)
            assert model.config.use_cache is False
            assert session.record.regions is not None and session.runtime.calls.forwards_per_step == 1
    assert model.config.use_cache is True  # the session's close set it back
    lines = [r.getMessage() for r in caplog.records if r.name == "sagemaker_tc.integrations"]
    assert lines[0] == (
        "GPT2LMHeadModel: config.use_cache is off while training (a KV cache makes each compiled layer "
        "recompile); set back at train end"
    )
    assert lines[1].startswith(f"Compiler for GPT2LMHeadModel with inductor: plan {plan} (")


@pytest.mark.parametrize("setup", [_through_compile_model, _through_the_trainer])
def test_neither_integration_touches_use_cache_when_the_config_does_not_compile(setup, caplog):
    model = _tiny_gpt2()
    with caplog.at_level(logging.INFO, logger="sagemaker_tc.integrations"):
        with CompilerSession(TrainingCompilerConfig(backend="eager")) as session:
            setup(session, model)
            assert model.config.use_cache is True
    lines = [r.getMessage() for r in caplog.records if r.name == "sagemaker_tc.integrations"]
    assert lines == ["Compiler off for GPT2LMHeadModel (enabled=True, backend=eager)"]


def test_the_trainer_sets_use_cache_back_at_train_end_and_the_close_does_not_flip_it_again():
    from sagemaker_tc.integrations.transformers import make_callback

    model = _tiny_gpt2()
    with CompilerSession(TrainingCompilerConfig()) as session:
        _through_the_trainer(session, model)
        make_callback(session.trainer_parts()).on_train_end(None, None, None, model=model)
        assert model.config.use_cache is True
        model.config.use_cache = False  # the script's own choice after training
    assert model.config.use_cache is False


# -- one world size ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("environ", "expected"), [({}, 1), ({"WORLD_SIZE": "4"}, 4), ({"WORLD_SIZE": "x"}, 1)])
def test_world_size_is_torchruns_until_a_process_group_exists(environ, expected):
    assert process_group_size() == 1  # no process group in this process: a collective reaches no one
    assert world_size(environ) == expected
