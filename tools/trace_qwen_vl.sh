#!/bin/sh
# Qwen2.5-VL training steps, inference forwards and generate() (tools/trace_qwen_vl.py) on the tiny config
# of tools/qwen_vl_configs/, two image sizes, eager (and SDPA on the larger one):
# crates/core/tests/data/hf/qwen_vl_traces.jsonl.
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/root/mvenv/bin/python}
OUT=crates/core/tests/data/hf/qwen_vl_traces.jsonl
: > "$OUT"
for image in "252 196" "448 336"; do
  for mode in train infer; do
    $PY tools/trace_qwen_vl.py tools/qwen_vl_configs/tiny.json --image $image --seq-len 256 --mode $mode 2>/dev/null | tail -1 >> "$OUT"
  done
done
# SDPA (the CPU kernels: vramcalc --device cpu) on the larger image
for mode in train infer; do
  $PY tools/trace_qwen_vl.py tools/qwen_vl_configs/tiny.json --image 448 336 --seq-len 256 --mode $mode --attn sdpa 2>/dev/null | tail -1 >> "$OUT"
done
# generate(): 8 new tokens after the 256-token prompt, eager on the smaller image, SDPA on the larger
$PY tools/trace_qwen_vl.py tools/qwen_vl_configs/tiny.json --image 252 196 --seq-len 256 --mode generate --new-tokens 8 2>/dev/null | tail -1 >> "$OUT"
$PY tools/trace_qwen_vl.py tools/qwen_vl_configs/tiny.json --image 448 336 --seq-len 256 --mode generate --new-tokens 8 --attn sdpa 2>/dev/null | tail -1 >> "$OUT"
wc -l "$OUT"
