#!/usr/bin/env bash
# Builds vramcalc-verify with candle's CUDA backend and measures real training steps on a GPU,
# printing the markdown table for crates/verify/README.md ("CUDA results").
#
#   crates/verify/scripts/gpu-check.sh            # from the repository root, on a machine with a GPU
#
# Environment:
#   CUDA_COMPUTE_CAP  compute capability the kernels are built for (default: from nvidia-smi, else 90)
#   CUDA_HOME         a CUDA toolkit with nvcc; without one, NVCC_FROM_PIP=1 installs nvcc from PyPI
#   NVCC_FROM_PIP=1   pip-install nvcc 13.0 (+ CCCL headers, cuBLAS, cuRAND, NVRTC, cudart) into
#                     $PIP_CUDA (default target/pip-cuda). Its PTX needs a driver for CUDA 13 (>= 580).
#   OPTIMIZER         sgd | adam | adamw (default adamw)
#   TOLERANCE         percent (default 5); a run beyond it is marked, the script goes on
#   RESULTS           JSON lines of every run (default target/gpu-check.jsonl)
#   PYTORCH_REFERENCE=1  also run the reference harness (measure.py) with --device cuda where torch imports
#   REFERENCE         the reference folder (default ../shared/reference beside the repository)
#   QUICK=1           one small run per model (checks the script itself)
#   QLORA=0           skip the QLoRA / quantised-base runs (scripts/qlora_check.py; they need torch,
#                     transformers, peft and bitsandbytes with CUDA, and run where those import)
#   GENERATE=1        also check `vramcalc estimate --mode generate` against greedy generate()
#                     measured on the GPU (`measure_llm.py --device cuda`, torch + transformers
#                     5.24 needed): the cases below are what CPU records cannot confirm
#   GENERATE_ONLY=1   only that check (no candle build, no nvcc needed)
set -uo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$PWD
OPTIMIZER=${OPTIMIZER:-adamw}
TOLERANCE=${TOLERANCE:-5}
RESULTS=${RESULTS:-$ROOT/target/gpu-check.jsonl}
REFERENCE=${REFERENCE:-$ROOT/../shared/reference}
mkdir -p "$ROOT/target"
: > "$RESULTS"

if [[ -z "${CUDA_COMPUTE_CAP:-}" ]]; then
  CUDA_COMPUTE_CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.[:space:]')
  export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
fi

if [[ "${NVCC_FROM_PIP:-0}" == 1 ]]; then
  # pip --target replaces existing top-level folders, so every wheel goes in one call (CCCL apart,
  # then merged: nvcc 13 needs its headers, <nv/target> and <cuda/std/...>).
  PIP_CUDA=${PIP_CUDA:-$ROOT/target/pip-cuda}
  if [[ ! -x "$PIP_CUDA/nvidia/cu13/bin/nvcc" ]]; then
    python3 -m pip install --quiet --target "$PIP_CUDA" "nvidia-cuda-nvcc==13.0.88" "nvidia-nvvm==13.0.88" \
      "nvidia-cuda-crt==13.0.88" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-nvrtc==13.0.*" nvidia-curand \
      "nvidia-cublas==13.0.*" || exit 2
    python3 -m pip install --quiet --target "$PIP_CUDA-cccl" "nvidia-cuda-cccl==13.0.*" || exit 2
    cp -rn "$PIP_CUDA-cccl/nvidia/cu13/include/." "$PIP_CUDA/nvidia/cu13/include/"
    # the linker wants unversioned names
    (cd "$PIP_CUDA/nvidia/cu13/lib" && for l in cublas cublasLt cudart nvrtc; do ln -sf "lib$l.so.13" "lib$l.so"; done \
      && ln -sf libcurand.so.10 libcurand.so)
  fi
  export CUDA_HOME=$PIP_CUDA/nvidia/cu13
fi
if [[ -n "${CUDA_HOME:-}" ]]; then
  export PATH=$CUDA_HOME/bin:$PATH
  export LD_LIBRARY_PATH=$CUDA_HOME/lib:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}
fi
# --mode generate on the GPU. What the CPU records (MemTracker under FakeTensorMode) cannot show
# and a GPU run must confirm: CUDA's SDPA kernels with a KV cache (flash in prefill, the masked
# decode of a static cache), the fused fp16 softmax of eager attention, the DynamicCache `cat`
# transient under the caching allocator, all-position logits, and the cuBLAS workspace that
# `max_memory_allocated` includes (the estimate shows it in the device total, not the peak).
generate_check() {
  local ref=$REFERENCE/llm
  [[ -f "$ref/measure_llm.py" ]] || { echo "gpu-check: $ref/measure_llm.py not found (REFERENCE)" >&2; return 2; }
  python3 -c 'import torch, transformers; assert torch.cuda.is_available()' 2>/dev/null \
    || { echo "gpu-check: generate needs torch with CUDA and transformers" >&2; return 2; }
  cargo build --release -p vramcalc-cli >&2 || return 2
  local configs=$ROOT/target/gpu-generate.configs.json out=$ROOT/target/gpu-generate.jsonl
  python3 - "$configs" <<'PY'
import json, sys
llama, gpt2 = "llama-h1024-l4", "gpt2-l4"
def c(model, dtype, batch, attn, P, G, cache, ltk=1):
    return {"family": "kvcache", "model": model, "weights_dtype": dtype, "batch": batch, "attn_impl": attn,
            "generation": {"prompt_len": P, "new_tokens": G, "cache": cache, "logits_to_keep": ltk}}
json.dump([
    c(llama, "bf16", 8, "sdpa", 1024, 64, "dynamic"),   # flash prefill, cat transient per decode step
    c(llama, "bf16", 8, "sdpa", 1024, 64, "static"),    # masked decode over max_cache_len (mem-efficient)
    c(llama, "bf16", 8, "eager", 1024, 16, "dynamic"),  # fp32 softmax copy of bf16 scores
    c(llama, "fp16", 1, "eager", 1024, 16, "dynamic"),  # CUDA fp16: softmax reads half directly
    c(llama, "bf16", 8, "sdpa", 1024, 16, "dynamic", 0),  # all-position logits
    c(gpt2, "fp32", 8, "sdpa", 1024, 16, "dynamic"),    # fp32: memory-efficient kernel, gelu_new chain
    c(gpt2, "fp16", 8, "sdpa", 128, 64, "static"),
], open(sys.argv[1], "w"))
PY
  : > "$out"
  (cd "$ref" && python3 measure_llm.py --configs-json "$configs" --device cuda --out "$out") >&2 || return 2
  echo
  echo "--mode generate on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); bytes as max_memory_allocated (peak) and per phase; MiB."
  echo
  echo "| record | measured peak | estimated | diff | prefill meas / est | decode meas / est | KV end meas / est |"
  echo "|---|---|---|---|---|---|---|"
  python3 - "$out" "$ROOT/target/release/vramcalc" <<'PY'
import json, subprocess, sys, tempfile
mib = lambda b: f"{b / 2**20:,.1f}"
for line in open(sys.argv[1]):
    r = json.loads(line); g = r["generation"]; hf = dict(r["model_extra"]["hf_config"])
    hf["architectures"] = ["GPT2LMHeadModel" if hf["model_type"] == "gpt2" else "LlamaForCausalLM"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(hf, f)
    e = json.loads(subprocess.check_output([sys.argv[2], "estimate", "--hf-config", f.name, "--mode", "generate",
        "--batch", str(r["batch"]), "--precision", r["precision"], "--attention", r["attn_impl"], "--device", "cuda",
        "--prompt-len", str(g["prompt_len"]), "--new-tokens", str(g["new_tokens"]), "--kv-cache", g["cache"],
        "--logits-to-keep", str(g["logits_to_keep"]), "--json"]))
    ph = r.get("phase_peak_bytes", {})
    diff = (e["peak_bytes"] - r["peak_bytes"]) / r["peak_bytes"] * 100
    print(f"| {r['model']} {r['precision']} b{r['batch']} {r['attn_impl']} P{g['prompt_len']} G{g['new_tokens']} {g['cache']} ltk{g['logits_to_keep']} "
          f"| {mib(r['peak_bytes'])} | {mib(e['peak_bytes'])} | {diff:+.2f} % "
          f"| {mib(ph.get('prefill', 0))} / {mib(e['prefill_peak_bytes'])} | {mib(ph.get('decode', 0))} / {mib(e['decode_peak_bytes'])} "
          f"| {mib(r.get('kv_cache_bytes_end', 0))} / {mib(e['kv_cache_bytes'])} |")
PY
}
if [[ "${GENERATE_ONLY:-0}" == 1 ]]; then
  generate_check
  exit $?
fi

command -v nvcc >/dev/null || { echo "gpu-check: nvcc not found: set CUDA_HOME or NVCC_FROM_PIP=1" >&2; exit 2; }
echo "nvcc: $(nvcc --version | tail -2 | head -1); kernels for sm_$CUDA_COMPUTE_CAP" >&2

cargo build --release -p vramcalc-verify --features cuda >&2 || { echo "gpu-check: the CUDA build failed" >&2; exit 2; }
BIN=$ROOT/target/release/vramcalc-verify

"$BIN" gpus || exit 2
"$BIN" probe --device cuda:0 | tee "$ROOT/target/gpu-probe.json"

if [[ "${QUICK:-0}" == 1 ]]; then
  RUNS=("resnet18 8" "resnet34 8" "bert-base 8 128")
else
  RUNS=("resnet18 8" "resnet18 32" "resnet18 64" "resnet34 8" "resnet34 32" "resnet34 64" "bert-base 8 128" "bert-base 32 128")
fi

GPU=$("$BIN" gpus --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["name"])')
rows=()
for r in "${RUNS[@]}"; do
  read -r model batch seq <<<"$r"
  args=(run --device cuda:0 --preset "$model" --batch "$batch" --optimizer "$OPTIMIZER" --steps 3 --tolerance "$TOLERANCE" --json)
  [[ -n "${seq:-}" ]] && args+=(--seq-len "$seq")
  echo "== $model batch $batch ${seq:+seq $seq}" >&2
  out=$("$BIN" "${args[@]}" 2>"$ROOT/target/gpu-check.err")
  rc=$?
  if [[ -z "$out" ]]; then
    rows+=("| $model | $batch | ${seq:--} | error: $(tr '\n' ' ' <"$ROOT/target/gpu-check.err" | cut -c1-120) | | | | | |")
    continue
  fi
  echo "$out" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$RESULTS"
  rows+=("$(OUT="$out" RC=$rc python3 - <<'PY'
import json, os
v = json.loads(os.environ["OUT"])
mib = lambda b: f"{b / 2**20:,.0f}"
c = v.get("cuda", {})
m, e = c.get("measured", {}), c.get("estimated_device", {})
rc = os.environ["RC"]
verdict = "ok" if rc == "0" else ("beyond" if rc == "1" else "error")
shape = v["input_shape"]
seq = shape[0] if len(shape) == 1 else "-"
print(
    f"| {v['model']} | {v['batch']} | {seq} | {mib(v['measured_peak_bytes'])} | {mib(v['estimated_peak_bytes'])} "
    f"| {v['difference_percent']:+.1f} % {verdict} "
    f"| {mib(m.get('driver_peak_bytes', 0))} / {mib(e.get('reserved', 0))} "
    f"| {mib(m.get('driver_used_peak_bytes', 0))} / {mib(e.get('total', 0))} | {v['measurement']} |"
)
PY
)")
done

if [[ "${PYTORCH_REFERENCE:-0}" == 1 && -f "$REFERENCE/measure.py" ]] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "== PyTorch reference (measure.py --device cuda)" >&2
  for r in "${RUNS[@]}"; do
    read -r model batch seq <<<"$r"
    python3 "$REFERENCE/measure.py" --device cuda --model "$model" --batch "$batch" --optimizer "$OPTIMIZER" \
      ${seq:+--seq-len "$seq"} --out "$ROOT/target/gpu-check-pytorch.jsonl" >&2 || echo "measure.py failed for $model $batch" >&2
  done
fi

if [[ "${QLORA:-1}" == 1 ]] && python3 -c 'import torch, transformers, peft, bitsandbytes; assert torch.cuda.is_available()' 2>/dev/null; then
  # vramcalc's bitsandbytes figures are modelled from its source; these runs measure them
  echo "== QLoRA / quantised bases (scripts/qlora_check.py)" >&2
  cargo build --release -p vramcalc-cli >&2 && VRAMCALC=$ROOT/target/release/vramcalc \
    python3 "$ROOT/crates/verify/scripts/qlora_check.py" --out "$ROOT/target/qlora-check.jsonl" \
    || echo "qlora_check.py failed" >&2
else
  echo "== QLoRA runs skipped: torch with CUDA, transformers, peft and bitsandbytes do not all import" >&2
fi

echo
echo "CUDA, candle 0.11, $GPU, $OPTIMIZER, fp32, 3 steps (the 3rd measured); MiB."
echo
echo "| model | batch | seq | measured peak (pool) | estimated (candle profile) | diff | tensors' device memory, driver / estimated reserved | device used, driver / estimated total | measurement |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "every run: $RESULTS" >&2
if [[ "${GENERATE:-0}" == 1 ]]; then
  generate_check
fi

# == Issue 14: quantised weights and vLLM serving capacity (SERVE_CHECK=1; needs vllm, bitsandbytes,
# gptqmodel/autoawq on the GPU machine). What a GPU run must confirm:
#  1. Weights: torch.cuda.memory_allocated() after from_pretrained(quantization_config=…) equals
#     `vramcalc estimate --mode infer --weights F` param_bytes (+ buffers) for nf4, nf4-dq, int8,
#     gptq-int4, awq-int4, fp8 (exact storage layouts: crates/core/src/formats/mod.rs).
#  2. Dequantised temporaries: the peak of one no_grad forward at seq 512 exceeds the weights by the
#     activations plus ONE layer's dequantised weight for nf4 (MatMul4Bit) and awq at ≥ 1024 tokens;
#     none for gptq (Marlin/exllama) — crates/core/src/formats/apply.rs.
#  3. vLLM: the log lines "Available KV cache memory: X GiB" and "GPU KV cache size: N tokens"
#     against `vramcalc serve … --json` kv_pool_bytes and kv_tokens; the modelled parts
#     (activation_peak_bytes, non_torch_bytes, cuda_graph_bytes) against vLLM's debug log of
#     memory_profiling ("torch peak memory increase", "non-torch forward increase", graph pool),
#     for Llama-3.1-8B at TP 1 and 2, --kv-cache-dtype auto|fp8, --max-num-batched-tokens 2048|8192.
if [[ "${SERVE_CHECK:-0}" == 1 ]] && python3 -c 'import vllm' 2>/dev/null; then
  MODEL_ID=${SERVE_MODEL:-meta-llama/Llama-3.1-8B}
  SERVE_GPU=${SERVE_GPU:-h100-80gb}
  CFG=$(python3 -c "from huggingface_hub import hf_hub_download as d; print(d('$MODEL_ID', 'config.json'))")
  for kv in auto fp8; do
    for mbt in 2048 8192; do
      flag=${kv/auto/bf16}
      VLLM_LOGGING_LEVEL=DEBUG python3 - "$MODEL_ID" "$kv" "$mbt" >"$ROOT/target/gpu-check-vllm-$kv-$mbt.log" 2>&1 <<'PY' || echo "vllm run failed: $kv $mbt" >&2
import sys
from vllm import LLM
LLM(model=sys.argv[1], kv_cache_dtype=sys.argv[2], max_num_batched_tokens=int(sys.argv[3]), max_model_len=8192, gpu_memory_utilization=0.9)
PY
      grep -E "Available KV cache memory|GPU KV cache size|Maximum concurrency|memory profiling|graph" \
        "$ROOT/target/gpu-check-vllm-$kv-$mbt.log" >&2 || true
      cargo run --release -q -p vramcalc-cli -- serve --hf-config "$CFG" --gpu "$SERVE_GPU" --context 8192 \
        --kv-dtype "$flag" --max-num-batched-tokens "$mbt" --json >>"$RESULTS"
    done
  done
fi
