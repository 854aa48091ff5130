"""``plan="auto"``: which compile plan a job keeps, decided by projecting the job's remaining time.

Pure (no torch): the runtime hands in what it measured and what it knows about the job; this module
says which plan to try next and which to keep. The rule (issue "compile plans chosen by
measurement"): keep the option with the lowest projected time for the rest of the job,

    projected seconds = compile seconds still to pay + remaining steps x steady step seconds,

eager included (it compiles nothing). A plan already tried has paid its compile: it projects at its
measured steady step. A plan not tried yet projects at its *estimate*: the compile seconds it would
cost (measured in an earlier job with the same workload, from the compile cache's history, else a
prior for the device) and its best plausible step (measured earlier, else the eager step divided by
the device's largest speedup seen for that plan). Plans are tried cheapest compile first, and one is
tried only while its estimate beats the best projection known: a costlier compile that cannot pay
off in the steps left is never paid for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

EAGER = "eager"
COMPILED_PLANS: tuple[str, ...] = ("regional", "model", "step")
"""Compile plans in the order ``auto`` tries them: cheapest compile first."""


@dataclass(frozen=True)
class GpuEvidence:
    """A committed GPU result for one compile plan: the plan's step time against its own uncompiled
    configuration (the same optimizer, attention, batch and dtype), both rows of one run.

    Attributes:
        plan: the compile plan it backs.
        result: the result file under ``benchmarks/results/`` (a ``sagemaker-tc bench`` run).
        model: the row's model.
        variant: the row that measured the plan's graphs: ``sagemaker-tc`` ran the plan itself;
            ``hf-torch-compile`` (the peer) stands for ``model``, which compiles the same graphs
            (``tests/test_peer_equivalence.py`` shows it for every tested architecture).
        baseline: the uncompiled row with the same settings (``eager-tuned``: fused AdamW, SDPA).
        speedup: baseline step ms / variant step ms, as the file has them (the test recomputes it).
    """

    plan: str
    result: str
    model: str
    variant: str
    baseline: str
    speedup: float

    @property
    def pays(self) -> bool:
        """True when the plan's steady step beat its own uncompiled configuration's."""
        return self.speedup > 1.0

    def describe(self) -> str:
        """One line for the report and the log: the ratio and where it comes from."""
        return f"{self.speedup:.2f}x {self.baseline} ({self.model}, {self.variant} row of {self.result})"


_H200_COLD = "benchmarks/results/gpu-check-h200_202611-cold.json"

_H200_DEC = "benchmarks/results/gpu-check-h200_202612-plans.json"

GPU_EVIDENCE: dict[str, GpuEvidence] = {
    # The median model of its run (the run's other rows: benchmarks/README.md).
    "model": GpuEvidence("model", _H200_DEC, "roberta-base", "hf-torch-compile", "eager-tuned", 1.18),
    # Slower than not compiling (benchmarks/README.md).
    "regional": GpuEvidence("regional", _H200_COLD, "bert-base-uncased", "sagemaker-tc", "eager-tuned", 0.95),
}
"""What committed GPU results (``benchmarks/gpu_check.sh`` under ``benchmarks/results/``) show of each
compile plan on CUDA. ``plan="auto"`` tries on CUDA only the plans whose entry :attr:`GpuEvidence.pays`:
a plan or technique no GPU run has measured (``step``, CUDA graphs, the compiled optimizer), or one
measured slower than its own uncompiled configuration, stays available through an explicit ``plan=``
or config field, never by default. Change an entry only with the result file that backs it."""

ASSUMED_JOB_STEPS = 1000
"""Optimizer steps assumed for a plain loop that gives no ``expected_steps`` (the report says so)."""

WARM_CACHE_COMPILE_FACTOR = 0.2
"""A compile from a warm cache costs this share of the cold compile: above what the cache benchmark
measured, leaving room for the parts a cache does not skip (dynamo tracing, guards). The
measurement: benchmarks/README.md."""


def auto_candidates(device: str) -> tuple[str, ...]:
    """The compile plans ``plan="auto"`` may try on ``device``, cheapest compile first: every plan on
    the CPU (where this project measures them), on CUDA only those a :data:`GPU_EVIDENCE` entry shows
    paying against their own uncompiled configuration."""
    if device != "cuda":
        return COMPILED_PLANS
    return tuple(plan for plan in COMPILED_PLANS if plan in GPU_EVIDENCE and GPU_EVIDENCE[plan].pays)


def gpu_evidence_fields(device: str) -> dict[str, str | None] | None:
    """The report's ``plan_decision.gpu_evidence`` on CUDA: each compile plan -> what backs it on a
    GPU (:meth:`GpuEvidence.describe`), or None where no GPU result does. None on other devices."""
    if device != "cuda":
        return None
    return {plan: GPU_EVIDENCE[plan].describe() if plan in GPU_EVIDENCE else None for plan in COMPILED_PLANS}


def whole_step_under_auto(device: str) -> bool:
    """True when ``plan="auto"`` may record the whole step as CUDA graphs on ``device`` when it tries
    ``step``: on CUDA, once a :data:`GPU_EVIDENCE` entry for ``step`` measured from a captured run
    pays against its own uncompiled configuration. Without one (today) only a job that names
    ``plan="step"`` records it."""
    evidence = GPU_EVIDENCE.get("step")
    return device == "cuda" and evidence is not None and evidence.pays


_WITHOUT_CUDA_GRAPHS = {"reduce-overhead": None, "max-autotune": "max-autotune-no-cudagraphs"}


def without_cuda_graphs(mode: str | None) -> str | None:
    """The ``torch.compile`` mode with the same kernels but no CUDA graphs (``reduce-overhead`` ->
    the default, ``max-autotune`` -> ``max-autotune-no-cudagraphs``; torch's mode table)."""
    return _WITHOUT_CUDA_GRAPHS.get(mode, mode) if mode is not None else None


def wants_cuda_graphs(plan: str, config: Any) -> bool:
    """True when the job asked for CUDA graphs on ``plan``'s calls: ``plan`` is the one the config
    names (never ``auto``'s trials, nor a plan a failed one steps back to) and the mode captures
    (``reduce-overhead``, ``max-autotune``), or it is ``plan="step"`` with the default mode (the step
    plan's launch-bound case). ``auto`` never turns them on: no GPU result backs them."""
    if plan != config.plan:
        return False
    return config.mode in _WITHOUT_CUDA_GRAPHS or (plan == "step" and config.mode == "default")


@dataclass(frozen=True)
class Prior:
    """What we expect of a plan on a device before any job measured it.

    Attributes:
        compile_base_seconds: compile seconds of the smallest graph (Inductor's fixed cost).
        compile_seconds_per_module: compile seconds per leaf module the plan's graphs cover.
        max_speedup: the largest steady-step speedup over eager seen for the plan on the device;
            an untried plan is assumed to reach it (optimistic, so a plan that could pay is tried).
    """

    compile_base_seconds: float
    compile_seconds_per_module: float
    max_speedup: float


# Sources: benchmarks/README.md ("The figures behind the runtime's constants and design notes"):
# the CPU priors from the demo's workload on this project's CPU, the CUDA priors from the first GPU
# run. The step plan's fused optimizer is what a Trainer already uses, so step gets the model plan's
# prior. The speedups are priors, not promises: they keep the compiled plans in the running only for
# long jobs, and plan="auto" measures before it commits.
PRIORS: dict[str, dict[str, Prior]] = {
    "cpu": {
        "regional": Prior(6.0, 0.9, 1.02),
        "model": Prior(6.0, 0.9, 1.05),
        "step": Prior(6.0, 0.9, 1.05),
    },
    "cuda": {
        "regional": Prior(10.0, 0.06, 1.5),
        "model": Prior(10.0, 0.06, 2.5),
        "step": Prior(12.0, 0.06, 4.0),
    },
}


@dataclass(frozen=True)
class Measured:
    """One option measured in this job: steady step and the compile it paid (seconds), how many
    of its steps compiled (``compile_seconds / compiling_steps``: one compile's seconds, which the
    evaluation decision weighs, :mod:`.evaluation`), and seconds it still has to pay before it runs
    steady (``pending_seconds``: a captured plan's recordings of the buckets its trial did not meet,
    :mod:`.capture_projection`)."""

    plan: str
    steady_step_seconds: float | None
    compile_seconds: float = 0.0
    compiling_steps: int = 0
    pending_seconds: float = 0.0


@dataclass(frozen=True)
class Estimate:
    """An untried plan's expected compile seconds and best plausible steady step, and where they
    come from (``"history"``: an earlier job with the same workload; ``"prior"``: the device's prior)."""

    plan: str
    compile_seconds: float
    step_seconds: float
    source: str


@dataclass
class Workload:
    """What the estimates depend on.

    Attributes:
        device: ``"cpu"`` or ``"cuda"``.
        modules: leaf modules per plan's compiled graphs, e.g. ``{"regional": 13, "model": 88,
            "step": 88}`` (regional counts one block: its graph is shared by every block).
        warm_cache: the job started with a warm compile cache.
        history: per plan, what an earlier job with the same workload measured:
            ``{"compile_seconds", "steady_step_seconds", "cache": "cold" | "warm"}``.
    """

    device: str
    modules: Mapping[str, int]
    warm_cache: bool = False
    history: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def estimate(plan: str, workload: Workload, eager_step_seconds: float) -> Estimate:
    """The compile seconds and best steady step to expect of ``plan`` (module docstring). A warm
    cache cuts the compile of a plan an earlier job compiled (and saved); a plan no job compiled
    before compiles cold, whatever else the cache holds."""
    past = workload.history.get(plan) or {}
    prior = PRIORS.get(workload.device, PRIORS["cuda"])[plan]
    if past.get("compile_seconds") is not None and past.get("steady_step_seconds") is not None:
        compile_seconds = float(past["compile_seconds"])
        if workload.warm_cache and past.get("cache") != "warm":
            compile_seconds *= WARM_CACHE_COMPILE_FACTOR
        return Estimate(plan, compile_seconds, float(past["steady_step_seconds"]), "history")
    # No earlier job compiled this plan, so a warm cache holds nothing for it: a cold compile.
    compile_seconds = prior.compile_base_seconds + prior.compile_seconds_per_module * workload.modules.get(plan, 0)
    return Estimate(plan, compile_seconds, eager_step_seconds / prior.max_speedup, "prior")


@dataclass(frozen=True)
class Projection:
    """An option's projected seconds for the rest of the job, and how it was projected."""

    plan: str
    seconds: float
    basis: str  # "measured" or "estimate (history)" / "estimate (prior)"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"plan": self.plan, "projected_seconds": self.seconds, "basis": self.basis}


def project(measured: Sequence[Measured], estimates: Sequence[Estimate], remaining_steps: int) -> list[Projection]:
    """Projected seconds for the rest of the job for each measured option (its compile is paid; what
    it still has to pay, :attr:`Measured.pending_seconds`, is added) and each estimated one (compile
    still to pay), lowest first."""
    remaining = max(0, remaining_steps)
    options = [
        Projection(m.plan, m.pending_seconds + remaining * m.steady_step_seconds, "measured")
        for m in measured
        if m.steady_step_seconds is not None
    ]
    options += [
        Projection(e.plan, e.compile_seconds + remaining * e.step_seconds, f"estimate ({e.source})") for e in estimates
    ]
    return sorted(options, key=lambda option: option.seconds)


def next_trial(
    measured: Sequence[Measured],
    candidates: Sequence[str],
    workload: Workload,
    remaining_steps: int,
) -> tuple[str | None, list[Projection]]:
    """The next plan to try, cheapest compile first, or None when no untried plan's estimate beats
    the best measured option over the ``remaining_steps``.

    Returns:
        ``(plan or None, the projections the choice was made from)``.
    """
    eager = next((m.steady_step_seconds for m in measured if m.plan == EAGER), None)
    tried = {m.plan for m in measured}
    untried = [plan for plan in candidates if plan not in tried]
    if eager is None:
        return None, []
    estimates = [estimate(plan, workload, eager) for plan in untried]
    projections = project(measured, estimates, remaining_steps)
    best_measured = min((p.seconds for p in projections if p.basis == "measured"), default=float("inf"))
    for plan in untried:  # cheapest compile first
        option = next(p for p in projections if p.plan == plan)
        if option.seconds < best_measured:
            return plan, projections
    return None, projections


def choose(measured: Sequence[Measured], remaining_steps: int) -> tuple[str, list[Projection]]:
    """The measured option with the lowest projection for the rest of the job (eager when nothing
    else was measured)."""
    projections = project(measured, [], remaining_steps)
    return (projections[0].plan if projections else EAGER), projections
