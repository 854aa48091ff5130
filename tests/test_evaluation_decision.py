"""Evaluation under a compiled plan runs eager unless the projection says compiling it pays, and the
report says which (issue 32, point 9).

Plans compile with dynamo's ``aot_eager`` backend (the ``plan_backend`` fixture of
``test_plan_call.py``): what is under test is which calls compile, counted by dynamo, not Inductor's
kernels. Choices are asserted from given timings, never from wall-clock thresholds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from conftest import tiny_bert
from test_plan_call import plan_backend  # noqa: F401  (a fixture)

import sagemaker_tc
from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler import evaluation
from sagemaker_tc.compiler.dynamo import dynamo_stats
from sagemaker_tc.compiler.evaluation import EvalInputs, decide, expected_graphs
from sagemaker_tc.compiler.session import current_session
from sagemaker_tc.integrations.transformers import evaluation_runs


def inputs(**overrides) -> EvalInputs:
    """200 calls left at 0.5 s eager, training 2x faster under the plan, 3 graphs at 10 s each:
    saving 200 x 0.5 x (1 - 1/2) = 50 s, cost 30 s."""
    fields = dict(
        plan="regional",
        remaining_calls=200,
        eager_call_seconds=0.5,
        training_speedup=2.0,
        graphs=3,
        seconds_per_compile=10.0,
    )
    return EvalInputs(**{**fields, **overrides})


def test_evaluation_compiles_only_where_the_saving_exceeds_the_compile():
    paying = decide(inputs())
    assert paying["runs"] == "compiled"
    assert paying["saving_seconds"] == pytest.approx(50.0) and paying["cost_seconds"] == pytest.approx(30.0)
    assert paying["remaining_calls"] == 200 and paying["training_speedup"] == 2.0  # the figures it decided on
    assert decide(inputs(remaining_calls=100))["runs"] == "eager"  # 25 s saved < 30 s of compile
    assert decide(inputs(graphs=6))["runs"] == "eager"  # 50 s saved < 60 s of compile
    assert decide(inputs(training_speedup=1.0))["runs"] == "eager"  # no faster: nothing saved
    assert decide(inputs(training_speedup=0.9))["runs"] == "eager"  # slower compiled
    assert decide(inputs(remaining_calls=0, graphs=0))["runs"] == "eager"  # nothing left, nothing to compile


UNKNOWABLE = ["remaining_calls", "eager_call_seconds", "training_speedup", "seconds_per_compile"]


@pytest.mark.parametrize("unknown", UNKNOWABLE)
def test_evaluation_stays_eager_when_an_input_is_unknown(unknown):
    choice = decide(inputs(**{"remaining_calls": 10**9, unknown: None}))  # however many calls are left
    assert choice["runs"] == "eager" and unknown in choice["reason"]
    assert choice["saving_seconds"] is None


def test_the_graphs_evaluation_shapes_compile():
    shapes = {(("input_ids", (8, length)), ("attention_mask", (8, length))) for length in (10, 12, 14)}
    shapes.add((("input_ids", (3, 10)), ("attention_mask", (3, 10))))  # the last, smaller batch
    assert expected_graphs(shapes, dynamic=False) == 4  # one per shape
    assert expected_graphs(shapes, dynamic=True) == 1
    assert expected_graphs(shapes, dynamic=None) == 3  # the first, then the length, then the batch dynamic
    assert expected_graphs({(("input_ids", (8, 10)),)}, dynamic=None) == 1
    assert expected_graphs(set(), dynamic=None) == 0


def test_the_evaluation_runs_a_trainer_makes():
    args = SimpleNamespace(eval_strategy="steps", eval_on_start=False, eval_delay=0, num_train_epochs=3)
    state = SimpleNamespace(eval_steps=50, max_steps=420, num_train_epochs=3)
    assert evaluation_runs(args, state) == (8, "Trainer eval_steps=50 over max_steps=420")
    assert evaluation_runs(SimpleNamespace(**{**vars(args), "eval_delay": 101}), state)[0] == 6  # from step 101
    assert evaluation_runs(SimpleNamespace(**{**vars(args), "eval_on_start": True}), state)[0] == 9
    assert evaluation_runs(SimpleNamespace(**{**vars(args), "eval_strategy": "epoch"}), state)[0] == 3
    assert evaluation_runs(SimpleNamespace(**{**vars(args), "eval_strategy": "no"}), state)[0] == 0
    assert evaluation_runs(args, SimpleNamespace(eval_steps=None, max_steps=420)) == (None, "unknown")


class Rows(torch.utils.data.Dataset):
    """Sentence-classification rows of 6 to 20 tokens."""

    def __init__(self, count: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.rows = [
            {"input_ids": torch.randint(1, 64, (6 + (5 * i) % 15,), generator=generator), "labels": i % 2}
            for i in range(count)
        ]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        return self.rows[index]


def dynamic_padding(rows: list[dict]) -> dict:
    """Pad each batch to its own longest row (as ``DataCollatorWithPadding`` does)."""
    from torch.nn.utils.rnn import pad_sequence

    return {
        "input_ids": pad_sequence([row["input_ids"] for row in rows], batch_first=True),
        "attention_mask": pad_sequence([torch.ones_like(row["input_ids"]) for row in rows], batch_first=True),
        "labels": torch.tensor([row["labels"] for row in rows]),
    }


def trainer_job(tmp_path, config: TrainingCompilerConfig) -> tuple[dict, list[dict], list[int]]:
    """Train a tiny BERT for 12 steps, evaluating 12 rows (3 shapes) every 2 steps, in a session with
    the Trainer integration. Returns the report, the eval metrics of each evaluation run and the
    frames dynamo compiled during each evaluation run."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from sagemaker_tc.compiler.session import CompilerSession
    from sagemaker_tc.integrations.transformers import install

    eval_compiles, metrics, marks = [], [], []

    class CountEvalCompiles(TrainerCallback):  # a Trainer evaluates right after on_step_end
        def on_step_end(self, args, state, control, **kwargs):
            marks.append(dynamo_stats().frames_compiled)

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            eval_compiles.append(dynamo_stats().frames_compiled - marks[-1])

    torch.manual_seed(0)
    model = tiny_bert(vocab_size=64, hidden_size=16, max_position_embeddings=64)
    session = CompilerSession(config).open()
    install(session.trainer_parts())
    try:
        arguments = TrainingArguments(
            output_dir=str(tmp_path), report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
            max_steps=12, per_device_train_batch_size=4, per_device_eval_batch_size=4, seed=0,
            eval_strategy="steps", eval_steps=2, logging_strategy="no",
        )  # fmt: skip
        trainer = Trainer(
            model=model, args=arguments, train_dataset=Rows(32, 0), eval_dataset=Rows(12, 1),
            data_collator=dynamic_padding, callbacks=[CountEvalCompiles()],
        )  # fmt: skip
        trainer.train()
        metrics = [entry["eval_loss"] for entry in trainer.state.log_history if "eval_loss" in entry]
        report = session.report()
    finally:
        session.close()
    return report, metrics, eval_compiles


def test_a_trainer_job_under_a_compiled_plan_evaluates_eager_when_compiling_does_not_pay(
    tmp_path,
    plan_backend,  # noqa: F811
    monkeypatch,
):
    """Six evaluation runs of three shapes each under plan="regional": the Trainer says how many
    runs, the projection (from this job's own timings) does not pay on this CPU, so no evaluation
    run compiles a graph, and the eval losses are the eager job's."""
    choices = []
    monkeypatch.setattr(evaluation, "decide", lambda given: choices.append(decide(given)) or choices[-1])
    config = TrainingCompilerConfig(plan="regional", baseline_steps=2)  # trial measured at step 8 (2 + 6)
    report, losses, eval_compiles = trainer_job(tmp_path / "regional", config)
    _, eager_losses, _ = trainer_job(tmp_path / "eager", TrainingCompilerConfig(enabled=False))
    assert report["plan"] == "regional" and report["graphs"] > 0  # training ran compiled
    assert eval_compiles == [0] * 6  # no evaluation run compiled anything
    # Decided at the end of each run under the plan; from run 4 on (after the trial) on measured figures:
    # 3 calls per run, 2 runs left, against a compile of this job's own.
    measured = [choice for choice in choices if choice["training_speedup"] is not None]
    assert measured and measured[0]["remaining_calls"] == 6 and measured[0]["graphs"] >= 1
    assert all(choice["runs"] == "eager" and choice["saving_seconds"] <= choice["cost_seconds"] for choice in measured)
    assert all(choice["runs"] == "eager" for choice in choices)
    section = report["plan_decision"]["evaluation"]
    assert section["runs"] == "eager" and section["reason"].startswith("eager")
    assert section["expected_runs"] == 6 and section["evaluation_runs"] == 6 and section["evaluation_calls"] == 18
    assert losses == pytest.approx(eager_losses, rel=1e-5) and len(losses) == 6


def test_a_trainer_job_whose_timings_pay_evaluates_compiled(tmp_path, plan_backend, monkeypatch):  # noqa: F811
    """The same job with timings given to the decision that make compiling evaluation pay: the first
    evaluation run (before the decision) is eager, later ones compile and run the plan, the report
    says so with the figures, and the eval losses are the eager job's."""
    given = inputs(remaining_calls=1000, eager_call_seconds=1.0, seconds_per_compile=1.0)  # 500 s saved > 3 s
    decided = []

    def given_timings(self, plan):
        decided.append(plan)
        return given

    monkeypatch.setattr(evaluation.EvaluationCalls, "inputs_under", given_timings)
    report, losses, eval_compiles = trainer_job(tmp_path / "regional", TrainingCompilerConfig(plan="regional"))
    _, eager_losses, _ = trainer_job(tmp_path / "eager", TrainingCompilerConfig(enabled=False))
    assert decided == ["regional"]  # decided once, after the first evaluation run under the plan
    first_compiled = next(i for i, count in enumerate(eval_compiles) if count > 0)
    assert eval_compiles[:first_compiled] == [0] * first_compiled and first_compiled <= 2
    choice = report["plan_decision"]["evaluation"]
    assert choice["runs"] == "compiled" and choice["plan"] == "regional"
    assert choice["saving_seconds"] == pytest.approx(500.0) and choice["cost_seconds"] == pytest.approx(3.0)
    assert losses == pytest.approx(eager_losses, rel=1e-5)


def test_a_plain_loop_evaluates_eager_and_times_its_calls_without_a_decision_input(plan_backend):  # noqa: F811
    """A plain loop never says how many evaluations it makes: evaluation stays eager under the model
    plan (the whole model's compiled call picks the eager forward), its calls are timed, and the
    report says why."""
    torch.manual_seed(0)
    model = tiny_bert(vocab_size=64, hidden_size=16, max_position_embeddings=64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="model", baseline_steps=2))
    rows = Rows(12, 1)
    for step in range(9):
        model.train()
        model(**dynamic_padding([rows[step]])).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 3 == 2:
            model.eval()
            marked = dynamo_stats().frames_compiled
            with torch.no_grad():
                for index in range(0, 12, 4):
                    model(**dynamic_padding([rows[i] for i in range(index, index + 4)]))
            assert dynamo_stats().frames_compiled == marked  # no evaluation graph
    runtime_ = current_session().runtime
    assert runtime_.active == "model" and runtime_.evaluation.runs == 2  # the third run has not ended yet
    assert len(runtime_.evaluation.timer.records) == 9  # every evaluation call timed, eager
    choice = current_session().report()["plan_decision"]["evaluation"]
    assert choice["runs"] == "eager" and "remaining_calls" in choice["reason"]
    assert choice["expected_runs"] is None and choice["evaluation_calls"] == 9


def test_evaluation_runs_compiled_only_under_the_plan_it_was_shown_to_pay_for(plan_backend):  # noqa: F811
    model = tiny_bert(vocab_size=64, hidden_size=16, max_position_embeddings=64)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="regional", baseline_steps=0))
    runtime_ = current_session().runtime
    model.eval()
    assert runtime_.calls.variant(model) == evaluation.EAGER
    runtime_.evaluation.compiled_plan = "regional"  # as a paying decision sets it
    assert runtime_.calls.variant(model) == "dynamic"
    runtime_.eval_eager.add("regional")  # a compiled evaluation call of it failed
    assert runtime_.calls.variant(model) == evaluation.EAGER
    runtime_.evaluation.choice = {"runs": "compiled", "reason": "compiled: it pays"}
    assert runtime_.evaluation.summary()["runs"] == "eager"
