#!/usr/bin/env bash
# Captures an attention trace from a Hugging Face transformers model on a
# machine with a GPU, in one run (docs/traces.md). From the repository root:
#
#   cuda_validate/capture_attention.sh MODEL [PROMPTS.json]
#
# MODEL is a name or a local path that transformers can load (Llama, Qwen,
# OPT and other causal LMs with eager attention); PROMPTS defaults to
# traces/capture/prompts_stories.json (every prompt needs at least
# $KVTIER_CAPTURE_CONTEXT tokens: give longer texts for long contexts).
# Writes into $OUT (default out/capture): trace.jsonl (format v2), trace.trace
# (binary, f16 masses), stats.txt and stats.json (kvtier trace stats),
# fit.json and fit.txt (kvtier trace fit, captured vs fitted), capture.log,
# env.txt.
#
# Exit: 0 captured; 77 skipped (no torch/transformers, or no CUDA device
# while KVTIER_CAPTURE_DEVICE is cuda); 1 anything that went wrong; 2 bad input.
# Environment: OUT, KVTIER_BUILD (build: where bin kvtier is), KVTIER_CAPTURE_DEVICE (cuda),
# KVTIER_CAPTURE_CONTEXT (160), KVTIER_CAPTURE_STEPS (128), KVTIER_CAPTURE_BLOCK (16),
# KVTIER_CAPTURE_HEAD_GROUPS (1).
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODEL=${1:-}
PROMPTS=${2:-$ROOT/traces/capture/prompts_stories.json}
OUT=${OUT:-$ROOT/out/capture}
BUILD=${KVTIER_BUILD:-$ROOT/build}
DEVICE=${KVTIER_CAPTURE_DEVICE:-cuda}
CTX=${KVTIER_CAPTURE_CONTEXT:-160}
STEPS=${KVTIER_CAPTURE_STEPS:-128}
BLOCK=${KVTIER_CAPTURE_BLOCK:-16}
HEAD_GROUPS=${KVTIER_CAPTURE_HEAD_GROUPS:-1}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

if [ -z "$MODEL" ]; then
  echo "capture_attention: usage: cuda_validate/capture_attention.sh MODEL [PROMPTS.json]" >&2
  exit 2
fi
mkdir -p "$OUT"
cd "$ROOT" || exit 1

if ! "$PY" -c "import torch, transformers" 2>/dev/null; then
  echo "capture_attention: skipped: torch and transformers are not importable by $PY"
  exit 77
fi
if [ "$DEVICE" = cuda ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "capture_attention: skipped: no CUDA device visible to torch"
  exit 77
fi
{
  date -u
  "$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  command -v nvidia-smi >/dev/null && nvidia-smi -L
} > "$OUT/env.txt" 2>&1

T0=$(date +%s)
"$PY" traces/capture/capture.py --hf "$MODEL" --device "$DEVICE" --prompts "$PROMPTS" \
  --context-tokens "$CTX" --steps "$STEPS" --block-tokens "$BLOCK" --head-groups "$HEAD_GROUPS" \
  -o "$OUT/trace.jsonl" > "$OUT/capture.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  tail -3 "$OUT/capture.log" >&2
  [ $rc -eq 2 ] && exit 2
  exit 1
fi
echo "capture_attention: captured in $(( $(date +%s) - T0 )) s"

KV=$BUILD/kvtier
if [ ! -x "$KV" ]; then
  echo "capture_attention: captured $OUT/trace.jsonl; $KV not built, so no conversion, stats or fit"
  exit 0
fi
"$KV" trace convert "$OUT/trace.jsonl" -o "$OUT/trace.trace" --mass f16 || exit 1
"$KV" trace stats "$OUT/trace.trace" --json "$OUT/stats.json" > "$OUT/stats.txt" || exit 1
"$KV" trace fit "$OUT/trace.trace" -o "$OUT/fit.json" > "$OUT/fit.txt" || exit 1
echo "capture_attention: wrote $OUT/trace.trace, stats.txt, fit.json in $(( $(date +%s) - T0 )) s"
