#!/usr/bin/env python3
"""Writes the GGUF header the browser tests of the llama.cpp panel serve (tests/local.test.mjs).

A small qwen3moe model with random Q8_0 weights, written with the `gguf` package by
`make_model` of tools/measure_llama_cpp.py (the writer of the measured records), then cut after
its tensor infos (padded to the data section): the app reads only a header. Its 40,000-token
vocabulary makes the header about 0.9 MB, so reading it by HTTP `Range` takes several requests.

    /root/mvenv/bin/python tools/make_app_gguf.py   # -> tests/data/gguf/tiny-qwen3moe-Q8_0.gguf
                                                   #    and tests/data/gguf/tiny-jamba-Q8_0.gguf

The second is a small jamba (Mamba-1 and attention layers, tools/llama_cpp/measure_recurrent.py's
writer): its recurrent state is the panel's own column.
"""
import os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from measure_llama_cpp import make_model, header_bytes  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tools", "llama_cpp"))
from measure_recurrent import make_jamba, SPECS as RECURRENT  # noqa: E402

MODEL = dict(arch="qwen3moe", wtype="Q8_0", n_embd=64, n_layer=4, n_head=4, n_head_kv=2, head_dim=16,
             n_ff=128, n_vocab=40000, n_expert=4, n_expert_used=2, n_ff_exp=32, n_ctx_train=32768)

def main():
    tmp = "/tmp/tiny-qwen3moe-Q8_0.gguf"
    make_model(tmp, MODEL)
    out = os.path.join(ROOT, "tests/data/gguf/tiny-qwen3moe-Q8_0.gguf")
    data = header_bytes(tmp)
    with open(out, "wb") as f:
        f.write(data)
    print(out, len(data), "bytes of", os.path.getsize(tmp))
    tmp = "/tmp/tiny-jamba-Q8_0.gguf"
    make_jamba(tmp, RECURRENT["jamba-q8_0"])
    out = os.path.join(ROOT, "tests/data/gguf/tiny-jamba-Q8_0.gguf")
    data = header_bytes(tmp)
    with open(out, "wb") as f:
        f.write(data)
    print(out, len(data), "bytes of", os.path.getsize(tmp))

if __name__ == "__main__":
    main()
