"""Test script: records its PID, then sleeps far longer than the job may run."""

import os
import time
from pathlib import Path

Path(os.environ["SM_OUTPUT_DATA_DIR"], "pid").write_text(str(os.getpid()))
time.sleep(600)
