#!/bin/bash
# Writes crates/core/tests/data/generate_dense2.jsonl: a generate() of one small config per dense family
# (tools/generate_configs/<family>.json), measured by tools/measure_generate_hf.py (CPU, 1 thread, fp32,
# eager, dynamic cache, greedy): batch 1, prompt 64, 16 new tokens; the two sliding-window families
# (cohere2, exaone4: 32-token window) also at prompt 16 and 24 new tokens (the window fills in the decode).
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/root/mvenv/bin/python}
OUT=crates/core/tests/data/generate_dense2.jsonl
: > $OUT
for c in cohere2 exaone4 ernie4_5 hunyuan_v1_dense nemotron granite olmo2 cohere smollm3 stablelm gptj bloom mpt glm4; do
  $PY tools/measure_generate_hf.py tools/generate_configs/$c.json --batch 1 --prompt-len 64 --new-tokens 16 --cache dynamic --attn eager | grep '^{' >> $OUT
done
for c in cohere2 exaone4; do
  $PY tools/measure_generate_hf.py tools/generate_configs/$c.json --batch 1 --prompt-len 16 --new-tokens 24 --cache dynamic --attn eager | grep '^{' >> $OUT
done
