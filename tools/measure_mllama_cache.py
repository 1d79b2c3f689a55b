#!/usr/bin/env python3
"""The cache of Llama 3.2 Vision's `generate()` (issue 25): `MllamaForConditionalGeneration` (transformers
5.24) built on CPU from small configs, one image of `max_num_tiles` tiles per sequence, greedy
`generate()` with a dynamic or static cache; records the bytes of every cache layer's keys and values
after the prefill forward (`model(..., use_cache=True)`; a static cache: what it holds at the end,
all of it allocated at its first update) and when `generate()` returns: the
self-attention layers hold the text tokens, the cross-attention layers the image tokens
(`max_num_tiles · ((image_size / patch_size)² + 1)`) once.

    /root/mvenv/bin/python tools/measure_mllama_cache.py --out crates/core/tests/data/hf/mllama_cache.jsonl
"""
import argparse
import json

import torch
import transformers
from transformers import AutoConfig

CONFIGS = [
    dict(vision_config=dict(hidden_size=32, attention_heads=2, intermediate_size=48, num_hidden_layers=3, num_global_layers=1,
                            image_size=28, patch_size=7, max_num_tiles=2, supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]],
                            intermediate_layers_indices=[0, 2], vision_output_dim=96),
         text_config=dict(vocab_size=300, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                          num_hidden_layers=4, cross_attention_layers=[1, 3], pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    dict(vision_config=dict(hidden_size=16, attention_heads=1, intermediate_size=24, num_hidden_layers=2, num_global_layers=2,
                            image_size=16, patch_size=4, max_num_tiles=4, intermediate_layers_indices=[1], vision_output_dim=32),
         text_config=dict(vocab_size=500, hidden_size=32, num_attention_heads=2, num_key_value_heads=1, intermediate_size=40,
                          num_hidden_layers=3, cross_attention_layers=[0], pad_token_id=0, bos_token_id=1, eos_token_id=2)),
]


def cache_bytes(cache):
    total = 0
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    for i, kw in enumerate(CONFIGS):
        cfg = AutoConfig.for_model("mllama", **kw)
        cfg.architectures = ["MllamaForConditionalGeneration"]
        model = transformers.MllamaForConditionalGeneration(cfg).eval()
        v = cfg.vision_config
        runs = [(torch.float32, 1, 12, 5, "dynamic"), (torch.bfloat16, 2, 9, 4, "dynamic"), (torch.float32, 2, 7, 3, "static")]
        for dtype, batch, prompt, new, cache in runs:
            # transformers 5.24's static cache fails with a cross-attention layer at index 0
            # (`get_seq_length()` reads layer 0: the image length, not the text's)
            if cache == "static" and 0 in cfg.text_config.cross_attention_layers:
                continue
            m = model.to(dtype)
            ids = torch.randint(3, cfg.text_config.vocab_size, (batch, prompt))
            pix = torch.randn(batch, 1, v.max_num_tiles, v.num_channels, v.image_size, v.image_size, dtype=dtype)
            inputs = dict(input_ids=ids, pixel_values=pix, aspect_ratio_ids=torch.ones(batch, 1, dtype=torch.long),
                          aspect_ratio_mask=torch.ones(batch, 1, v.max_num_tiles, dtype=torch.long))
            with torch.no_grad():
                prefill = m(**inputs, use_cache=True)
                out = m.generate(**inputs, max_new_tokens=new, min_new_tokens=new, do_sample=False, return_dict_in_generate=True,
                                 cache_implementation=None if cache == "dynamic" else "static")
            pc = getattr(prefill, "cache", None) or prefill.past_key_values
            gc = getattr(out, "cache", None) or out.past_key_values
            # the prefill forward above runs with a dynamic cache; a static cache allocates every slot
            # at its first update, so what it holds after the prefill is what it holds at the end
            after = cache_bytes(pc) if cache == "dynamic" else cache_bytes(gc)
            rows.append({"config": json.loads(cfg.to_json_string()), "dtype": str(dtype).split(".")[1], "batch": batch, "prompt_len": prompt,
                         "new_tokens": new, "cache": cache, "kv_cache_bytes_after_prefill": after, "kv_cache_bytes_end": cache_bytes(gc)})
            print(i, rows[-1]["dtype"], cache, rows[-1]["kv_cache_bytes_after_prefill"], rows[-1]["kv_cache_bytes_end"], flush=True)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
