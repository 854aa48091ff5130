"""Compile plans: the auto decision from given timings (pure), each plan's mechanics on CPU (compiled,
applied, in place, falling back), the compiled optimizer under an LR schedule, and no host sync in
what our hooks run on the step path."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_bert

from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler import planner
from sagemaker_tc.compiler.planner import Measured, Workload

# -- plan="auto" from given timings ---------------------------------------------------------------------
CPU = Workload(device="cpu", modules={"regional": 13, "model": 90, "step": 90})
CUDA = Workload(device="cuda", modules={"regional": 13, "model": 160, "step": 160})


def test_a_short_job_on_cpu_tries_nothing_and_keeps_eager():
    """MiniLM-sized step, 197 steps left: no plan's best case pays its compile on this CPU."""
    eager = [Measured("eager", 0.55)]
    plan, projections = planner.next_trial(eager, planner.COMPILED_PLANS, CPU, remaining_steps=197)
    assert plan is None
    assert [p.plan for p in projections][0] == "eager"
    choice, _ = planner.choose(eager, 197)
    assert choice == "eager"


def test_a_long_job_tries_the_cheapest_plan_first():
    eager = [Measured("eager", 0.55)]
    plan, projections = planner.next_trial(eager, planner.COMPILED_PLANS, CPU, remaining_steps=20_000)
    assert plan == "regional"
    regional = next(p for p in projections if p.plan == "regional")
    # prior: 6 s + 0.9 s x 13 modules of compile, then 0.55 s / 1.02 per step
    assert regional.seconds == pytest.approx(6.0 + 0.9 * 13 + 20_000 * 0.55 / 1.02)


def test_after_a_trial_the_next_plan_must_beat_what_was_measured():
    measured = [Measured("eager", 0.040), Measured("regional", 0.036, compile_seconds=11.0)]
    # GPU, 2,000 steps left: model's prior (10 + 0.06 x 160 s, 0.040 / 2.5 per step) beats 2,000 x 0.036
    plan, _ = planner.next_trial(measured, ["model", "step"], CUDA, remaining_steps=2000)
    assert plan == "model"
    # ... but with 300 steps left, 19.6 s + 300 x 0.016 = 24.4 s > 300 x 0.036 = 10.8 s: model is not tried;
    # step neither
    plan, projections = planner.next_trial(measured, ["model", "step"], CUDA, remaining_steps=300)
    assert plan is None
    assert projections[0].plan == "regional"


def test_the_choice_is_the_lowest_projection_eager_included():
    measured = [Measured("eager", 1.0), Measured("regional", 1.2, 9.0), Measured("model", 0.9, 30.0)]
    choice, projections = planner.choose(measured, 100)
    assert choice == "model"  # its compile is paid: 100 x 0.9 < 100 x 1.0
    assert [p.plan for p in projections] == ["model", "eager", "regional"]
    assert planner.choose([Measured("eager", 1.0), Measured("model", None, 30.0)], 100)[0] == "eager"


def test_history_from_an_earlier_job_replaces_the_prior_and_a_warm_cache_cuts_its_compile():
    past = {"model": {"compile_seconds": 40.0, "steady_step_seconds": 0.5, "cache": "cold"}}
    cold = Workload("cpu", CPU.modules, warm_cache=False, history=past)
    warm = Workload("cpu", CPU.modules, warm_cache=True, history=past)
    assert planner.estimate("model", cold, 1.0) == planner.Estimate("model", 40.0, 0.5, "history")
    assert planner.estimate("model", warm, 1.0).compile_seconds == pytest.approx(40.0 * 0.2)
    # 197 steps: 40 + 197 x 0.5 = 138.5 > 197 x 0.55 = 108 cold; warm 8 + 98.5 = 106.5 < 108: tried
    eager = [Measured("eager", 0.55)]
    assert planner.next_trial(eager, ["model"], cold, 197)[0] is None
    assert planner.next_trial(eager, ["model"], warm, 197)[0] == "model"


# -- each plan's mechanics on CPU ---------------------------------------------------------------------
def small_bert():
    return tiny_bert(vocab_size=64, hidden_size=16, num_hidden_layers=2, max_position_embeddings=64)


def batch(length: int, seed: int = 0) -> dict:
    ids = torch.randint(1, 64, (4, length), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 1, 0, 1])}


@pytest.mark.parametrize("plan", ["regional", "model", "step"])
def test_each_plan_compiles_in_place_and_runs_compiled(plan):
    import sagemaker_tc
    from sagemaker_tc import _internals
    from sagemaker_tc.compiler.session import current_session

    model = small_bert()
    keys = list(model.state_dict())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan=plan, baseline_steps=0))
    for step in range(4):
        model(**batch(12, step)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    session = current_session()
    report = session.report()
    assert report["compiled"] is True and report["plan"] == plan and report["graphs"] >= 1  # this session's graphs
    assert list(model.state_dict()) == keys  # in place: no _orig_mod. prefix
    whole = _internals.compiled_call(model) is not None
    blocks = [m for m in model.modules() if _internals.compiled_call(m) is not None and m is not model]
    assert whole == (plan != "regional") and bool(blocks) == (plan == "regional")
    if plan == "step":  # the fused kernel where the device has one (CPU does)
        assert report["plan_decision"]["optimizer"] == "fused" and optimizer.param_groups[0]["fused"] is True
    session.close()
    assert all(_internals.compiled_call(m) is None for m in model.modules())  # closed: slots emptied
    assert optimizer.param_groups[0].get("fused") in (None, False)  # the optimizer as built


def test_a_plan_whose_compile_fails_falls_back_to_eager(tmp_path, monkeypatch):
    import torch._inductor.config as inductor_config

    import sagemaker_tc
    from sagemaker_tc.compiler.session import current_session

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # nothing compiled to reuse
    with inductor_config.patch({"cpp.cxx": (None, str(tmp_path / "no-such-compiler" / "c++"))}):
        # A shape no other test compiles: Inductor must build new kernels (kept in memory otherwise).
        model = tiny_bert(vocab_size=64, hidden_size=24, num_hidden_layers=2, max_position_embeddings=64)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="model", baseline_steps=0))
        with pytest.warns(UserWarning, match="plan model failed .*training continues with regional"):
            model(**batch(12)).loss.backward()
        optimizer.step()
        with pytest.warns(UserWarning, match="plan regional failed .*training continues with eager"):
            model(**batch(12)).loss.backward()  # the next safer plan fails the same way
        model(**batch(12)).loss.backward()  # later steps run eagerly
        report = current_session().report()
    assert report["compiled"] is False and report["plan"] == "eager"
    assert "No working C++ compiler" in report["fallback_reason"]
    failures = report["plan_decision"]["failures"]
    assert [(f["plan"], f["stepped_back_to"], f["kind"]) for f in failures] == [
        ("model", "regional", "compiler_error"),
        ("regional", "eager", "compiler_error"),
    ]


# -- the compiled optimizer -----------------------------------------------------------------------------
def _schedule_run(compiled: bool, optimizer_class=torch.optim.AdamW, **options):
    """20 steps of a warm-up (5) + linear-decay schedule; returns (learning rates applied, params,
    (graphs, recompiles) dynamo compiled, the optimizer)."""
    from transformers import get_linear_schedule_with_warmup

    from sagemaker_tc.compiler.dynamo import dynamo_mark, dynamo_stats
    from sagemaker_tc.compiler.optimizers import StepPlanOptimizer

    torch.compiler.reset()  # AdamW's step is Adam's: a run of one must not count as the other's recompile
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 4))
    optimizer = optimizer_class(model.parameters(), lr=1e-2, **options)
    scheduler = get_linear_schedule_with_warmup(optimizer, 5, 20)
    before = dynamo_mark()  # count only this run's compiles
    state = StepPlanOptimizer(optimizer)
    if compiled:
        assert state.enter(compile_update=True) == "compiled"  # asked for: the compiled update, not the fused kernel
    applied = []
    for step in range(20):
        ids = torch.randint(0, 25, (8, 3), generator=torch.Generator().manual_seed(step))  # rows 25..49: no grad
        model(ids).sum().backward()
        applied.append(float(optimizer.param_groups[0]["lr"]))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    since = dynamo_stats(since=before)
    state.restore()
    compiles = (since.graphs, since.recompiles)
    return applied, [p.detach().clone() for p in model.parameters()], compiles, optimizer


@pytest.mark.parametrize("optimizer_class", [torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD])
def test_compiled_optimizer_follows_an_lr_schedule_without_recompiling(optimizer_class):
    options = {"momentum": 0.9} if optimizer_class is torch.optim.SGD else {}
    eager_lrs, eager_params, eager_compiles, _ = _schedule_run(False, optimizer_class, **options)
    lrs, params, (graphs, recompiles), optimizer = _schedule_run(True, optimizer_class, **options)
    assert eager_compiles == (0, 0)
    assert lrs == eager_lrs  # the learning rates applied are eager's, exactly (float64 tensor, filled in place)
    assert lrs[0] == 0.0 and max(lrs) == pytest.approx(1e-2)  # warm-up from 0: no NaN (pytorch#126514)
    # Compiled at most twice over the whole schedule: once, and for SGD once more when its momentum
    # buffers appear after the first step; never per learning-rate change.
    assert 1 <= graphs <= 2 and recompiles <= 1
    for mine, reference in zip(params, eager_params, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6)
    assert isinstance(optimizer.param_groups[0]["lr"], float)  # restored as built


# -- no host sync on the step path -------------------------------------------------------------------
SYNCING = {"item", "cpu", "tolist", "numpy", "__bool__", "__int__", "__float__", "nonzero", "any", "all"}


class _SyncSpy(torch.overrides.TorchFunctionMode):
    """Records tensor methods that make the host wait for the device (``.item()``, ``.cpu()``,
    ``bool(t)``, ...) when the code calling them is sagemaker_tc's own."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in SYNCING:
            import sys

            frame = sys._getframe(1)
            while frame is not None and ("/torch/" in frame.f_code.co_filename or frame.f_code.co_filename == __file__):
                frame = frame.f_back
            if frame is not None and "/sagemaker_tc/" in frame.f_code.co_filename:
                self.calls.append(f"{name} from {frame.f_code.co_filename}:{frame.f_lineno}")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("plan", ["regional", "model", "step"])
def test_our_hooks_make_no_host_sync_on_the_step_path(plan):
    """compile_model's step watcher, the plan's guards, the shape policy's padding and the timer run
    around every step; none of them reads a tensor back. The runtime's one read per decision (the
    timer's flush) is outside the steps checked here."""
    import sagemaker_tc
    from sagemaker_tc.compiler.session import current_session

    model = small_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan=plan, baseline_steps=2))
    lengths = [12, 20, 12, 20, 12, 20, 12, 20, 12, 20]
    for step, length in enumerate(lengths[:8]):  # baseline, then the plan's trial: switches happen here
        model(**batch(length, step)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    spy = _SyncSpy()
    with spy:
        for step, length in enumerate(lengths[8:]):
            model(**batch(length, 100 + step)).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    assert spy.calls == []
    assert current_session().runtime.active == plan  # the steps checked ran the plan, padded to buckets
    assert current_session().report()["shapes"]["padded_token_share"] > 0


def test_the_cuda_timer_reads_events_without_waiting_until_flushed():
    """On CUDA the step timer records events and only queries them (non-blocking) per step; it waits
    once, in flush(). Its events go on the model's device (a rank that never called ``set_device``
    has GPU 0 current). CUDA is not on this machine: a stand-in event records how it is used."""
    from sagemaker_tc.compiler import steps

    class Event:
        made = []

        def __init__(self, device=None):
            self.done, self.waited, self.device = False, False, device
            Event.made.append(self)

        def query(self):
            return self.done

        def synchronize(self):
            self.waited = True
            self.done = True

        def elapsed_time(self, end):
            return 250.0  # ms

    model_device = torch.device("cuda", 1)  # only named: nothing runs on it
    timer = steps.StepTimer(use_cuda=True, device=lambda: model_device)
    original, steps._record_event = steps._record_event, Event
    try:
        for _ in range(3):
            timer.begin_step()
            timer.end_step(8)
        assert timer.records == [] and not any(e.waited for e in Event.made)  # nothing completed, nothing waited
        Event.made[1].done = True  # the first step's end event completed: read at the next end, without waiting
        timer.begin_step()
        timer.end_step(8)
        assert [r.seconds for r in timer.records] == [0.25] and not any(e.waited for e in Event.made)
        records = timer.flush()
    finally:
        steps._record_event = original
    assert [r.seconds for r in records] == [0.25] * 4 and all(r.samples == 8 for r in records)
    assert [e.device for e in Event.made] == [model_device] * 8


# -- the shape policy and the plan history ---------------------------------------------------------------
def test_bucket_lengths_are_learned_from_the_lengths_the_eager_steps_saw():
    from collections import Counter

    from sagemaker_tc.compiler.shapes import learned_granularity, rounded_up

    assert learned_granularity(Counter()) == 8
    assert learned_granularity(Counter({29: 1, 38: 2, 45: 1})) == 8  # spread 17 -> 5 -> 8
    assert learned_granularity(Counter({20: 3, 130: 1})) == 32  # spread 111 -> 28 -> 32
    assert [rounded_up(n, 8, 64) for n in (1, 8, 9, 60, 64, 70)] == [8, 8, 16, 64, 64, 70]  # never shortens


def test_the_shape_policy_pads_only_while_a_compiled_plan_runs():
    from sagemaker_tc.compiler.shapes import BucketStats, ShapePolicy

    stats = BucketStats()
    policy = ShapePolicy("auto", small_bert(), stats)
    eager = policy.apply(batch(12))
    assert eager["input_ids"].shape == (4, 12) and policy.seen == {12: 1}  # eager: seen, never padded
    policy.apply(batch(27))
    policy.set_padding(True)
    padded = policy.apply(batch(12))
    assert policy.granularity == 8 and padded["input_ids"].shape == (4, 16)
    assert padded["labels"].tolist() == [0, 1, 0, 1]  # per-sample labels are not a sequence: untouched
    assert (padded["attention_mask"][:, 12:] == 0).all() and (padded["input_ids"][:, 12:] == 0).all()
    summary = stats.summary()
    assert summary["batches_per_length"] == {"16": 1} and summary["padded_token_share"] == 4 / 16
    policy.set_padding(False)
    assert policy.apply(batch(12))["input_ids"].shape == (4, 12)


def test_auto_buckets_pad_to_at_most_a_fixed_number_of_lengths_over_a_job():
    """Lengths far outside those seen while eager (granularity 8 learned from 12 and 27, then calls
    up to 200 tokens) open at most MAX_LEARNED_BUCKETS static lengths; a call that would open one
    more stays unpadded and unbucketed (the dynamic graph), and a length already in use still pads."""
    from sagemaker_tc.compiler.plan_call import bucket_count
    from sagemaker_tc.compiler.shapes import MAX_LEARNED_BUCKETS, BucketStats, ShapePolicy

    policy = ShapePolicy("auto", small_bert(), BucketStats())
    policy.apply(batch(12))
    policy.apply(batch(27))
    policy.set_padding(True)
    results = [policy.bucket(batch(length)) for length in range(8, 201, 8)]  # 25 multiples of 8
    bucketed = [padded["input_ids"].shape[1] for padded, is_bucketed in results if is_bucketed]
    assert bucketed == list(range(8, 8 * MAX_LEARNED_BUCKETS + 1, 8))
    left_out, is_bucketed = policy.bucket(batch(150))
    assert left_out["input_ids"].shape == (4, 150) and is_bucketed is False
    again, is_bucketed = policy.bucket(batch(13))
    assert again["input_ids"].shape == (4, 16) and is_bucketed is True
    assert bucket_count("auto") >= MAX_LEARNED_BUCKETS  # the recompile budget makes room for them all


def test_plan_modules_is_the_one_answer_to_what_a_plan_compiles():
    from sagemaker_tc.compiler.plans import plan_modules

    model = small_bert()
    layers = list(model.bert.encoder.layer)
    assert plan_modules(model, "regional") == layers and plan_modules(model, "auto") == layers  # auto: cheapest
    assert plan_modules(model, "model") == [model] and plan_modules(model, "step") == [model]
    linear = torch.nn.Linear(2, 2)
    assert plan_modules(model, "eager") == [] and plan_modules(linear, "auto") == [linear]  # no blocks: whole


def test_the_shape_policy_pads_a_dataloaders_batches_on_the_host():
    """backend="xla" pads a Trainer's batches in the collate function, by the same rule as at the call."""
    from sagemaker_tc.compiler.shapes import BucketStats, ShapePolicy

    stats = BucketStats()
    policy = ShapePolicy([16, 32], small_bert(), stats)
    collate = policy.wrap_collate(lambda samples: batch(samples[0]))
    assert collate([12])["input_ids"].shape == (4, 12) and policy.seen == {12: 1}  # eager: never padded
    policy.set_padding(True)
    assert collate([20])["input_ids"].shape == (4, 32)
    assert policy.wrap_collate(lambda samples: tuple(samples))([1, 2]) == (1, 2)  # not a mapping: as it came
    assert stats.summary()["batches_per_length"] == {"32": 1} and stats.summary()["policy"] == "fixed"


def test_a_bucketing_collator_pads_for_the_session_and_its_policy_stands_down():
    from sagemaker_tc import BucketCollator
    from sagemaker_tc.compiler.session import CompilerSession
    from sagemaker_tc.compiler.shapes import ShapePolicy

    session = CompilerSession(TrainingCompilerConfig()).open()
    try:
        policy = ShapePolicy("auto", small_bert(), session.buckets)
        collate = BucketCollator(lambda samples: batch(samples[0]), buckets=[16, 32])
        assert collate.stats is session.buckets and session.buckets.policy == "collator"
        assert collate([12])["input_ids"].shape == (4, 12)  # the session runs eager: no padding
        policy.set_padding(True)
        assert policy.padding is False and policy.apply(batch(12))["input_ids"].shape == (4, 12)
        assert session.buckets.summary()["unbucketed_batches"] == 1
    finally:
        session.close()


def test_plan_history_round_trips_and_merges_per_workload(tmp_path):
    from sagemaker_tc.compiler import history

    key = history.WorkloadKey("BertForSequenceClassification", 22_700_000, "cpu", 1, 32)
    other = history.WorkloadKey("BertForSequenceClassification", 22_700_000, "cpu", 1, 64)
    assert history.read(tmp_path, key) == {}
    history.write(tmp_path, key, {"chosen": "eager", "plans": {"regional": {"compile_seconds": 18.0}}})
    history.write(tmp_path, key, {"chosen": "model", "plans": {"model": {"compile_seconds": 88.0}}})
    entry = history.read(tmp_path, key)
    assert entry["chosen"] == "model" and set(entry["plans"]) == {"regional", "model"}  # earlier plans kept
    assert history.read(tmp_path, other) == {}
    (tmp_path / history.FILENAME).write_text("not json")
    assert history.read(tmp_path, key) == {}  # a damaged file is ignored, never an error


def test_a_warm_cache_does_not_cut_the_compile_of_a_plan_no_job_compiled():
    """The demo's repeated job: its cache is warm (it holds the first job's measurements), but no job
    compiled a plan, so each plan still costs a cold compile, and eager is kept again."""
    warm = Workload("cpu", CPU.modules, warm_cache=True, history={})
    assert planner.estimate("regional", warm, 1.0).compile_seconds == pytest.approx(6.0 + 0.9 * 13)
    assert planner.next_trial([Measured("eager", 1.58)], planner.COMPILED_PLANS, warm, 195)[0] is None
