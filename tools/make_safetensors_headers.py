#!/usr/bin/env python3
"""Real safetensors headers and an index, for `crates/core/tests/safetensors.rs`.

1. A tiny `LlamaForCausalLM` (the `LLAMA` config of tools/measure_quant_layouts.py) in bf16,
   written by transformers' own `save_pretrained(max_shard_size="1MB")`: the shards'
   `model.safetensors.index.json` and each shard's header (its first 8 + n bytes: the data is
   not needed to size the file, and is left out to keep the test data small).
2. The same model under compressed-tensors W4A16 (`apply_quantization_config` +
   `compress_model`, as transformers loads it), its state dict written by
   `safetensors.torch.save_file` — the checkpoint as stored.

Each header file is saved with the full file's size beside it (`sizes.json`).

    /root/mvenv/bin/python tools/make_safetensors_headers.py
"""
import copy
import json
import os
import struct
import sys
import tempfile

import torch

torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(__file__))
from measure_quant_layouts import LLAMA, base_model  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "core", "tests", "data", "safetensors")


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        f.seek(0)
        return f.read(8 + n)


def main():
    os.makedirs(OUT, exist_ok=True)
    sizes = {}
    torch.manual_seed(0)
    model = base_model(LLAMA, device="cpu")
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d, max_shard_size="1MB")
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if name.endswith(".safetensors"):
                with open(os.path.join(OUT, f"llama-bf16.{name}.header"), "wb") as f:
                    f.write(header_of(p))
                sizes[f"llama-bf16.{name}.header"] = os.path.getsize(p)
            elif name == "model.safetensors.index.json":
                with open(p) as src, open(os.path.join(OUT, "llama-bf16.index.json"), "w") as dst:
                    dst.write(src.read())
            elif name == "config.json":
                with open(p) as src, open(os.path.join(OUT, "llama-bf16.config.json"), "w") as dst:
                    dst.write(src.read())

    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import apply_quantization_config
    from safetensors.torch import save_file
    from transformers.utils.quantization_config import CompressedTensorsConfig

    q = {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128, "dynamic": False, "observer": "minmax"}, "input_activations": None, "output_activations": None}},
    }
    qc = CompressedTensorsConfig.from_dict(copy.deepcopy(q))
    qc.post_init()
    comp = ModelCompressor.from_compression_config(qc)
    ct = copy.deepcopy(model)
    apply_quantization_config(ct, copy.deepcopy(comp.quantization_config), run_compressed=False)
    comp.compress_model(model=ct)
    sd = {k: v.contiguous() for k, v in ct.state_dict().items()}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "model.safetensors")
        save_file(sd, p, metadata={"format": "pt"})
        with open(os.path.join(OUT, "llama-ct-w4a16.model.safetensors.header"), "wb") as f:
            f.write(header_of(p))
        sizes["llama-ct-w4a16.model.safetensors.header"] = os.path.getsize(p)
    cfg = dict(LLAMA, quantization_config=q)
    with open(os.path.join(OUT, "llama-ct-w4a16.config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(OUT, "sizes.json"), "w") as f:
        json.dump(sizes, f, indent=1, sort_keys=True)
    print(json.dumps(sizes, indent=1))


if __name__ == "__main__":
    main()
