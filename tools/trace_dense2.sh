#!/bin/bash
# Writes crates/core/tests/data/hf/traces_dense2.jsonl: one training step (tools/trace_hf.py: forward,
# cross-entropy, backward from set_to_none grads; FakeTensorMode, CPU, fp32) of the small configs
# tools/generate_configs/{cohere2,exaone4,ernie4_5,hunyuan_v1_dense,nemotron}.json, eager and SDPA,
# batch 2, 128 tokens. Each line: the record format of hf/traces.jsonl (config, batch, seq_len,
# attention, dtype, measured_peak_bytes, class, family, command).
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/root/mvenv/bin/python}
OUT=crates/core/tests/data/hf/traces_dense2.jsonl
: > $OUT
for c in cohere2 exaone4 ernie4_5 hunyuan_v1_dense nemotron; do
  for attn in eager sdpa; do
    line=$($PY tools/trace_hf.py tools/generate_configs/$c.json --batch 2 --seq-len 128 --attn $attn 2>/dev/null | grep '^{')
    $PY - "$c" "$attn" "$line" >> $OUT <<'PYEOF'
import json, sys
c, attn, line = sys.argv[1:]
m = json.loads(line)
cfg = json.load(open(f"tools/generate_configs/{c}.json"))
print(json.dumps({"attention": attn, "batch": m["batch"], "class": m["class"],
                  "command": f"python tools/trace_hf.py CONFIG --batch 2 --seq-len 128 --attn {attn}",
                  "config": cfg, "dtype": m["dtype"], "family": c, "measured_peak_bytes": m["peak_bytes"],
                  "seq_len": m["seq_len"]}, sort_keys=True))
PYEOF
  done
done
