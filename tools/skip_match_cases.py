#!/usr/bin/env python3
"""Skip-list matching as the loaders do it, for `crates/core/tests/quant_skip.rs`.

For each (pattern, module name): transformers 5.24 `quantizers_utils.should_convert_module`
(kept = not converted) and compressed-tensors 0.20 `utils.match.match_name` (an `ignore` entry).
Patterns: the ones hub checkpoints use and random compositions of their parts; names: the
modules of LLaMA-, MoE- and VLM-style models. A pattern Python's `re` refuses is recorded as such.

    /root/mvenv/bin/python tools/skip_match_cases.py   # -> crates/core/tests/data/skip_match_cases.json
"""
import json
import os
import random
import re

from compressed_tensors.utils.match import match_name
from transformers.quantizers.quantizers_utils import should_convert_module

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "core", "tests", "data", "skip_match_cases.json")

NAMES = [
    "lm_head", "model.embed_tokens", "model.norm", "model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.o_proj",
    "model.layers.11.self_attn.k_proj", "model.layers.1.mlp.gate_proj", "model.layers.1.mlp.gate", "model.layers.3.mlp.router",
    "model.layers.3.mlp.experts", "model.layers.2.mlp.shared_expert.down_proj", "model.layers.2.mlp.shared_experts.up_proj",
    "model.layers.10.mlp.down_proj", "model.visual.blocks.0.attn.qkv", "visual.merger.mlp.0", "model.language_model.layers.0.mlp.up_proj",
    "model.layers.0.self_attn.kv_a_proj_with_mqa", "model.layers.0.self_attn.q_a_proj", "model.decoder.layers.23.fc1", "", "model.layers.",
]
FIXED = [
    "lm_head", "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "mlp.gate", "visual", "layer.1",
    "model.layers.1", "fc1", "down_proj", "model.layers.0", "re:.*mlp.gate$", "re:.*self_attn.*", "re:model\\.layers\\.0\\..*",
    "re:.*gate$", "re:.*kv_a_proj_with_mqa$", "re:vision_tower.*", "re:visual", "model.layers.1.mlp", "mlp", "", ".", "re:", "*",
    "(", "model.layers.[0-9]+.mlp", "re:model.layers.(1|3).*", "gate|router", "experts", "re:.*experts", "model\\.layers\\.1$",
]
PARTS = ["model", "layers", "1", "11", "*", "[0-9]+", "self_attn", "mlp", "gate", "gate_proj", "experts", "lm_head", "visual", "(a|b)", "re:", ".*", "\\.", "$", "^"]


def main():
    rnd = random.Random(25)
    pats = list(FIXED)
    for _ in range(120):
        pats.append(".".join(rnd.choice(PARTS) for _ in range(rnd.randint(1, 4))))
    # per pattern: one character per name, `1` kept, `0` converted, `e` Python's re refuses it
    def kept(f):
        try:
            return "1" if f() else "0"
        except re.error:
            return "e"
    cases = []
    for p in dict.fromkeys(pats):
        t = "".join(kept(lambda: not should_convert_module(n, [p])) for n in NAMES)
        c = "".join(kept(lambda: match_name(n, p)) for n in NAMES)
        cases.append([p, t, c])
    with open(OUT, "w") as f:
        json.dump({"note": "tools/skip_match_cases.py: [pattern, transformers, compressed-tensors] per name", "names": NAMES, "cases": cases}, f, indent=0)
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
