"""Numerical safety of the compile plans: which plans train which architectures wrongly (or fail on
them), and which committed ``verify`` test shows each plan right.

Two tables, both data, both backed by tests in ``make test``'s lanes (the dev stack and the default
Hugging Face DLC stack, ``tests/stack_lane.py``; ``make test-stacks`` runs the others):

- :data:`KNOWN_WRONG`: an architecture, the plans that train it wrongly (or raise on it, the fallback
  ending them: ``kind="broken"``), the torch (and, where it matters, transformers) versions it was seen
  on, the training feature it needs if any (gradient checkpointing), a one-line reason, and the test that
  shows it (a strict expected failure in every lane whose versions the entry covers: it turns red on the
  upgrade that fixes it, and the test runs as a plain one in lanes outside the range). ``plan="auto"``
  never tries such a plan for that architecture
  (:meth:`sagemaker_tc.compiler.runtime.CompilerRuntime._available_plans`); an explicit ``plan=`` still
  runs it, with a warning naming the test.
- :data:`VERIFIED`: the architectures ``tests/test_verify.py::test_each_plan_trains_like_eager``
  trains under every plan, compiled against eager (20 AdamW steps, per-step losses within 1e-4
  relative, every parameter within 1e-5), on the torch :data:`TESTED_TORCH` pins. The report's
  ``plan_decision.verified`` names the test that backs the plan a job ran (:func:`report_fields`).

An architecture is a Hugging Face ``config.model_type`` (``"t5"``, which covers every T5 head) or,
for any other model, its class name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sagemaker_tc.compiler import planner, sharding

logger = logging.getLogger("sagemaker_tc.compiler")

TESTED_TORCH = "2.13.0"
"""The torch ``make test`` runs on: ``constraints.txt``'s pin (a test keeps the two equal)."""

VERIFY_TEST = "tests/test_verify.py::test_each_plan_trains_like_eager[{model}-{plan}]"
"""The node id of the verify run of one tiny suite model under one plan."""

VERIFIED: dict[str, str] = {
    "bert": "bert-base-uncased",
    "roberta": "roberta-base",
    "distilbert": "distilbert-base-uncased",
    "gpt2": "gpt2",
    "t5": "t5-base",
    "llama": "llama",
}
"""Architecture -> the model :data:`VERIFY_TEST` trains under every plan (``tests/test_verify.py``:
the suite's tiny configs, and a tiny ``LlamaConfig``)."""


@dataclass(frozen=True)
class KnownWrong:
    """Plans that train an architecture wrongly on some torch versions.

    Attributes:
        architecture: a ``config.model_type`` or a model class name.
        plans: the plans that train it wrongly.
        first_seen: the first torch version the repro was run on and failed.
        fixed_in: the first torch version where it passes; None: still open.
        reason: what goes wrong, in one line.
        repro: the node id of the test that fails (a strict xfail in ``make test``): the ``verify`` run
            of the architecture under the plan, or a narrower one that shows what the plan compiles.
        upstream_repro: the node id of a test that shows it with plain torch, none of our code on
            the path (for a torch bug report); None when there is none.
        feature: a training feature the entry needs, else None (every job of the architecture):
            ``"gradient_checkpointing"`` (the model trains with it on).
        transformers: ``(first seen, fixed in)`` transformers versions, as for torch; None: any.
        kind: ``"wrong"`` (the plan trains the architecture to other numbers than eager, silently) or
            ``"broken"`` (the plan raises; the fallback ends it and the job trains on, at eager's
            speed): ``auto`` leaves both out.
    """

    architecture: str
    plans: tuple[str, ...]
    first_seen: str
    fixed_in: str | None
    reason: str
    repro: str
    upstream_repro: str | None = None
    feature: str | None = None
    transformers: tuple[str, str | None] | None = None
    kind: str = "wrong"

    def applies_to(self, torch_version: str, transformers_version: str | None = None) -> bool:
        """True for torch versions in ``[first_seen, fixed_in)`` (pre-releases of ``fixed_in`` count
        as before it: a nightly may not have the fix) and, when the entry names a transformers range
        and ``transformers_version`` is given, transformers versions in that range."""
        if not _in_range(torch_version, self.first_seen, self.fixed_in):
            return False
        if self.transformers is None or transformers_version is None:
            return True
        return _in_range(transformers_version, *self.transformers)

    def torch_range(self) -> str:
        """``">=2.13.0"`` or ``">=2.13.0,<2.14"``."""
        return f">={self.first_seen}" + (f",<{self.fixed_in}" if self.fixed_in else "")

    def to_dict(self, plan: str) -> dict[str, Any]:
        """The report's entry for ``plan``."""
        entry = {
            "plan": plan,
            "kind": self.kind,
            "architecture": self.architecture,
            "torch": self.torch_range(),
            "reason": self.reason,
            "repro": self.repro,
        }
        if self.feature is not None:
            entry["feature"] = self.feature
        if self.transformers is not None:
            first, fixed = self.transformers
            entry["transformers"] = f">={first}" + (f",<{fixed}" if fixed else "")
        return entry


KNOWN_WRONG: tuple[KnownWrong, ...] = (
    KnownWrong(
        architecture="t5",
        plans=("regional",),
        first_seen="2.13.0",
        fixed_in=None,
        reason=(
            "T5's first decoder block compiled on its own, as regional compiles it, gets a wrong "
            "relative_attention_bias gradient (seen on CPU Inductor; not yet run on a GPU, so excluded on every "
            "device; the verify run under regional no longer hits it)"
        ),
        repro="tests/test_verify.py::test_t5_decoder_block_compiled_alone_gets_the_relative_bias_gradient",
    ),
    KnownWrong(
        architecture="bert",
        plans=("regional",),
        first_seen="2.9.0",
        fixed_in="2.13.0",
        reason=(
            "with gradient checkpointing, a compiled block's backward raises in the checkpoint's recompute "
            "(torch.utils.checkpoint: target_frame.early_stop); the backward fallback ends the plan and the job "
            "trains on eagerly (seen on 2.9, 2.10 and 2.11; 2.12 is no stack's, so it is kept in the range)"
        ),
        repro="tests/test_plan_call.py::test_a_checkpointed_block_trains_compiled_under_regional",
        feature="gradient_checkpointing",
        kind="broken",
    ),
)
"""Every plan known to train an architecture wrongly (module docstring). Source: the failing
``verify`` test each entry names, run in ``make test``."""


def architecture(model: Any) -> str:
    """``model``'s architecture: its Hugging Face ``config.model_type``, else its class name."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return model_type if isinstance(model_type, str) and model_type else type(model).__name__


def _torch_version() -> str:
    import torch

    return torch.__version__


def _transformers_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return None


FEATURES = {"gradient_checkpointing": sharding.activation_checkpointing}
"""A :attr:`KnownWrong.feature` -> whether a model trains with it (gradient checkpointing: a Hugging
Face model after ``gradient_checkpointing_enable()``, read without transformers 5's deprecated
``is_gradient_checkpointing`` where it has the new name, or torch's ``checkpoint_wrapper``)."""


def plans_known_wrong(model: Any, torch_version: str | None = None) -> dict[str, KnownWrong]:
    """Plan name -> the :data:`KNOWN_WRONG` entry that marks it wrong for ``model``'s architecture on
    ``torch_version`` (default: the installed torch) and the installed transformers, with the
    entry's feature on, if it names one. Source: :data:`KNOWN_WRONG`, whose entries each name the
    failing test in the lane that found it."""
    version = torch_version or _torch_version()
    transformers_version = _transformers_version()
    names = {architecture(model), type(model).__name__}
    found: dict[str, KnownWrong] = {}
    for entry in KNOWN_WRONG:
        uses_feature = entry.feature is None or FEATURES[entry.feature](model)
        if entry.architecture in names and uses_feature and entry.applies_to(version, transformers_version):
            for plan in entry.plans:
                found.setdefault(plan, entry)
    return found


def plans_known_wrong_for(models: Iterable[Any], torch_version: str | None = None) -> dict[str, KnownWrong]:
    """:func:`plans_known_wrong` over several models: a plan wrong for any of them."""
    found: dict[str, KnownWrong] = {}
    for model in models:
        for plan, entry in plans_known_wrong(model, torch_version).items():
            found.setdefault(plan, entry)
    return found


def announce(model: Any, requested: str) -> None:
    """Log what :data:`KNOWN_WRONG` says about ``model`` when it is attached under ``requested``:
    ``auto`` leaves the plans out (info); an explicit plan known wrong still runs, as asked (warning
    naming the failing test)."""
    for plan, entry in plans_known_wrong(model).items():
        if requested == "auto":
            logger.info(
                "plan='auto' will not try %r for %s: %s (%s)", plan, entry.architecture, entry.reason, entry.repro
            )
        elif requested == plan and entry.kind == "broken":
            logger.warning(
                "PLAN KNOWN BROKEN: plan=%r fails for %s on torch %s: %s. Running it as asked (the fallback ends it "
                "when it fails); see %s, or use plan='auto' (it leaves this plan out)",
                plan,
                entry.architecture,
                entry.torch_range(),
                entry.reason,
                entry.repro,
            )
        elif requested == plan:
            logger.warning(
                "PLAN KNOWN WRONG: plan=%r trains %s wrongly on torch %s: %s. Running it as asked; see %s, or use "
                "plan='auto' (it leaves this plan out)",
                plan,
                entry.architecture,
                entry.torch_range(),
                entry.reason,
                entry.repro,
            )


def evidence(model: Any, plan: str) -> str | None:
    """The committed ``verify`` test that shows ``model``'s architecture training like eager under
    ``plan`` (on :data:`TESTED_TORCH`), or None: no such test, or the test is a known failure there.
    Source: :data:`VERIFIED` and :data:`KNOWN_WRONG`."""
    name = architecture(model)
    if name not in VERIFIED or plan in plans_known_wrong(model, TESTED_TORCH):
        return None
    return f"{VERIFY_TEST.format(model=VERIFIED[name], plan=plan)} (torch {TESTED_TORCH})"


def report_fields(models: list[Any], requested: str | None, plan: str | None) -> dict[str, Any]:
    """The report's ``plan_decision`` fields on numerical safety.

    - ``excluded``: plans ``auto`` did not try, each with its architecture, torch range, reason and
      repro (empty for an explicit plan: it runs what was asked).
    - ``verified``: for the compiled ``plan`` the job ran, per architecture attached, the verify test
      that backs it (None: none does), and ``known_wrong`` entries when the plan was asked for
      despite one; None when the job ran no compile plan (eager, or ``backend="xla"``).
    """
    excluded = plans_known_wrong_for(models) if requested == "auto" else {}
    fields: dict[str, Any] = {"excluded": [entry.to_dict(p) for p, entry in excluded.items()], "verified": None}
    if plan not in planner.COMPILED_PLANS or not models:
        return fields  # eager compiled nothing; backend="xla" runs no plan verify covers
    verified: dict[str, Any] = {"plan": plan, "evidence": {architecture(m): evidence(m, plan) for m in models}}
    wrong = plans_known_wrong_for(models)
    if plan in wrong:
        verified["known_wrong"] = wrong[plan].to_dict(plan)
    fields["verified"] = verified
    return fields


def _in_range(version: str, first_seen: str, fixed_in: str | None) -> bool:
    key = _version_key(version)
    return _version_key(first_seen) <= key and (fixed_in is None or key < _version_key(fixed_in))


def _version_key(version: str) -> tuple[tuple[int, ...], int]:
    """``"2.13.0+cpu"`` -> ``((2, 13, 0), 1)``; a pre-release (``"2.14.0a0+git"``, ``".dev"``, ``"rc1"``)
    sorts before its release: ``((2, 14, 0), 0)``. Trailing zeros do not count (``2.14 == 2.14.0``)."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)(.*)", version)
    if match is None:
        return ((), 0)
    release = tuple(int(part) for part in match.group(1).split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    rest = match.group(2).split("+", 1)[0]
    return release, (0 if re.search(r"(a|b|rc|dev)\d*", rest) else 1)
