#!/usr/bin/env python3
"""The README's table of popular GGUFs under llama.cpp on a 24 GB card, from the CLI.

Each row is `vramcalc llama-cpp --hf-config CONFIG --quant Q4_K_M -c N -fa on --gpu rtx-4090
[--n-cpu-moe L]`: the tensor list llama-quantize's Q4_K_M mix gives that config (no file needed),
the buffers llama.cpp allocates per device, and the llama-server line that runs it.

    python3 tools/llama_cpp_table.py      # run from the checkout (builds the release CLI)
"""
import json
import subprocess
import sys

CONFIGS = "crates/core/src/presets/configs"
ROWS = [
    ("Qwen3-8B", f"{CONFIGS}/qwen3-8b.json", []),
    ("Llama-3.1-70B", f"{CONFIGS}/llama-3.1-70b.json", []),
    ("Qwen3-30B-A3B, experts on the CPU", f"{CONFIGS}/qwen3-30b-a3b.json", ["--n-cpu-moe", "48"]),
]
GIB = 1 << 30


def run(config, ctx, extra):
    cmd = ["cargo", "run", "--release", "-q", "-p", "vramcalc-cli", "--", "llama-cpp", "--hf-config", config, "--quant", "Q4_K_M",
           "-c", str(ctx), "-fa", "on", "--gpu", "rtx-4090", "--json", *extra]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"llama_cpp_table: {' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def main():
    print("| model (Q4_K_M) | context | GPU: model + KV + compute | CPU (RAM) | fits 24 GB | most GPU layers | largest context |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for name, config, extra in ROWS:
        for ctx in (8192, 32768):
            v = run(config, ctx, extra)
            gpu = next(d for d in v["devices"] if d["name"] != "CPU")
            cpu = next((d for d in v["devices"] if d["name"] == "CPU"), {"total_bytes": 0})
            # `-ngl` counts the output layer as one more: n_layer + 1 is every layer
            ngl = v["max_gpu_layers"]
            layers = "all" if ngl is not None and ngl > v["n_layer"] else f"{ngl} of {v['n_layer']}"
            most = "—" if v["max_context"] is None else f"{v['max_context']:,}"
            print(f"| {name} | {ctx // 1024} k | {gpu['total_bytes'] / GIB:.2f} GiB | {cpu['total_bytes'] / GIB:.2f} GiB | "
                  f"{'yes' if gpu['fits'] else 'no'} | {layers} | {most} |")


if __name__ == "__main__":
    main()
