"""Issue 42 item 0, bench side: the rows that decide the design (the peer with reduce-overhead, the
step plan, the ABBA pair as repeated rows), the Trainer-shaped bench step, and the new columns (host
ms, GPU busy ms, syncs per step, CUDA graphs recorded and replayed, peak reserved memory)."""

from __future__ import annotations

import contextlib
import importlib.util
import types
from pathlib import Path

import pytest
import torch

from sagemaker_tc_bench import probes, report, runner, variants, worker
from sagemaker_tc_bench.errors import BenchError

REPO = Path(__file__).resolve().parents[1]


# -- variants: the peer with reduce-overhead, repeats ----------------------------------------------------------


def test_the_peer_with_reduce_overhead_and_repeated_rows_are_accepted_variants():
    assert variants.PEER_REDUCE_OVERHEAD == "hf-torch-compile-reduce-overhead"
    assert variants.check_variant("hf-torch-compile-reduce-overhead") == "hf-torch-compile-reduce-overhead"
    assert variants.check_variant("sagemaker-tc-step@2") == "sagemaker-tc-step@2"
    assert variants.base_variant("sagemaker-tc-step@2") == "sagemaker-tc-step"
    assert variants.repeat_suffix("hf-torch-compile@3") == "@3" and variants.repeat_suffix("eager") == ""
    for bad in ("sagemaker-tc-step@1", "sagemaker-tc-step@x", "nope@2", "eager@"):
        with pytest.raises(BenchError, match="repeat suffix @N"):
            variants.check_variant(bad)


def test_the_abba_pair_is_accepted_by_the_options_and_a_name_twice_is_not():
    abba = ["hf-torch-compile", "sagemaker-tc-step", "sagemaker-tc-step@2", "hf-torch-compile@2"]
    options = runner.resolve_options(models=["bert-base-uncased"], variants=abba, device="cpu")
    assert options.variants == tuple(abba) and options.steps == 60  # at least 60 timed steps by default
    with pytest.raises(BenchError, match="listed twice"):
        runner.resolve_options(models=["bert-base-uncased"], variants=["eager", "eager"], device="cpu")


def test_the_reduce_overhead_peer_compiles_the_whole_model_with_that_mode_and_says_cpu_has_no_graphs():
    model = torch.nn.Linear(4, 2)
    prepared = variants.finish("hf-torch-compile-reduce-overhead", model)
    assert prepared.details["compile"] == 'torch.compile(model, backend="inductor", mode="reduce-overhead")'
    assert "only on a CUDA device" in prepared.details["cuda_graphs"]
    assert prepared.details["optimizer"] == "AdamW (fused)" and prepared.model is not model
    again = variants.finish("sagemaker-tc-step@2", torch.nn.Linear(4, 2))  # the repeat runs the step plan
    assert "plan='step'" in again.details["compile"]


# -- rows: each round's pair, the reduce-overhead ratio ----------------------------------------------------------


def _result(variant: str, step_s: float) -> dict:
    return {
        "status": "ok",
        "model": "bert-base-uncased",
        "variant": variant,
        "step_seconds": [1.0] + [step_s] * 10,
        "compiled_during": [True] + [False] * 10,
        "load_avg_1m": [0.0, 0.0],
        "device_name": None,
        "flops_per_sample": 1.0,
    }


def test_each_repeated_step_row_is_compared_with_the_peer_of_its_own_round():
    options = runner.resolve_options(models=["bert-base-uncased"], device="cpu", batch_size=8)
    results = {
        name: _result(name, seconds)
        for name, seconds in [
            ("hf-torch-compile", 0.020),
            ("sagemaker-tc-step", 0.010),
            ("sagemaker-tc-step@2", 0.012),
            ("hf-torch-compile@2", 0.024),
            ("hf-torch-compile-reduce-overhead", 0.015),
            ("eager-tuned", 0.030),
            ("sagemaker-tc", 0.018),
        ]
    }

    rows = {row["variant"]: row for row in runner._model_rows(results, options, cores=64)}

    assert rows["sagemaker-tc-step"]["ours_vs_peer"] == pytest.approx(2.0)  # round 1: 20 / 10 ms
    assert rows["sagemaker-tc-step@2"]["ours_vs_peer"] == pytest.approx(2.0)  # round 2: 24 / 12 ms
    assert rows["sagemaker-tc"]["ours_vs_peer"] == pytest.approx(20 / 18)  # no repeat: the first peer row
    assert rows["sagemaker-tc-step"]["ours_vs_peer_ro"] == pytest.approx(1.5)
    assert rows["hf-torch-compile-reduce-overhead"]["vs_uncompiled"] == pytest.approx(2.0)
    assert rows["hf-torch-compile@2"]["vs_uncompiled"] == pytest.approx(1.25)
    assert rows["hf-torch-compile"]["ours_vs_peer"] is None  # the peers get no ours-vs-peer figure


# -- report: the new columns -----------------------------------------------------------------------------------


def test_the_table_shows_the_new_columns_and_needs_cuda_for_cuda_only_figures_on_a_cpu():
    row = {
        "model": "m",
        "variant": "sagemaker-tc-step",
        "status": "ok",
        "host_ms": 4.5,
        "gpu_busy_ms": None,
        "syncs_per_step": None,
        "peak_reserved_bytes": None,
        "needs_cuda": ["gpu_busy_ms", "syncs_per_step", "peak_reserved_bytes"],
        "cuda_graphs_recorded": 0,
        "cuda_graph_replays_per_step": 0.0,
        "ours_vs_peer_ro": 1.6,
        "ours_vs_peer_ro_noisy": False,
    }
    cuda_row = {**row, "gpu_busy_ms": 5.25, "syncs_per_step": 0.4, "peak_reserved_bytes": 3 * report.MIB}
    cuda_row.update(needs_cuda=[], cuda_graphs_recorded=2, cuda_graph_replays_per_step=2.0)

    assert [report._cell(key, row) for key in ("host_ms", "gpu_busy_ms", "syncs_per_step")] == [
        "4.50",
        "needs CUDA",
        "needs CUDA",
    ]
    assert report._cell("peak_reserved_bytes", row) == "needs CUDA" and report._cell("ours_vs_peer_ro", row) == "1.60x"
    assert [report._cell(key, cuda_row) for key in ("gpu_busy_ms", "syncs_per_step", "peak_reserved_bytes")] == [
        "5.25",
        "0.4",
        "3",
    ]
    assert report._cell("cuda_graphs_recorded", cuda_row) == "2" and report._cell("mfu", row) == "-"
    document = {"options": {"variants": ["hf-torch-compile-reduce-overhead", "sagemaker-tc-step@2"]}, "results": []}
    assert report.PEER_RO_COLUMN in report.columns(document) and report.PEER_COLUMN not in report.columns(document)
    headings = [heading for _, heading in report.COLUMNS]
    for heading in ("host ms", "GPU busy ms", "syncs/step", "graphs recorded", "replays/step", "peak reserved MiB"):
        assert heading in headings


# -- the Trainer-shaped step -----------------------------------------------------------------------------------


class _Output:
    def __init__(self, loss: torch.Tensor) -> None:
        self.loss = loss


class _Model(torch.nn.Module):
    """A model called as ``model(**batch).loss``, like a transformers model with labels."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> _Output:
        return _Output(((self.linear(x) - y) ** 2).mean() * 100.0)  # large gradients: clipping bites


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = _Model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    batches = [{"x": torch.randn(4, 8), "y": torch.randn(4, 1)} for _ in range(3)]
    return model, optimizer, worker.linear_schedule(optimizer, 10), batches


def test_the_bench_step_is_the_trainers_sequence_bitwise():
    """trainer_step equals the Trainer's own order written out (clip at 1.0, optimizer step, scheduler
    step, zero_grad(set_to_none=True)) bitwise, over steps where the learning rate changes."""
    model, optimizer, scheduler, batches = _setup()
    reference, ref_optimizer, ref_scheduler, _ = _setup()
    off = torch.autocast("cpu", enabled=False)

    for index in range(6):
        worker.trainer_step(model, optimizer, scheduler, batches[index % 3], off, index)
        loss = reference(**batches[index % 3]).loss
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
        assert float(norm) > 1.0  # the clip changes the update
        ref_optimizer.step()
        ref_scheduler.step()
        ref_optimizer.zero_grad(set_to_none=True)

    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.equal(ours, theirs) and ours.grad is None
    assert scheduler.get_last_lr() == ref_scheduler.get_last_lr() == [pytest.approx(1e-2 * 4 / 10)]


def test_the_bench_step_reads_the_loss_only_every_50_steps(monkeypatch):
    model, optimizer, scheduler, batches = _setup()
    reads = []
    original = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: reads.append(1) or original(self))

    for index in range(0, 101):
        worker.trainer_step(model, optimizer, scheduler, batches[0], torch.autocast("cpu", enabled=False), index)

    assert worker.LOSS_READ_EVERY == 50 and len(reads) == 3  # steps 0, 50 and 100


# -- probes ----------------------------------------------------------------------------------------------------


class _FakeGraph:
    """Stands in for torch.cuda.CUDAGraph: records what it was asked to do."""

    calls: list[str] = []

    def capture_begin(self, *args, **kwargs):
        self.calls.append("capture")

    def replay(self):
        self.calls.append("replay")


def test_the_graph_counter_counts_captures_and_replays_and_puts_the_methods_back():
    original_replay = _FakeGraph.__dict__["replay"]
    graph = _FakeGraph()
    with probes.GraphCounter(_FakeGraph) as counter:
        graph.capture_begin()
        for _ in range(3):
            graph.replay()
        assert counter.counts() == (1, 3)
    graph.replay()  # after uninstall: not counted
    assert counter.counts() == (1, 3) and _FakeGraph.calls == ["capture", "replay", "replay", "replay", "replay"]
    assert _FakeGraph.__dict__["replay"] is original_replay
    assert probes.GraphCounter(object).install().counts() is None  # nothing to count: no figure


def test_the_real_cuda_graph_class_is_counted_and_restored():
    from torch.cuda.graphs import CUDAGraph

    before = (CUDAGraph.__dict__["capture_begin"], CUDAGraph.__dict__["replay"])
    counter = probes.GraphCounter().install()
    assert counter.available and CUDAGraph.__dict__["replay"] is not before[1]
    counter.uninstall()
    assert (CUDAGraph.__dict__["capture_begin"], CUDAGraph.__dict__["replay"]) == before
    assert counter.counts() == (0, 0)


def test_cuda_only_probes_are_none_on_a_cpu_and_never_run_the_step():
    ran = []
    cpu = torch.device("cpu")
    assert probes.gpu_busy_ms(ran.append, 0, cpu) is None
    assert probes.syncs_per_step(ran.append, 0, cpu) is None
    assert probes.peak_reserved_bytes(cpu) is None and ran == []
    assert isinstance(probes.inductor_cudagraph_counters(), dict)


# -- benchmarks/host_overhead.py -------------------------------------------------------------------------------


def _host_overhead():
    spec = importlib.util.spec_from_file_location("host_overhead", REPO / "benchmarks" / "host_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_host_overhead_reports_the_median_of_its_rounds_and_labels_reduce_overhead_on_a_cpu():
    module = _host_overhead()
    runs = [{"variant": "torch.compile reduce-overhead", "step_ms": ms, "aten_ops_per_step": 1} for ms in (30, 10, 20)]

    row = module._summary("torch.compile reduce-overhead", runs)

    assert row["step_ms"] == 20 and row["step_ms_rounds"] == [30, 10, 20]
    assert "no CUDA graphs on a CPU" in row["label"]
    assert module.ROUNDS >= 3 and module.PEER_REDUCE_OVERHEAD in module.VARIANTS


def test_host_overhead_floor_runs_forward_and_backward_but_never_updates_the_weights():
    module = _host_overhead()

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)

        def forward(self, x):
            return types.SimpleNamespace(loss=self.linear(x).pow(2).mean())

    model = Tiny()
    before = [parameter.detach().clone() for parameter in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    seen = []
    model.linear.weight.register_hook(lambda grad: seen.append(grad.abs().sum()))

    module.forward_backward(model, optimizer, {"x": torch.ones(2, 4)}, contextlib.nullcontext())

    assert len(seen) == 1 and seen[0] > 0  # the backward ran
    assert all(parameter.grad is None for parameter in model.parameters()) and optimizer.state == {}
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert module.FLOOR in module.VARIANTS and "a floor" in module.LABELS[module.FLOOR]


def test_host_overhead_skips_guards_only_in_its_own_row_and_only_while_measuring():
    module = _host_overhead()
    calls = []

    def count(x):
        calls.append(x.shape)
        return x * 2

    compiled = torch.compile(count, backend="eager", dynamic=False)
    compiled(torch.ones(2))  # the warm-up compiles the one entry
    with module.measured_stance(module.PEER_SKIP_GUARDS):
        compiled(torch.ones(2))
        with pytest.raises(RuntimeError, match="skip_guard_eval_unsafe"):  # the stance allows no recompile
            compiled(torch.ones(3))
    with module.measured_stance(module.PEER):
        compiled(torch.ones(4))  # the default stance: a new shape recompiles
    assert calls == [(2,), (4,)]  # traced at the warm-up and at the recompile, never under the stance
    assert {module.PEER_CPP_WRAPPER, module.PEER_SKIP_GUARDS} <= set(module.VARIANTS)
    assert "cpp_wrapper" in module.LABELS[module.PEER_CPP_WRAPPER]


def test_an_inherited_graph_method_is_counted_and_removed_again():
    class Child(_FakeGraph):
        pass

    with probes.GraphCounter(Child) as counter:
        Child().replay()
        assert "replay" in Child.__dict__
    assert counter.counts() == (0, 1) and "replay" not in Child.__dict__ and "capture_begin" not in Child.__dict__


def test_a_failing_probe_pass_costs_the_row_only_that_figure(monkeypatch):
    def broken(step, first_index, device, steps=probes.PROBE_STEPS):
        raise RuntimeError("profiler unavailable")

    monkeypatch.setattr(probes, "gpu_busy_ms", broken)
    spec = worker.WorkerSpec("tiny", "tiny", "eager", 2, 1, steps=4, dtype="fp32", device="cpu", data_path="")

    figures = worker._figures(lambda index: None, 10, spec, torch.device("cpu"), (0, 0), (0, 0))

    assert figures["gpu_busy_ms"] is None and figures["probe_errors"] == {
        "gpu_busy_ms": "RuntimeError: profiler unavailable"
    }
    assert figures["cuda_graph_replays_per_step"] == 0 and figures["peak_memory_bytes"] > 0
