"""The ``model`` plan compiles what the peer compiles, for every tested architecture.

The peer is whole-model ``torch.compile``, as ``TrainingArguments(torch_compile=True)`` does it
(accelerate's ``torch.compile(model, backend="inductor")``; ``sagemaker_tc_bench.variants``). A GPU
result of the peer is the ``model`` plan's GPU evidence (``planner.GPU_EVIDENCE``) only because the
two hand Inductor the same graphs: the same number of graphs (so the same graph breaks) and, graph
by graph, the same operators. Both compile here with a backend that records dynamo's graphs and runs
them as they are, so each case costs seconds and what is compared is what Inductor would be given.

One difference is ours by design: a compiling session switches ``config.use_cache`` off while the
model trains (``compiler/model_setup.py``: a KV cache makes the graph grow per call). The peer is
compared with ``use_cache`` off as well; with it on, the peer's graphs only add the cache's ops.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import sagemaker_tc
from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler import plan_call
from sagemaker_tc_bench import suite

CACHE_OPS = {"call_function:cat", "call_function:tensor"}
"""What a KV cache adds to a decoder's graph (DynamicCache's updates), per layer."""


def recording_backend(graphs: list[Counter]):
    """A dynamo backend that keeps each graph's operators (``op:target`` -> count) and runs the
    graph uncompiled."""

    def backend(graph_module, example_inputs):
        ops = Counter()
        for node in graph_module.graph.nodes:
            if node.op in ("call_function", "call_method", "call_module"):
                ops[f"{node.op}:{getattr(node.target, '__name__', None) or node.target}"] += 1
        graphs.append(ops)
        return graph_module.forward

    return backend


def training_batch(model) -> dict[str, torch.Tensor]:
    """Two rows of 12 token ids with the labels the architecture's head takes."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 1000, (2, 12), generator=generator)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    head = type(model).__name__
    if "SequenceClassification" in head:
        batch["labels"] = torch.tensor([0, 1])
    elif "ConditionalGeneration" in head:
        batch["labels"] = torch.randint(3, 1000, (2, 5), generator=generator)
    else:
        batch["labels"] = ids.clone()
    return batch


def train_step(model, batch) -> float:
    loss = model(**batch).loss
    loss.backward()
    return loss.detach().item()


def build(name: str, *, use_cache: bool):
    torch.manual_seed(0)
    model = suite.build_model(name, "tiny", dropout=False)
    if getattr(model.config, "use_cache", None) is not None:
        model.config.use_cache = use_cache
    return model


def peer_graphs(name: str, batch, *, use_cache: bool) -> tuple[list[Counter], float]:
    graphs: list[Counter] = []
    loss = train_step(torch.compile(build(name, use_cache=use_cache), backend=recording_backend(graphs)), batch)
    return graphs, loss


@pytest.mark.parametrize("name", list(suite.SUITE))
def test_model_plan_hands_inductor_the_peers_graphs(name, monkeypatch):
    torch._dynamo.reset()  # what earlier tests in this process compiled must not serve our side's frames
    model = build(name, use_cache=True)  # as a user builds it: the session switches the cache off
    batch = training_batch(model)
    ours: list[Counter] = []
    real_compile_forward = plan_call.compile_forward
    monkeypatch.setattr(
        plan_call,
        "compile_forward",
        lambda tag, budget, **kwargs: real_compile_forward(
            tag, budget, **{**kwargs, "backend": recording_backend(ours)}
        ),
    )
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="model", buckets=None, baseline_steps=0))
    our_loss = train_step(model, batch)

    torch._dynamo.reset()
    peer, peer_loss = peer_graphs(name, batch, use_cache=False)
    assert len(ours) == len(peer) >= 1  # the same graphs, the same breaks
    assert ours == peer  # graph by graph, the same operators
    assert our_loss == peer_loss

    if getattr(model.config, "use_cache", None) is not None:  # a decoder: the peer as users run it
        torch._dynamo.reset()
        cached, _ = peer_graphs(name, batch, use_cache=True)
        assert len(cached) == len(peer)
        for with_cache, without in zip(cached, peer, strict=True):
            assert not without - with_cache and set(with_cache - without) <= CACHE_OPS
