#!/bin/bash
# Writes crates/core/tests/data/generate_moe2.jsonl: a generate() of one small config per family
# (tools/generate_configs/<family>.json) of the SSM hybrids, linear-attention and MoE decoders,
# measured by tools/measure_generate_hf.py (CPU, 1 thread, fp32, eager, dynamic cache, greedy).
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/root/mvenv/bin/python}
OUT=crates/core/tests/data/generate_moe2.jsonl
: > $OUT
for c in mamba2 falcon_h1 bamba minimax llama4_text granitemoe olmoe ernie4_5_moe phimoe glm4_moe deepseek_v2; do
  $PY tools/measure_generate_hf.py tools/generate_configs/$c.json --batch 1 --prompt-len 64 --new-tokens 16 --cache dynamic --attn eager | grep '^{' >> $OUT
done
# DeepSeek-V2 at batch 2 too: there `matmul(attn_weights, value_states)` copies the strided values
$PY tools/measure_generate_hf.py tools/generate_configs/deepseek_v2.json --batch 2 --prompt-len 64 --new-tokens 16 --cache dynamic --attn eager | grep '^{' >> $OUT
