"""Whether evaluation runs compiled: eager under every compiled plan, unless compiling it pays.

An evaluation call is a call of an attached model in eval mode (``Trainer.evaluate``, a validation
loop). Each distinct evaluation shape compiles graphs of its own (evaluation batches are not
bucketed, and eval mode is another guard), so under a compiled plan evaluation starts eager, and
switches to the plan's compiled (dynamic) variant only when the projection says that pays
(:func:`decide`, made by the runtime at the end of each evaluation run while evaluation is eager):

    saving = remaining evaluation calls x eager call seconds x (1 - 1 / training speedup)
    cost   = evaluation graphs to compile x seconds per compile
    compiled when saving > cost; eager otherwise, and whenever an input is unknown.

- remaining evaluation calls: the calls of the last finished evaluation run x the runs still
  expected (the integration says how many: a ``Trainer``'s ``eval_strategy``, ``eval_steps`` and
  ``max_steps``; a plain loop never says, so it evaluates eager);
- eager call seconds: the median of the eager evaluation calls after the first (the step timer's
  rule, :func:`~.steps.steady_median`), timed as training steps are (:class:`~.steps.StepTimer`:
  CUDA events read at the run's end, never a host sync per call);
- training speedup: the plan's steady training step against the eager baseline's, both measured in
  this job (:class:`~.schedule.Schedule`); unknown without an eager baseline (``baseline_steps=0``);
- evaluation graphs: what dynamo compiles for the distinct evaluation input shapes seen
  (:func:`expected_graphs`);
- seconds per compile: the plan's training trial, its compile seconds over its compiling steps
  (forward and backward: more than a forward-only evaluation graph costs, so the rule leans eager).

Once compiled, evaluation stays compiled for that plan (its compile is paid); a compiled evaluation
call that fails sends evaluation back to eager (:attr:`EvaluationCalls.eager_plans`). The report's
``plan_decision.evaluation`` has the choice, the reason and the figures it was made from. Each rank
decides for itself, with no collective (a plain loop may evaluate on one rank only); an evaluation
call runs no collective either way, so ranks that decide differently still agree on every result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sagemaker_tc.compiler.steps import StepTimer, steady_median

logger = logging.getLogger("sagemaker_tc.compiler")

EAGER, COMPILED = "eager", "compiled"


@dataclass(frozen=True)
class EvalInputs:
    """What the evaluation decision is made from (None: not known).

    Attributes:
        plan: the compiled plan training runs.
        remaining_calls: evaluation calls still expected in the job.
        eager_call_seconds: an eager evaluation call's median time, seconds.
        training_speedup: the plan's training speedup over eager (eager step / plan step).
        graphs: graphs dynamo would compile for the evaluation shapes (:func:`expected_graphs`).
        seconds_per_compile: seconds one compile of the plan took in this job's training trial.
    """

    plan: str
    remaining_calls: int | None
    eager_call_seconds: float | None
    training_speedup: float | None
    graphs: int | None
    seconds_per_compile: float | None


def decide(inputs: EvalInputs) -> dict[str, Any]:
    """The evaluation choice for ``inputs`` by the module docstring's rule (pure).

    Returns:
        ``{"runs": "eager" | "compiled", "reason", "saving_seconds", "cost_seconds"}`` and every
        field of ``inputs``; the saving and cost are seconds over the rest of the job (None when an
        input they need is unknown).
    """
    fields = asdict(inputs)
    unknown = [name for name, value in fields.items() if value is None]
    if unknown:
        reason = f"eager: {', '.join(unknown)} not known, so compiling evaluation cannot be shown to pay"
        return {"runs": EAGER, "reason": reason, "saving_seconds": None, "cost_seconds": None, **fields}
    gain = 1.0 - 1.0 / inputs.training_speedup if inputs.training_speedup > 0 else 0.0
    saving = max(0, inputs.remaining_calls) * inputs.eager_call_seconds * gain
    cost = inputs.graphs * inputs.seconds_per_compile
    pays = saving > cost
    verdict = "compiled: it pays" if pays else "eager: compiling does not pay"
    reason = (
        f"{verdict} ({inputs.remaining_calls} calls left x {inputs.eager_call_seconds:.4g} s x "
        f"(1 - 1/{inputs.training_speedup:.3g}) = {saving:.3g} s saved "
        f"{'>' if pays else '<='} {inputs.graphs} graphs x {inputs.seconds_per_compile:.3g} s = {cost:.3g} s)"
    )
    runs = COMPILED if pays else EAGER
    return {"runs": runs, "reason": reason, "saving_seconds": saving, "cost_seconds": cost, **fields}


def expected_graphs(shapes: set[tuple], dynamic: bool | None) -> int:
    """Graphs dynamo compiles for calls with these distinct input ``shapes``
    (:func:`~.calls.shape_signature`): one per shape with ``dynamic=False``; one with ``dynamic=True``;
    with automatic dynamic shapes (None), one for the first shape and one more for each dimension
    that took another size (dynamo recompiles once and keeps it dynamic; dimensions of several
    tensors that always change together, a batch's length in its ids and its mask, count once), at
    most one per shape. 0 without shapes."""
    if not shapes:
        return 0
    if dynamic is False:
        return len(shapes)
    if dynamic is True:
        return 1
    ordered = sorted(shapes)
    sizes: dict[tuple[str, int], list[int | None]] = {}
    for index, signature in enumerate(ordered):
        for name, shape in signature:
            for dim, size in enumerate(shape):
                sizes.setdefault((name, dim), [None] * len(ordered))[index] = size
    varying = {tuple(seen) for seen in sizes.values() if len(set(seen)) > 1}
    return min(len(shapes), 1 + len(varying))


class EvaluationCalls:
    """One runtime's evaluation calls: timed while eager, counted per evaluation run, their shapes,
    and the current choice (module docstring).

    Args:
        device: returns the ``torch.device`` the model runs on (where the timing events go).
    """

    def __init__(self, device: Callable[[], Any] | None = None) -> None:
        self.timer = StepTimer(label=lambda: EAGER, device=device)
        self.expected_runs: int | None = None  # evaluation runs the whole job makes (None: unknown)
        self.expected_source = "unknown"
        self.runs = 0  # evaluation runs finished
        self.calls = 0  # evaluation calls in all
        self.calls_in_run = 0
        self.last_run_calls = 0
        self.shapes: set[tuple] = set()
        self.compiled_plan: str | None = None  # the plan evaluation runs compiled under (None: eager)
        self.choice: dict[str, Any] = {"runs": EAGER, "reason": "eager: no evaluation run finished yet"}
        self._depth = 0
        self._timed = False
        self.eager_plans: set[str] = set()  # plans whose evaluation calls failed compiled: evaluation runs eager
        self.active: Callable[[], str] = lambda: EAGER  # the plan training runs (follow)
        self.measured: Callable[[], dict[str, Any]] = dict
        self.dynamic: Callable[[], bool | None] = lambda: None

    def follow(
        self, active: Callable[[], str], measured: Callable[[], dict[str, Any]], dynamic: Callable[[], bool | None]
    ) -> None:
        """Read the plan training runs, the schedule's measurements per plan and the config's
        ``dynamic`` from these (an Inductor runtime's), for :meth:`compiled_now` and :meth:`end_run_now`."""
        self.active, self.measured, self.dynamic = active, measured, dynamic

    def compiled_now(self) -> bool:
        """Evaluation calls run the active plan's compiled variant (:meth:`runs_compiled`)."""
        return self.runs_compiled(self.active())

    def end_run_now(self) -> None:
        """An evaluation run ended (the first training call after evaluation calls, or the
        ``Trainer``'s ``on_evaluate``): decide again whether compiling it pays under the active plan
        (:meth:`end_run_under`, from :meth:`inputs_under`)."""
        self.end_run_under(self.active(), self.inputs_under)

    def inputs_under(self, plan: str) -> EvalInputs:
        """What the evaluation decision under ``plan`` is made from, as measured in this job so far."""
        return self.inputs_for(plan, self.measured(), self.dynamic())

    def set_expected_runs(self, runs: int | None, source: str) -> None:
        """The evaluation runs the job makes in all (``source`` names where that comes from)."""
        if runs is not None and runs >= 0:
            self.expected_runs, self.expected_source = int(runs), source

    def begin_call(self, signature: tuple, *, timed: bool) -> None:
        """An evaluation call begins (``signature``: its input shapes); ``timed``: it runs eager."""
        self._depth += 1
        if self._depth > 1:
            return  # a nested call of an attached model: part of the outer one
        self.calls += 1
        self.calls_in_run += 1
        self.shapes.add(signature)
        self._timed = timed
        if timed:
            self.timer.begin_step()

    def end_call(self) -> None:
        """The evaluation call begun last ended (its forward returned or raised)."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and self._timed:
            self.timer.end_step(1)
            self._timed = False

    def end_run(self) -> bool:
        """An evaluation run ended (a training call came, or the ``Trainer`` said so). Returns False
        when no evaluation call ran since the last end."""
        if self.calls_in_run == 0:
            return False
        self.runs += 1
        self.last_run_calls, self.calls_in_run = self.calls_in_run, 0
        self._depth = 0
        return True

    def remaining_calls(self) -> int | None:
        """Evaluation calls still expected: the last run's calls x the runs left (None: unknown)."""
        if self.expected_runs is None or self.runs == 0:
            return None
        return self.last_run_calls * max(0, self.expected_runs - self.runs)

    def eager_call_seconds(self) -> float | None:
        """Median eager evaluation call after the first, seconds (waits for calls still on the GPU:
        once per decision, at a run's end)."""
        return steady_median(self.timer.flush())

    def report(self, compiled_failed: bool) -> dict[str, Any]:
        """The report's ``plan_decision.evaluation``: the choice with its figures, the runs and calls
        seen, and the expected runs (``compiled_failed``: compiled evaluation failed, it runs eager)."""
        choice = dict(self.choice)
        if compiled_failed and choice.get("runs") == COMPILED:
            choice.update(runs=EAGER, reason=f"eager: a compiled evaluation call failed (was {choice['reason']})")
        return {
            **choice,
            "evaluation_runs": self.runs,
            "evaluation_calls": self.calls,
            "expected_runs": self.expected_runs,
            "expected_runs_source": self.expected_source,
        }

    def runs_compiled(self, plan: str) -> bool:
        """Evaluation calls run ``plan``'s compiled variant: compiling them was shown to pay under it
        (:meth:`end_run_under`) and no compiled evaluation call of it failed."""
        return self.compiled_plan == plan and plan not in self.eager_plans

    def end_run_under(self, plan: str, inputs: Callable[[str], EvalInputs]) -> None:
        """An evaluation run ended while ``plan`` runs: while evaluation runs eager under a compiled
        plan, decide again whether compiling it pays (:func:`decide` on ``inputs(plan)``) and switch
        when it does."""
        if not self.end_run() or self.runs_compiled(plan):
            return
        if plan == EAGER:
            self.choice = {"runs": EAGER, "reason": "eager: training runs no compiled plan"}
            return
        choice = decide(inputs(plan))
        self.choice = choice
        if choice["runs"] == COMPILED:
            self.compiled_plan = plan
            logger.info("COMPILE PLAN: evaluation runs %s from now on, %s", plan, choice["reason"])
        else:
            logger.info("Compiler: evaluation stays eager under %s: %s", plan, choice["reason"])

    def compiled_call_failed(self, plan: str, reason: str) -> None:
        """A compiled evaluation call of ``plan`` failed while the same call ran eagerly (``reason``:
        the error's summary): evaluation runs eager under ``plan`` from now on, training keeps it."""
        if plan not in self.eager_plans:
            self.eager_plans.add(plan)
            logger.warning(
                "COMPILE PLAN: %s failed in an evaluation call (%s); evaluation runs eager from now on, "
                "training keeps %s",
                plan,
                reason,
                plan,
            )

    def inputs_for(self, plan: str, measured: dict[str, Any], dynamic: bool | None) -> EvalInputs:
        """What the decision under ``plan`` is made from, as measured in this job so far (``measured``:
        the schedule's measurements per plan; ``dynamic``: the config's). None where not measured."""
        eager, ours = measured.get(EAGER), measured.get(plan)
        speedup = per_compile = None
        if eager is not None and ours is not None and eager.steady_step_seconds and ours.steady_step_seconds:
            speedup = eager.steady_step_seconds / ours.steady_step_seconds
        if ours is not None and ours.compiling_steps > 0:
            per_compile = ours.compile_seconds / ours.compiling_steps
        return EvalInputs(
            plan=plan,
            remaining_calls=self.remaining_calls(),
            eager_call_seconds=self.eager_call_seconds(),
            training_speedup=speedup,
            graphs=expected_graphs(self.shapes, dynamic),
            seconds_per_compile=per_compile,
        )

    def summary(self) -> dict[str, Any]:
        """The report's ``plan_decision.evaluation`` (:meth:`report`), compiled evaluation's failure read."""
        return self.report(compiled_failed=self.compiled_plan is not None and self.compiled_plan in self.eager_plans)
