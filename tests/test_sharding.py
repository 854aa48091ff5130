"""FSDP2 seen by the compiler, in process: a real gloo process group of one rank and a real fully_shard-ed
tiny Llama (the 2-rank equality runs are tests/test_fsdp2.py)."""

import pytest
import torch
import torch.distributed as dist

import sagemaker_tc
from sagemaker_tc import GlooAveragingError, ShardingOrderWarning, TrainingCompilerConfig
from sagemaker_tc.compiler import sharding
from sagemaker_tc.compiler.session import current_session


@pytest.fixture
def gloo_world_of_one(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture
def close_session():
    yield
    session = current_session()
    if session is not None:
        session.close()


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        use_cache=False,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).train()


def shard(model, **kwargs):
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def full(param):
    return param.full_tensor() if hasattr(param, "full_tensor") else param.detach()


def train_step(model):
    tokens = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(input_ids=tokens, labels=tokens).loss.backward()
    optimizer.step()


def test_compile_model_after_fully_shard_warns_and_the_report_says_fsdp2(gloo_world_of_one, close_session):
    model = shard(tiny_llama(), reshard_after_forward=False)
    with pytest.warns(ShardingOrderWarning, match="compile_model\\(model\\) first, then fully_shard"):
        sagemaker_tc.compile_model(model, TrainingCompilerConfig(backend="eager"))
    train_step(model)
    distributed = current_session().report()["distributed"]
    assert distributed["strategy"] == "fsdp2" and distributed["world_size"] == 1
    assert distributed["units_sharded"] == 3 and distributed["reshard_after_forward"] is False
    assert [unit["module"] for unit in distributed["units"]] == ["<root>", "model.layers.0", "model.layers.1"]
    assert {unit["plan"] for unit in distributed["units"]} == {"eager"}  # backend="eager" compiles nothing


def test_fully_shard_after_compile_model_gives_no_warning_and_is_seen_at_the_first_step(
    gloo_world_of_one, close_session, recwarn
):
    model = tiny_llama()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(backend="eager"))
    assert current_session().report()["distributed"]["strategy"] is None
    shard(model)
    train_step(model)
    assert not [w for w in recwarn if issubclass(w.category, ShardingOrderWarning)]
    assert current_session().report()["distributed"]["units_sharded"] == 3


def test_fsdp2_on_a_gloo_that_sums_is_refused_before_the_first_sharded_step(
    gloo_world_of_one, close_session, monkeypatch
):
    # The installed torch's gloo averages (tests/test_internals.py asks it); here it is made to answer as
    # torch with pytorch#162338 does: the average of ones over 2 ranks comes out as their sum.
    monkeypatch.setattr(sharding._internals, "gloo_reduce_scatter_average", lambda: 2.0)
    monkeypatch.setattr(sharding, "_gloo_average", [])
    model = tiny_llama()
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(backend="eager"))
    shard(model)
    before = {name: full(param).clone() for name, param in model.named_parameters()}
    with pytest.raises(GlooAveragingError, match="pytorch#162338"):
        train_step(model)
    for name, param in model.named_parameters():  # nothing trained
        assert torch.equal(full(param), before[name]), name


def test_auto_under_fsdp2_may_try_only_the_regional_plan(gloo_world_of_one, close_session):
    plain, sharded = tiny_llama(), tiny_llama()
    sagemaker_tc.compile_model(plain, TrainingCompilerConfig(plan="auto"))
    runtime = current_session().runtime
    assert runtime._available_plans() == ["regional", "model", "step"]
    shard(sharded)
    with pytest.warns(ShardingOrderWarning):
        sagemaker_tc.compile_model(sharded)
    assert runtime._available_plans() == ["regional"]


def test_activation_checkpointing_is_seen():
    model = tiny_llama()
    assert sharding.activation_checkpointing(model) is False
    model.activation_checkpointing_enable()
    assert sharding.activation_checkpointing(model) is True


def test_a_trainer_asked_for_fsdp2_whose_model_is_not_sharded_is_told(tmp_path, caplog):
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), fsdp="full_shard", fsdp_config={"version": 2}, use_cpu=True)
    with caplog.at_level("WARNING", logger="sagemaker_tc.compiler"):
        assert sharding.note_trainer_fsdp(args, tiny_llama()) is True
    assert "asked for FSDP2, but the model is not sharded" in caplog.text
    assert sharding.note_trainer_fsdp(TrainingArguments(output_dir=str(tmp_path), use_cpu=True), tiny_llama()) is False
