#!/usr/bin/env python3
"""The module names of transformers 5.24's image-text classes, for the importers' layer names
(`crates/core/tests/import_vlm.rs`): each small config of `tests/data/hf/vlm_counts.json`
(`llava-0`, `paligemma-0`, `qwen2_5_vl-0`) and a small Gemma 3, built on the meta device, and the
full name of every module (`named_modules()`) with its class.

Output: `crates/core/tests/data/hf/vlm_module_names.json`.

    /root/mvenv/bin/python tools/vlm_module_names.py
"""
import json
import os

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "crates", "core", "tests", "data", "hf")
GEMMA3 = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 4,
    "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 300, "sliding_window": 16},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 2, "image_size": 32, "patch_size": 8, "vision_use_head": False},
}


def modules(cfg):
    config = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    with torch.device("meta"):
        model = getattr(transformers, cfg["architectures"][0])(config)
    return {n: type(m).__name__ for n, m in model.named_modules() if n}


def main():
    counts = json.load(open(os.path.join(DATA, "vlm_counts.json")))
    cases = [{"case": k, "config": counts[k]["config"]} for k in ("llava-0", "paligemma-0", "qwen2_5_vl-0")]
    cases.append({"case": "gemma3-small", "config": GEMMA3})
    for c in cases:
        c["modules"] = modules(c["config"])
    out = os.path.join(DATA, "vlm_module_names.json")
    json.dump({"transformers": transformers.__version__, "cases": cases}, open(out, "w"), indent=1, sort_keys=True)
    for c in cases:
        print(c["case"], len(c["modules"]))


if __name__ == "__main__":
    main()
