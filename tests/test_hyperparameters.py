"""Hyperparameters are JSON-encoded the SageMaker way, and bad ones are named before any job starts."""

import json
import math

import pytest

from sagemaker_tc import HyperparameterError
from sagemaker_tc.sdk.hyperparameters import encode_hyperparameters


def test_every_value_is_json_text():
    values = {"lr": 0.1, "epochs": 3, "name": "hello world", "flag": True, "none": None, "layers": [1, "a"]}
    encoded = encode_hyperparameters(values)
    assert encoded == {
        "lr": "0.1",
        "epochs": "3",
        "name": '"hello world"',
        "flag": "true",
        "none": "null",
        "layers": '[1, "a"]',
    }
    assert {key: json.loads(value) for key, value in encoded.items()} == values


def test_unicode_is_kept_readable():
    assert encode_hyperparameters({"greeting": "héllo ✓"}) == {"greeting": '"héllo ✓"'}


@pytest.mark.parametrize(
    ("hyperparameters", "message"),
    [
        ({"tags": {1, 2}}, r"'tags' cannot be JSON-encoded"),
        ({"model": object()}, r"'model' cannot be JSON-encoded"),
        ({"lr": math.nan}, r"'lr' cannot be JSON-encoded"),
        ({"lr": math.inf}, r"'lr' cannot be JSON-encoded"),
        ({3: "x"}, r"name 3 is not accepted"),
        ({"": "x"}, r"name '' is not accepted"),
        ({"sagemaker_program": "x.py"}, r"reserves"),
        ({"text": "x" * 2600}, r"at most 2500"),
        (["lr", 0.1], r"must be a dict"),
    ],
)
def test_bad_hyperparameters_are_named(hyperparameters, message):
    with pytest.raises(HyperparameterError, match=message):
        encode_hyperparameters(hyperparameters)
