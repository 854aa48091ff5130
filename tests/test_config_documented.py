"""What the config's documentation states (field descriptions, README's table, docs/configuration.md)
agrees with the code: each stated default is the pydantic default, and each number a description
states comes from the constant that owns it (imported here, never written twice)."""

from __future__ import annotations

import ast
import math
import re
from collections import Counter

import pytest
from conftest import REPO

from sagemaker_tc import config_rules
from sagemaker_tc.compiler.planner import ASSUMED_JOB_STEPS
from sagemaker_tc.compiler.schedule import EAGER_TRIAL_STEPS
from sagemaker_tc.compiler.shapes import MAX_LEARNED_BUCKETS, MIN_GRANULARITY, TARGET_GRAPHS, learned_granularity
from sagemaker_tc.config import TrainingCompilerConfig
from sagemaker_tc.container.watchdog import SAGEMAKER_GRACE_S
from sagemaker_tc.sdk.local.process import LOCAL_PROCESS_HANG_GRACE_S
from sagemaker_tc.tuning.memory import CPU_BUDGET_FRACTION, CUDA_BUDGET_FRACTION

FIELDS = TrainingCompilerConfig.model_fields
NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?")
FRACTION_WORDS = {0.5: "half"}


def bound(name: str, kind: str) -> float:
    """A field's pydantic bound: ``kind`` is ``ge``, ``gt``, ``le`` or ``lt``."""
    (value,) = [getattr(item, kind) for item in FIELDS[name].metadata if getattr(item, kind, None) is not None]
    return value


def bert_max_length() -> int:
    from transformers import BertConfig

    return BertConfig().max_position_embeddings


# Each number a field's description states, as it is written there, and the code it comes from.
DESCRIBED_NUMBERS = {
    "buckets": {
        "1": 1,  # the spread is longest - shortest + 1 (checked against learned_granularity below)
        str(TARGET_GRAPHS): TARGET_GRAPHS,
        str(MIN_GRANULARITY): MIN_GRANULARITY,
        str(MAX_LEARNED_BUCKETS): MAX_LEARNED_BUCKETS,
    },
    "baseline_steps": {"0": bound("baseline_steps", "ge"), str(EAGER_TRIAL_STEPS): EAGER_TRIAL_STEPS},
    "expected_steps": {str(ASSUMED_JOB_STEPS): ASSUMED_JOB_STEPS},
    "memory_budget_gib": {f"{CUDA_BUDGET_FRACTION:.0%}".rstrip("%"): CUDA_BUDGET_FRACTION * 100},
    "tune_seq_len": {str(bert_max_length()): bert_max_length()},  # "e.g. 512 for BERT": BERT's own maximum length
    "max_batch_size": {str(config_rules.MAX_BATCH): config_rules.MAX_BATCH},
    "batch_size_multiple": {"8": 8},  # "e.g. 8 so GPU matrix shapes suit tensor cores": an example value
    "hang_grace_s": {
        f"{SAGEMAKER_GRACE_S:g}": SAGEMAKER_GRACE_S,
        str(LOCAL_PROCESS_HANG_GRACE_S): LOCAL_PROCESS_HANG_GRACE_S,
    },
}

# Text each description states about a number owned by another module, built from that constant.
DESCRIBED_TEXT = {
    "buckets": [
        f"split in {TARGET_GRAPHS} and rounded up to a multiple of {MIN_GRANULARITY} tokens, "
        f"at least {MIN_GRANULARITY}",
        f"to at most {MAX_LEARNED_BUCKETS} lengths over a job",
    ],
    "baseline_steps": [f"plan='auto' always measures at least {EAGER_TRIAL_STEPS} eager steps"],
    "expected_steps": [f"None: {ASSUMED_JOB_STEPS} steps are assumed"],
    "memory_budget_gib": [
        f"None: {CUDA_BUDGET_FRACTION:.0%} of the GPU's memory",
        f"on CPU, {FRACTION_WORDS[CPU_BUDGET_FRACTION]} of the host's available memory",
    ],
    "max_batch_size": [f"(at most {bound('max_batch_size', 'le')})"],
    "hang_grace_s": [f"None: {SAGEMAKER_GRACE_S:g} on SageMaker, {LOCAL_PROCESS_HANG_GRACE_S} in local_process"],
}

# The same statements in README's table (its own wording and markup).
README_TEXT = {
    "buckets": ["a step learned from the lengths the eager steps saw"],
    "baseline_steps": [f'`plan="auto"` measures at least {EAGER_TRIAL_STEPS} eager steps'],
    "expected_steps": [f"`None`: {ASSUMED_JOB_STEPS:,} assumed"],
    "memory_budget_gib": [
        f"`None`: {CUDA_BUDGET_FRACTION:.0%} of the GPU, or {FRACTION_WORDS[CPU_BUDGET_FRACTION]} the host's"
    ],
    "max_batch_size": [f"(at most {config_rules.MAX_BATCH})"],
    "hang_grace_s": [f"`None`: {SAGEMAKER_GRACE_S:g} on SageMaker, {LOCAL_PROCESS_HANG_GRACE_S} in `local_process`"],
}


def readme_rows() -> dict[str, list[str]]:
    """README's ``TrainingCompilerConfig`` table: field -> its cells (name, default, meaning)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text.split("### `TrainingCompilerConfig`", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells
    return rows


def test_readme_lists_every_field_with_the_pydantic_default():
    rows = readme_rows()
    assert sorted(rows) == sorted(FIELDS)
    for name, field in FIELDS.items():
        stated = ast.literal_eval(rows[name][1].strip("`"))
        assert (stated, type(stated)) == (field.default, type(field.default)), name


def test_auto_batch_fields_hold_the_pydantic_defaults():
    """config_rules warns when these differ from their defaults; a stale copy would warn wrongly."""
    assert config_rules.AUTO_BATCH_FIELDS == {name: FIELDS[name].default for name in config_rules.AUTO_BATCH_FIELDS}


@pytest.mark.parametrize("name", list(FIELDS))
def test_every_number_a_description_states_comes_from_the_code(name):
    description = FIELDS[name].description
    stated = NUMBER.findall(description)
    known = DESCRIBED_NUMBERS.get(name, {})
    unknown = sorted(set(stated) - set(known))
    assert not unknown, f"{name}: add these numbers to DESCRIBED_NUMBERS with the code they come from: {unknown}"
    for text, value in known.items():
        assert float(text.replace(",", "")) == value, (name, text)
    for sentence in DESCRIBED_TEXT.get(name, []):
        assert sentence in description, f"{name}: {sentence!r} not in {description!r}"


@pytest.mark.parametrize("name", sorted(README_TEXT))
def test_readme_states_the_same_numbers(name):
    meaning = readme_rows()[name][2]
    for sentence in README_TEXT[name]:
        assert sentence in meaning, f"{name}: {sentence!r} not in README's {meaning!r}"


def test_the_auto_bucket_step_is_computed_as_described():
    """The spread (longest - shortest + 1) split in TARGET_GRAPHS, rounded up to MIN_GRANULARITY."""
    assert (TARGET_GRAPHS, MIN_GRANULARITY) == (4, 8)  # the worked numbers below
    assert learned_granularity(Counter({1: 3, 33: 1})) == 16  # spread 33 -> 9 -> 16 (32 would give 8)
    assert learned_granularity(Counter({100: 1, 101: 1})) == 8  # spread 2 -> 1 -> at least 8
    assert learned_granularity(Counter({10: 1, 137: 1})) == 32  # spread 128 -> 32


def test_configuration_page_states_the_bounds_of_config_rules():
    page = " ".join((REPO / "docs" / "configuration.md").read_text(encoding="utf-8").split())
    assert f"at most 2**{int(math.log2(config_rules.MAX_SEQUENCE_LENGTH))} tokens" in page
    assert f"an int `batch_size` 1 to {config_rules.MAX_BATCH}" in page
    assert f"`expected_steps` at most 10**{round(math.log10(config_rules.MAX_EXPECTED_STEPS))}" in page
    days = config_rules.MAX_HANG_GRACE_S / 86400
    assert f"`hang_grace_s` {config_rules.MIN_HANG_GRACE_S:g} second to {days:g} days" in page
    assert 2 ** int(math.log2(config_rules.MAX_SEQUENCE_LENGTH)) == config_rules.MAX_SEQUENCE_LENGTH
