"""The GPU path safe by construction, checked on the CPU: a failure injected into each compiled
callable of each plan (at compile, at the first call, at a later call, and cudagraph trees'
"overwritten" error) ends that plan and the loop trains on with the next safer plan; an
out-of-memory error is not a compiler failure; CUDA graphs only where torch supports them; nothing
unproven on a GPU in ``auto``'s CUDA candidates; the optimizer put back exactly at a plan switch.

Failures are injected through a real dynamo backend (:class:`Inject`) in the compiled callables our
runtime builds; the plans not under test compile with dynamo's ``eager`` backend (tracing without
Inductor), so each case costs seconds."""

from __future__ import annotations

import pytest
import torch
from conftest import count_block_hooks, tiny_bert

import sagemaker_tc
from sagemaker_tc import TrainingCompilerConfig
from sagemaker_tc.compiler import optimizers, plan_call, planner, runtime
from sagemaker_tc.errors import CompilerError

OVERWRITTEN = (
    "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. Stack trace: File ..."
)


class Inject:
    """A dynamo backend that fails: at compile (``when="compile"``), or at its ``n``-th call
    (``when="call"``), with ``error``; else it runs the captured graph as traced."""

    def __init__(self, when: str, n: int = 1, error: BaseException | None = None) -> None:
        self.when, self.n = when, n
        self.error = error or RuntimeError("injected compiler failure")
        self.calls = 0

    def __call__(self, graph_module, example_inputs):
        if self.when == "compile":
            raise self.error

        def run(*args):
            self.calls += 1
            if self.calls == self.n:
                raise self.error
            return graph_module.forward(*args)

        return run


def small_bert():
    return tiny_bert(vocab_size=64, hidden_size=16, num_hidden_layers=2, max_position_embeddings=64)


def batch(seed: int, length: int = 16) -> dict:
    ids = torch.randint(1, 64, (4, length), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 1, 0, 1])}


@pytest.fixture
def inject_into(monkeypatch):
    """``inject_into(target, backend)``: the compiled callables of plan ``target`` (``"regional"``,
    ``"model"``, ``"step"``; ``"optimizer"``: the step plan's compiled update) compile with
    ``backend``; every other compiled callable with dynamo's ``eager`` backend."""
    real_compile_forward = plan_call.compile_forward

    def arm(target: str, backend) -> None:
        def compile_forward(tag, budget, **kwargs):
            chosen = backend if tag.split("_")[0] == target else "eager"
            return real_compile_forward(tag, budget, **{**kwargs, "backend": chosen})

        def update(function):
            return torch.compile(function, backend=backend if target == "optimizer" else "eager")

        monkeypatch.setattr(plan_call, "compile_forward", compile_forward)
        monkeypatch.setattr(optimizers, "compile_update", update)

    return arm


def train(model, config: TrainingCompilerConfig, steps: int = 6) -> dict:
    """A plain loop of ``steps`` optimizer steps under ``config``; returns the session's report."""
    from sagemaker_tc.compiler.session import current_session

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sagemaker_tc.compile_model(model, config)
    for step in range(steps):
        model(**batch(step)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return current_session().report()


WHEN = {
    "at compile": Inject("compile"),
    "at the first call": Inject("call", n=1),
    "at the third call": Inject("call", n=3),
    "cudagraph overwritten": Inject("call", n=2, error=RuntimeError(OVERWRITTEN)),
}
CASES = [  # (plan asked for, callable the failure is injected into, the plan the job ends on)
    ("regional", "regional", "eager"),
    ("model", "model", "regional"),
    ("step", "step", "model"),  # step's own graph (CUDA graphs on a GPU) failed: model has its own
    ("step", "optimizer", "model"),
]


@pytest.mark.parametrize("when", list(WHEN))
@pytest.mark.parametrize(("plan", "target", "ends_on"), CASES)
def test_a_failure_in_any_compiled_callable_steps_back_and_training_goes_on(inject_into, plan, target, ends_on, when):
    backend = Inject(WHEN[when].when, WHEN[when].n, WHEN[when].error)
    inject_into(target, backend)
    config = TrainingCompilerConfig(plan=plan, baseline_steps=0, compile_optimizer=target == "optimizer")
    with pytest.warns(UserWarning, match=f"plan {plan} failed"):
        report = train(small_bert(), config)
    assert report["steps"] == 6  # every step ran: nothing was lost to the failure
    assert report["plan"] == ends_on
    failure = report["plan_decision"]["failures"][0]
    assert failure["plan"] == plan and failure["kind"] == "compiler_error"
    assert failure["stepped_back_to"] == ends_on
    assert ("injected compiler failure" in failure["reason"]) or ("overwritten" in failure["reason"])
    assert report["compiled"] is (ends_on != "eager")
    trial = next(t for t in report["trials"] if t["plan"] == plan)
    assert trial["steady_step_seconds"] is None and trial["invalid"].startswith("compiler_error")
    if ends_on == "eager":
        assert "training continues eager" in report["fallback_reason"]
    else:
        assert report["fallback_reason"] is None


def test_a_torch_compile_call_that_fails_at_its_first_use_steps_back_too(inject_into):
    """Plan variants are ``torch.compile``'d at their first call (``plan_call.PlanFunctions``): a
    ``torch.compile`` that raises there (here an unknown backend) sits behind the fallback like a
    failing compiled call, and training goes on."""
    inject_into("regional", "no-such-backend")
    with pytest.warns(UserWarning, match="plan regional failed"):
        report = train(small_bert(), TrainingCompilerConfig(plan="regional", baseline_steps=0))
    assert report["steps"] == 6 and report["plan"] == "eager"
    failure = report["plan_decision"]["failures"][0]
    assert failure["plan"] == "regional" and failure["kind"] == "compiler_error"
    assert "no-such-backend" in failure["reason"]


def test_under_strict_a_failure_is_a_compiler_error_naming_the_plan(inject_into):
    inject_into("model", Inject("call", n=1))
    with pytest.raises(CompilerError, match="plan 'model' failed and policy='strict'"):
        train(small_bert(), TrainingCompilerConfig(plan="model", baseline_steps=0, policy="strict"), steps=1)


@pytest.mark.parametrize("policy", ["fallback", "strict"])
def test_out_of_memory_ends_the_plan_but_is_not_a_compiler_failure(inject_into, policy):
    inject_into("model", Inject("call", n=2, error=torch.OutOfMemoryError("CUDA out of memory. Tried to allocate")))
    with pytest.warns(UserWarning, match="plan model failed"):
        report = train(small_bert(), TrainingCompilerConfig(plan="model", baseline_steps=0, policy=policy))
    failure = report["plan_decision"]["failures"][0]
    assert failure["kind"] == "out_of_memory" and failure["stepped_back_to"] == "regional"
    assert report["plan"] == "regional" and report["compiled"] is True and report["steps"] == 6


def test_auto_moves_on_after_a_failed_trial_and_never_chooses_it(inject_into, monkeypatch):
    """plan='auto' on a long job, forced to try every plan: the model trial fails at its first call,
    so model and step (the same graph) are ended; the choice is among what was measured."""
    monkeypatch.setitem(planner.PRIORS, "cpu", {p: planner.Prior(0.0, 0.0, 100.0) for p in planner.COMPILED_PLANS})
    inject_into("model", Inject("call", n=1))
    with pytest.warns(UserWarning, match="plan model failed"):
        report = train(small_bert(), TrainingCompilerConfig(expected_steps=100_000), steps=5 + 6 + 6 + 2)
    trials = {t["plan"]: t for t in report["trials"]}
    assert set(trials) == {"eager", "regional", "model"}  # step never tried: model's failure ended it
    assert trials["model"]["invalid"] and trials["model"]["steady_step_seconds"] is None
    assert report["plan_decision"]["decision"]["chosen"] in ("eager", "regional")
    assert report["plan"] == report["plan_decision"]["decision"]["chosen"]


# -- CUDA graphs and unproven techniques ---------------------------------------------------------------
def test_auto_tries_on_cuda_only_plans_a_committed_gpu_result_shows_paying():
    assert planner.auto_candidates("cpu") == ("regional", "model", "step")
    paying = tuple(p for p in planner.COMPILED_PLANS if p in planner.GPU_EVIDENCE and planner.GPU_EVIDENCE[p].pays)
    assert planner.auto_candidates("cuda") == paying
    assert "step" not in planner.auto_candidates("cuda")  # no GPU result
    fields = planner.gpu_evidence_fields("cuda")
    assert set(fields) == set(planner.COMPILED_PLANS) and fields["step"] is None
    assert planner.gpu_evidence_fields("cpu") is None


@pytest.mark.parametrize("plan", sorted(planner.GPU_EVIDENCE))
def test_gpu_evidence_is_what_its_committed_file_shows(plan):
    """Each entry's ratio is recomputed from the file's two rows of one run, which must share the
    optimizer, attention, batch and dtype (the plan against its own uncompiled configuration): the
    two rows' details give the first two, the file's one set of options the batch and dtype."""
    import json
    from pathlib import Path

    evidence = planner.GPU_EVIDENCE[plan]
    assert evidence.plan == plan
    result = json.loads((Path(__file__).resolve().parents[1] / evidence.result).read_text())
    rows = {row["variant"]: row for row in result["results"] if row["model"] == evidence.model}
    measured, baseline = rows[evidence.variant], rows[evidence.baseline]
    assert measured["status"] == baseline["status"] == "ok"
    for setting in ("optimizer", "attn_implementation"):
        assert measured["details"][setting] == baseline["details"][setting], setting
    assert result["options"]["device"] == "cuda" and result["options"]["batch_size"] and result["options"]["dtype"]
    assert evidence.speedup == pytest.approx(baseline["step_ms"] / measured["step_ms"], abs=0.005)


def test_cuda_graphs_only_where_torch_supports_them(monkeypatch):
    """On a (pretended) CUDA model: the step plan asked for explicitly gets a CUDA-graph variant, run
    only for static shapes in one process without gradient accumulation; the optimizer is the fused
    kernel, never a CUDA-graphed update; auto prepares no step plan at all."""
    monkeypatch.setattr(runtime, "device_of", lambda model: ("cuda", "pretended GPU"))
    assert planner.without_cuda_graphs("reduce-overhead") is None
    assert planner.without_cuda_graphs("max-autotune") == "max-autotune-no-cudagraphs"

    model = small_bert()
    explicit = runtime.CompilerRuntime()
    explicit.attach(model, TrainingCompilerConfig(plan="step", baseline_steps=0))
    assert set(explicit.models.functions["step"].variants) == {"dynamic", "static", "captured"}
    explicit.shapes.set_padding(True)  # bucketed training batches
    explicit.calls.before_call(model, (), batch(0, length=12))  # a training call, padded to its bucket
    assert explicit.calls.variant(model) == "static"  # accumulation not known yet (a plain loop's first step)
    explicit.set_accumulation(1)
    assert explicit.calls.variant(model) == "captured"
    explicit.set_accumulation(2)  # gradient accumulation
    assert explicit.calls.variant(model) == "static"
    explicit.set_accumulation(1)
    model.eval()
    assert explicit.calls.variant(model) == "eager"  # evaluation: eager until compiling it pays
    explicit.evaluation.compiled_plan = "step"  # as a paying evaluation decision sets it
    assert explicit.calls.variant(model) == "dynamic"  # never captured, never static
    model.train()
    explicit.shapes.set_padding(False)  # changing shapes
    explicit.calls.before_call(model, (), batch(0, length=12))
    assert explicit.calls.variant(model) == "dynamic"
    explicit.shapes.set_padding(True)
    explicit.calls.before_call(model, (), {"input_ids": batch(0)["input_ids"]})  # no mask: never padded
    assert explicit.calls.variant(model) == "dynamic"
    optimizer = torch.optim.AdamW(model.parameters())
    explicit.track_optimizer(optimizer)
    assert explicit.optimizer_kind == "fused" and optimizer.param_groups[0]["fused"] is True
    explicit.detach()

    auto = runtime.CompilerRuntime()
    auto.attach(small_bert(), TrainingCompilerConfig())
    assert auto.prepared_plans() == ["model"] and "captured" not in auto.models.functions["model"].variants
    auto.detach()


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_a_capturing_mode_applies_to_the_named_plan_only(mode, monkeypatch):
    """``mode="reduce-overhead"``/``"max-autotune"`` captures the plan the user named; ``auto``'s
    trials and the plans a failed one steps back to compile the same kernels without CUDA graphs."""
    monkeypatch.setattr(runtime, "device_of", lambda model: ("cuda", "pretended GPU"))
    auto = runtime.CompilerRuntime()
    auto.attach(small_bert(), TrainingCompilerConfig(mode=mode))
    assert not any("captured" in auto.models.functions[plan].variants for plan in auto.prepared_plans())
    auto.detach()

    named = runtime.CompilerRuntime()
    named.attach(small_bert(), TrainingCompilerConfig(plan="model", mode=mode, baseline_steps=0))
    named.models.prepare("regional", named.config)  # where a failure of model steps back to
    functions = named.models.functions
    assert "captured" in functions["model"].variants and "captured" not in functions["regional"].variants
    named.detach()


def test_a_plan_is_torch_compiled_only_when_a_call_first_runs_it():
    """Plans held ready cost no ``torch.compile`` call (issue 23: staying eager costs nothing): under
    ``auto`` nothing is compiled while the job runs eagerly, and a plan that runs compiles just the
    variant its calls use."""
    model = small_bert()
    auto = runtime.CompilerRuntime()
    auto.attach(model, TrainingCompilerConfig(baseline_steps=3))
    assert auto.active == "eager" and auto.prepared_plans() == ["regional", "model", "step"]
    model(**batch(0)).loss.backward()
    assert {plan: functions.compiled_variants for plan, functions in auto.models.functions.items()} == {
        "regional": [],
        "model": [],
        "step": [],
    }
    auto.detach()

    model = small_bert()
    explicit = runtime.CompilerRuntime()
    explicit.attach(model, TrainingCompilerConfig(plan="regional", baseline_steps=0))
    assert explicit.active == "regional" and explicit.models.functions["regional"].compiled_variants == []
    model(**batch(1)).loss.backward()
    functions = explicit.models.functions
    assert functions["regional"].compiled_variants == ["static"]  # bucketed training shapes, no CUDA graphs
    assert set(functions) == {"regional"}
    explicit.detach()


# -- the optimizer put back exactly --------------------------------------------------------------------
def _optimizer_facts(optimizer) -> tuple:
    groups = [
        {k: (float(v) if isinstance(v, torch.Tensor) else v) for k, v in g.items() if k != "params"}
        for g in optimizer.param_groups
    ]
    state = [
        (name, value.device, value.dtype, value.clone())
        for per_param in optimizer.state.values()
        for name, value in sorted(per_param.items())
        if isinstance(value, torch.Tensor)
    ]
    return type(optimizer).__name__, groups, state, "step" in vars(optimizer)


@pytest.mark.parametrize("compile_update", [False, True])
def test_a_plan_switch_puts_the_optimizer_back_exactly(compile_update, monkeypatch):
    monkeypatch.setattr(optimizers, "compile_update", lambda function: torch.compile(function, backend="eager"))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    model(torch.ones(4, 8)).sum().backward()
    optimizer.step()  # state exists before the plan
    before = _optimizer_facts(optimizer)
    state = optimizers.StepPlanOptimizer(optimizer)
    assert state.enter(compile_update=compile_update) == ("compiled" if compile_update else "fused")
    state.restore()
    after = _optimizer_facts(optimizer)
    assert after[0] == before[0] and after[1] == before[1] and after[3] == before[3]
    for (name, device, dtype, value), (name0, device0, dtype0, value0) in zip(after[2], before[2], strict=True):
        assert (name, device, dtype) == (name0, device0, dtype0)
        torch.testing.assert_close(value, value0, rtol=0, atol=0)


def test_a_plan_switch_keeps_the_learning_rate_the_scheduler_set():
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    state = optimizers.StepPlanOptimizer(optimizer)
    state.enter()
    for _ in range(3):
        model(torch.ones(2, 8)).sum().backward()
        optimizer.step()
        scheduler.step()
    state.restore()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 / 4)  # not rolled back to 1e-2


# -- each plan its own recompile budget ----------------------------------------------------------------
def tiny_gpt2(layers: int = 4):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=layers, n_embd=16, n_head=2, vocab_size=64, n_positions=64, bos_token_id=0, eos_token_id=0,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=True,
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def gpt2_loop(model, config: TrainingCompilerConfig, steps: int) -> dict:
    """A plain loop with ``use_cache=True`` in every training forward (one graph per layer under
    ``regional``: each layer's ``layer_idx`` is guarded as a constant)."""
    from sagemaker_tc.compiler.session import current_session

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sagemaker_tc.compile_model(model, config)
    for step in range(steps):
        ids = torch.randint(1, 64, (2, 16), generator=torch.Generator().manual_seed(step))
        model(input_ids=ids, labels=ids, use_cache=True).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return current_session().report()


@pytest.fixture
def small_default_recompile_limit():
    """Dynamo's global recompile limit at 2 (the default 8 scaled down with the model: 4 layers)."""
    from sagemaker_tc import _internals

    before = _internals.recompile_limit()
    _internals.set_recompile_limit(2)
    yield
    _internals.set_recompile_limit(before)


ALL_PLANS_TRIED = 5 + 6 * 3 + 2  # eager steps, a trial of each plan, then the choice


def test_auto_trials_each_run_compiled_within_their_own_budget(inject_into, monkeypatch, small_default_recompile_limit):
    """GPT-2 with use_cache under plan='auto', forced to try every plan: regional's 4 layer graphs
    exceed dynamo's global limit (2 here), yet no trial hit a limit: each plan compiles within a
    budget of its own, so no trial ran eager while counted as compiled. (Dynamo's budgets are the
    subject: every plan compiles with dynamo's eager backend.)"""
    inject_into("none", None)
    monkeypatch.setitem(planner.PRIORS, "cpu", {p: planner.Prior(0.0, 0.0, 1e9) for p in planner.COMPILED_PLANS})
    report = gpt2_loop(tiny_gpt2(), TrainingCompilerConfig(expected_steps=100_000, buckets=None), ALL_PLANS_TRIED)
    trials = {t["plan"]: t for t in report["trials"]}
    assert set(trials) == {"eager", "regional", "model", "step"}
    assert all(t["invalid"] is None and t["steady_step_seconds"] is not None for t in trials.values())
    assert report["recompile_limit_hit"] is False and report["recompile_limit_messages"] == []
    assert report["graphs"] >= 4 + 1  # a graph per layer (regional), the whole model (model, step)
    assert report["plan_decision"]["recompile_budgets"]["regional"] > 2


def test_a_trial_that_hits_its_limit_anyway_is_invalid_and_never_chosen(
    inject_into, monkeypatch, small_default_recompile_limit
):
    inject_into("none", None)
    # an untried plan always looks worth trying, whatever the loaded machine's step times (100x let
    # a noisy eager step keep `step` untried once)
    monkeypatch.setitem(planner.PRIORS, "cpu", {p: planner.Prior(0.0, 0.0, 1e9) for p in planner.COMPILED_PLANS})
    monkeypatch.setattr(plan_call, "plan_recompile_budget", lambda regions, buckets: 1 if regions > 1 else 8)
    report = gpt2_loop(tiny_gpt2(), TrainingCompilerConfig(expected_steps=100_000, buckets=None), ALL_PLANS_TRIED)
    trials = {t["plan"]: t for t in report["trials"]}
    assert trials["regional"]["invalid"].startswith("recompile limit hit")
    assert trials["regional"]["steady_step_seconds"] is None  # not timed
    assert trials["model"]["invalid"] is None and trials["step"]["invalid"] is None
    assert report["plan_decision"]["decision"]["chosen"] != "regional"
    assert report["recompile_limit_hit"] is True


# -- fp16: the scheduler and skipped steps ---------------------------------------------------------------
def _fp16_run(step_plan: bool) -> tuple[list[float], list[bool], str | None]:
    """8 steps of accelerate's mixed-precision optimizer path (``AcceleratedOptimizer`` with a real
    ``GradScaler``, which re-patches ``optimizer.step`` on every step to learn whether the scaler
    skipped it; Trainer steps its scheduler only when it did not), an infinite loss at step 4.
    accelerate runs fp16 only on GPUs, so the scaler is given to it by hand, on the CPU. Returns the
    learning rate after each step, whether each step was skipped, and the step plan's update."""
    from accelerate import Accelerator
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    accelerator = Accelerator(cpu=True)
    accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-2))
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, 8)
    compiler = runtime.CompilerRuntime()
    if step_plan:
        compiler.attach(model, TrainingCompilerConfig(plan="step", baseline_steps=0))
    lrs, skipped = [], []
    for step in range(8):
        loss = model(torch.ones(4, 8) * (step + 1)).pow(2).mean()
        accelerator.backward(loss * float("inf") if step == 4 else loss)
        optimizer.step()
        if not accelerator.optimizer_step_was_skipped:
            scheduler.step()
        optimizer.zero_grad()
        compiler.track_optimizer(optimizer)  # as the Trainer integration does at each step's end
        lrs.append(scheduler.get_last_lr()[0])
        skipped.append(accelerator.optimizer_step_was_skipped)
    kind = compiler.optimizer_kind
    compiler.detach()
    return lrs, skipped, kind


def test_fp16_keeps_its_scheduler_and_its_skipped_steps_under_the_step_plan(inject_into):
    inject_into("none", None)
    eager_lrs, eager_skipped, _ = _fp16_run(step_plan=False)
    lrs, skipped, kind = _fp16_run(step_plan=True)
    assert kind == "fused"  # the step plan switched accelerate's inner optimizer to its fused kernel
    assert skipped[4] is True and skipped.count(True) == eager_skipped.count(True)  # the overflow was skipped
    assert skipped == eager_skipped and lrs == eager_lrs  # the scheduler held exactly where eager's did
    assert lrs[4] == lrs[3] and lrs[5] < lrs[4]


def test_the_update_guard_holds_when_a_wrapper_passes_closure_none(monkeypatch):
    """accelerate's AcceleratedOptimizer.step calls ``optimizer.step(closure)`` with ``None``: the
    guard still catches a failing compiled update there."""
    monkeypatch.setattr(
        optimizers, "compile_update", lambda function: torch.compile(function, backend=Inject("call", n=1))
    )
    failures = []
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    state = optimizers.StepPlanOptimizer(optimizer, on_failure=lambda plan, error: failures.append(plan))
    assert state.enter(compile_update=True) == "compiled"
    model(torch.ones(2, 4)).sum().backward()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.step(None)
    assert failures == ["step"] and state.kind == "as built"  # failed over to the update as built ...
    assert any(not torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))  # ... which ran


# -- smaller items of issue 32 (point 10) ----------------------------------------------------------------
def test_a_recompile_limit_hit_by_the_scripts_own_function_leaves_the_trial_valid(inject_into):
    """The script compiles a function of its own (static shapes, dynamo's default limit of 8) and
    calls it with 9 shapes while the regional trial runs: that limit hit is the script's, not the
    plan's, and the trial stays valid."""
    from sagemaker_tc.compiler.session import current_session

    inject_into("none", None)
    own = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    model = small_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="regional", baseline_steps=0))
    for step in range(2):
        model(**batch(step)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step == 0:
            for rows in range(1, 10):  # 9 shapes, past the limit of 8
                own(torch.ones(rows))
    report = current_session().report()
    assert report["recompile_limit_hit"] is True  # it was hit, and the report says so
    assert [t["invalid"] for t in report["trials"] if t["plan"] == "regional"] == [None]


def test_an_evaluation_only_failure_keeps_the_plan_for_training(inject_into):
    """A compiled evaluation call fails (its first compiled call: the regional block in eval mode),
    the same call runs eagerly: evaluation runs eager from then on, training keeps regional."""
    from sagemaker_tc.compiler.session import current_session

    backend = Inject("call", n=1)
    inject_into("regional", backend)
    model = small_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sagemaker_tc.compile_model(model, TrainingCompilerConfig(plan="regional", baseline_steps=0))
    current_session().runtime.evaluation.compiled_plan = "regional"  # as a paying evaluation decision sets it
    model.eval()
    with torch.no_grad():
        evaluated = model(**batch(0)).logits
    model.train()
    for step in range(3):
        model(**batch(step)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        model(**batch(0))
    report = current_session().report()
    assert evaluated.shape == (4, 2) and report["plan_decision"]["failures"] == []
    assert report["plan"] == "regional" and current_session().runtime.eval_eager == {"regional"}


def test_the_eager_rerun_of_a_failed_compiled_call_runs_each_hook_once(inject_into):
    """A compiled block call that fails is rerun eagerly inside the same module call: its
    pre-hooks and hooks run once per forward, not again for the rerun."""
    inject_into("regional", Inject("call", n=2))  # the second compiled block call fails
    model = small_bert()
    counts = count_block_hooks(model)
    with pytest.warns(UserWarning, match="plan regional failed"):
        report = train(model, TrainingCompilerConfig(plan="regional", baseline_steps=0), steps=2)
    assert report["plan_decision"]["failures"][0]["plan"] == "regional"
    assert counts == {(kind, index): 2 for kind in ("pre", "post") for index in range(2)}


def test_a_plan_that_hits_its_recompile_limit_ends_instead_of_running_eager_under_its_name(inject_into, monkeypatch):
    """Past its budget a block would check every cached graph on each call and then run uncompiled,
    reported as regional: the limit hit ends the plan (kind ``recompile_limit``) and the job steps back."""
    from sagemaker_tc.compiler.session import current_session

    inject_into("none", None)
    monkeypatch.setattr(plan_call, "plan_recompile_budget", lambda regions, buckets: 1)
    model = small_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    config = TrainingCompilerConfig(plan="regional", baseline_steps=0, buckets=None, dynamic=False)
    sagemaker_tc.compile_model(model, config)
    with pytest.warns(UserWarning, match="plan regional failed"):
        for step in range(3):
            model(**batch(step, length=8 + 4 * step)).loss.backward()  # a new length each step
            optimizer.step()
            optimizer.zero_grad()
    report = current_session().report()
    (failure,) = report["plan_decision"]["failures"]
    assert failure["plan"] == "regional" and failure["kind"] == "recompile_limit"
    assert report["plan"] == "eager" and report["recompile_limit_hit"] is True
