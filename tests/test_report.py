"""Step summaries, the report and its metric lines (pure: no timing, exact numbers)."""

import re

from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler.dynamo import DynamoStats
from sagemaker_tc.compiler.report import JobFacts, build_report, metric_lines
from sagemaker_tc.compiler.steps import StepRecord, summarize
from sagemaker_tc.sdk import COMPILER_METRIC_DEFINITIONS


def steps(*items):
    return [StepRecord(seconds=s, samples=n, compiled_during=c) for s, n, c in items]


def test_summary_separates_compiling_steps_from_steady_ones():
    summary = summarize(steps((12.0, 32, True), (1.0, 32, False), (1.5, 32, False), (2.0, 32, False), (5.5, 16, True)))
    assert summary.steps == 5
    assert summary.first_step_seconds == 12.0
    assert summary.steady_step_seconds == 1.5  # median of 1.0, 1.5, 2.0
    assert summary.compile_seconds == (12.0 - 1.5) + (5.5 - 1.5)
    assert summary.samples_per_second == 96 / 4.5


def test_summary_without_steady_steps_has_no_rates():
    summary = summarize(steps((3.0, 8, True)))
    assert (summary.steady_step_seconds, summary.compile_seconds, summary.samples_per_second) == (None, None, None)
    assert summarize([]).steps == 0


def test_report_claims_compiled_only_when_graphs_ran():
    summary = summarize(steps((4.0, 8, True), (1.0, 8, False)))
    compiled = build_report(
        TrainingCompilerConfig(),
        JobFacts(steps=summary, dynamo=DynamoStats(graphs=3), integration="pytorch", regional=True),
    )
    assert compiled["compiled"] is True and compiled["fallback_reason"] is None
    nothing = build_report(TrainingCompilerConfig(), JobFacts(steps=summary, dynamo=DynamoStats(), regional=True))
    assert nothing["compiled"] is False and "no compiled graph ran" in nothing["fallback_reason"]
    eager = build_report(
        TrainingCompilerConfig(backend="eager"),
        JobFacts(steps=summary, dynamo=DynamoStats(graphs=2), integration="pytorch"),
    )
    assert eager["compiled"] is False and eager["fallback_reason"] is None


def test_metric_lines_match_the_sdk_metric_definitions():
    report = build_report(
        TrainingCompilerConfig(),
        JobFacts(
            steps=summarize(steps((4.0, 8, True), (0.5, 8, False))),
            dynamo=DynamoStats(graphs=2, recompiles=1, graph_breaks=3),
            integration="transformers",
            regional=True,
        ),
    )
    text = "\n".join(metric_lines(report))
    assert "[sagemaker-tc] compiled=1" in text
    found = {d["Name"]: float(re.search(d["Regex"], text).group(1)) for d in COMPILER_METRIC_DEFINITIONS}
    assert found == {
        "compiler:compile_seconds": 3.5,
        "compiler:steady_step_seconds": 0.5,
        "compiler:samples_per_second": 16.0,
        "compiler:recompiles": 1.0,
        "compiler:graph_breaks": 3.0,
    }


def test_summary_of_the_final_variant_and_break_even_in_the_report():
    records = [
        StepRecord(2.0, 8, False, "eager"),
        StepRecord(1.0, 8, False, "eager"),
        StepRecord(1.0, 8, False, "eager"),
        StepRecord(9.0, 8, True, "compiled"),
        StepRecord(0.5, 8, False, "compiled"),
        StepRecord(0.5, 8, False, "compiled"),
    ]
    summary = summarize(records, "compiled")
    assert summary.steady_step_seconds == 0.5 and summary.compile_seconds == 8.5
    assert summary.samples_per_second == 16 / 1.0
    report = build_report(
        TrainingCompilerConfig(),
        JobFacts(
            steps=summary,
            dynamo=DynamoStats(graphs=1),
            integration="pytorch",
            regional=True,
            variant="compiled",
            eager_step_seconds=1.0,
            trials=[
                {"variant": "eager", "steady_step_seconds": 1.0},
                {"variant": "compiled", "steady_step_seconds": 0.5},
            ],
        ),
    )
    assert report["compiled"] is True and report["break_even_steps"] == 17  # 8.5 s / 0.5 s saved per step
    assert report["cache"] == {"state": "disabled", "hit": False} and report["recompile_limit_hit"] is False


def test_report_of_an_auto_job_that_kept_eager_says_why():
    summary = summarize([StepRecord(1.0, 8, False, "eager"), StepRecord(1.0, 8, False, "eager")], "eager")
    report = build_report(
        TrainingCompilerConfig(),
        JobFacts(
            steps=summary,
            dynamo=DynamoStats(graphs=2),
            integration="pytorch",
            regional=True,
            variant="eager",
            eager_step_seconds=1.0,
            trials=[
                {"variant": "eager", "steady_step_seconds": 1.0},
                {"variant": "compiled", "steady_step_seconds": 1.2},
            ],
            recompile_limit_hits=["torch._dynamo hit config.recompile_limit (8)"],
        ),
    )
    assert report["compiled"] is False and report["break_even_steps"] is None
    assert (
        report["fallback_reason"] == "plan='auto' kept eager: it measured fastest (eager 1 s/step, compiled 1.2 s/step)"
    )
    assert report["recompile_limit_hit"] is True


def test_report_of_an_auto_job_too_short_to_decide_says_so():
    summary = summarize([StepRecord(1.0, 8, False, "eager")] * 3, "eager")
    report = build_report(
        TrainingCompilerConfig(),
        JobFacts(
            steps=summary,
            dynamo=DynamoStats(),
            variant="eager",
            plan="eager",
            plan_decision={"requested": "auto", "decision": None},
            trials=[{"plan": "eager", "variant": "eager", "steady_step_seconds": 1.0}],
        ),
    )
    assert report["compiled"] is False and report["plan"] == "eager"
    assert report["fallback_reason"] == (
        "plan='auto' kept eager: the job ended after 3 step(s), during plan='auto''s eager steps, before any decision"
    )


def test_the_steady_steps_leave_out_the_first_step_and_the_compiling_ones():
    from sagemaker_tc.compiler.steps import steady_median, steady_steps

    records = steps((3.0, 8, False), (1.0, 8, False), (9.0, 8, True), (2.0, 8, False))
    assert [r.seconds for r in steady_steps(records)] == [1.0, 2.0]  # the first step warms up, even eager
    assert summarize(records).steady_step_seconds == 1.5 and steady_median(records) == 1.5
    assert [r.seconds for r in steady_steps(steps((3.0, 8, False)))] == [3.0]  # the only step counts
    mixed = [StepRecord(1.0, 8, False, "eager"), StepRecord(2.0, 8, False, "eager"), StepRecord(0.5, 8, False, "x")]
    assert [r.seconds for r in steady_steps(mixed, "eager")] == [2.0]
