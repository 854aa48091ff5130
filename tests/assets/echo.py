"""Test script: records what the job gave it (argv, SM_HPS, framework params, compiler env)."""

import json
import os
import sys
from pathlib import Path

WATCHED = ("ACCELERATE_DYNAMO_", "SM_TRAINING_COMPILER", "TORCH_LOGS", "TORCH_TRACE")
record = {
    "argv": sys.argv[1:],
    "hps": json.loads(os.environ["SM_HPS"]),
    "framework_params": json.loads(os.environ.get("SM_FRAMEWORK_PARAMS", "{}")),
    "env": {key: value for key, value in os.environ.items() if key.startswith(WATCHED)},
    "channels": {key: sorted(os.listdir(value)) for key, value in os.environ.items() if key.startswith("SM_CHANNEL_")},
    "main": __name__,
    "job_name": os.environ.get("TRAINING_JOB_NAME"),
}
Path(os.environ["SM_OUTPUT_DATA_DIR"], "echo.json").write_text(json.dumps(record, ensure_ascii=False))
Path(os.environ["SM_MODEL_DIR"], "weights.txt").write_text("trained")
if os.environ.get("ECHO_FAIL_WITH"):
    raise ValueError(os.environ["ECHO_FAIL_WITH"])
