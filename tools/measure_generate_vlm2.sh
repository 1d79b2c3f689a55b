#!/bin/bash
# Writes crates/core/tests/data/generate_vlm2.jsonl: a greedy generate() with one image of each image-text
# family but Qwen2.5-VL (tools/generate_configs/{llava,paligemma,gemma3_vlm,mllama}.json), traced by
# tools/trace_vlm_generate.py (real CPU tensors, 1 thread, fp32): batch 1 eager, batch 2 SDPA.
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/root/mvenv/bin/python}
OUT=crates/core/tests/data/generate_vlm2.jsonl
: > $OUT
for c in llava paligemma gemma3_vlm mllama; do
  $PY tools/trace_vlm_generate.py tools/generate_configs/$c.json --batch 1 --seq-len 96 --new-tokens 8 --attn eager 2>/dev/null | grep '^{' >> $OUT
  $PY tools/trace_vlm_generate.py tools/generate_configs/$c.json --batch 2 --seq-len 80 --new-tokens 12 --attn sdpa 2>/dev/null | grep '^{' >> $OUT
done
wc -l $OUT
