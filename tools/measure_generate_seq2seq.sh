#!/bin/bash
# Writes crates/core/tests/data/generate_seq2seq.jsonl: a greedy generate() of a small encoder-decoder
# (tools/generate_configs/bart.json), traced by tools/trace_seq2seq_generate.py (real CPU tensors, 1 thread,
# fp32): batch 1 eager, batch 2 SDPA.
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/root/mvenv/bin/python}
OUT=crates/core/tests/data/generate_seq2seq.jsonl
: > $OUT
for c in bart; do
  $PY tools/trace_seq2seq_generate.py tools/generate_configs/$c.json --batch 1 --seq-len 128 --new-tokens 8 --attn eager 2>/dev/null | grep '^{' >> $OUT
  $PY tools/trace_seq2seq_generate.py tools/generate_configs/$c.json --batch 2 --seq-len 96 --new-tokens 12 --attn sdpa 2>/dev/null | grep '^{' >> $OUT
done
wc -l $OUT
