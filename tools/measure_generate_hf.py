#!/usr/bin/env python3
"""A `generate()` of any Hugging Face causal LM config, measured as `shared/reference/llm/measure_llm.py`'s
`kvcache` family measures GPT-2 and LLaMA (FakeTensorMode + MemTracker, its `generate_mirror` of
transformers 5.24's `generate()` -> `_sample()`): that script builds only its two named families, so
this one swaps its model builder for the class named in CONFIG's `architectures`, then runs it.

    python tools/measure_generate_hf.py CONFIG --batch 1 --prompt-len 128 --new-tokens 16 --cache dynamic [--attn eager]

Prints measure_llm.py's record (one JSON line); everything after CONFIG is passed to it.
"""
import json
import os
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference", "llm"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference"))
import measure_llm  # noqa: E402


def main():
    path, rest = sys.argv[1], sys.argv[2:]
    d = json.load(open(path))
    attn = "eager"
    if "--attn" in rest:
        attn = rest[rest.index("--attn") + 1]
        i = rest.index("--attn")
        del rest[i:i + 2]

    def build(model, attn_impl, dtype, device="cpu"):
        cfg = transformers.AutoConfig.for_model(d["model_type"], **{k: v for k, v in d.items() if k not in ("architectures", "model_type")})
        cfg._attn_implementation = attn_impl
        m = getattr(transformers, d["architectures"][0])(cfg)
        if dtype != torch.float32:
            m = m.to(dtype)
        return measure_llm.M._to(m, device)

    measure_llm.build_causal_lm = build
    sys.argv = ["measure_llm.py", "--family", "kvcache", "--model", "llama-h1024-l4", "--attn-impl", attn, *rest]
    measure_llm.main()


if __name__ == "__main__":
    main()
