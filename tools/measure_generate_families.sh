#!/bin/bash
# Writes crates/core/tests/data/generate_families.jsonl: a generate() of one small config per family
# (tools/generate_configs/*.json), measured by tools/measure_generate_hf.py (CPU, 1 thread, fp32, eager).
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/root/mvenv/bin/python}
OUT=crates/core/tests/data/generate_families.jsonl
: > $OUT
for c in mamba gemma3 qwen3_next jamba; do
  $PY tools/measure_generate_hf.py tools/generate_configs/$c.json --batch 1 --prompt-len 64 --new-tokens 16 --cache dynamic --attn eager | grep '^{' >> $OUT
done
$PY tools/measure_generate_hf.py tools/generate_configs/gpt_oss.json --batch 2 --prompt-len 64 --new-tokens 8 --cache dynamic --attn eager | grep '^{' >> $OUT
$PY tools/measure_generate_hf.py tools/generate_configs/qwen3_next.json --batch 1 --prompt-len 100 --new-tokens 8 --cache dynamic --attn eager | grep '^{' >> $OUT
$PY tools/measure_generate_hf.py tools/generate_configs/gemma3.json --batch 1 --prompt-len 16 --new-tokens 24 --cache dynamic --attn eager | grep '^{' >> $OUT
$PY tools/measure_generate_hf.py tools/generate_configs/mamba.json --batch 2 --prompt-len 32 --new-tokens 8 --cache dynamic --attn eager | grep '^{' >> $OUT
$PY tools/measure_generate_hf.py tools/generate_configs/jamba.json --batch 2 --prompt-len 48 --new-tokens 8 --cache dynamic --attn eager | grep '^{' >> $OUT
