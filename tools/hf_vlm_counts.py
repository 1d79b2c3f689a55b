#!/usr/bin/env python3
"""Exact parameter counts of the image-text classes (issue 25): `Qwen2_5_VLForConditionalGeneration`,
`LlavaForConditionalGeneration`, `PaliGemmaForConditionalGeneration`, `SiglipModel`, `MllamaForConditionalGeneration`.

Builds each class on the meta device (nothing allocated, nothing downloaded) from `AutoConfig.for_model`
with the library defaults (`<type>-default`) and from random valid small configs (`<type>-<i>`), and
writes `{name: {architecture, params, config}}`, `params = sum(p.numel() for p in model.parameters())`,
`config` as `to_json_string()` writes it (the diff from the defaults, sub-configs in full).

    /root/mvenv/bin/python tools/hf_vlm_counts.py --seed 25 --per-type 4 \\
        --types qwen2_5_vl llava paligemma siglip --out crates/core/tests/data/hf/vlm_counts.json
    /root/mvenv/bin/python tools/hf_vlm_counts.py --seed 25 --per-type 4 \\
        --types mllama --out crates/core/tests/data/hf/mllama_counts.json    # torch 2.15, transformers 5.24
"""
import argparse
import json
import random

import torch
import transformers
from transformers import AutoConfig

CLASSES = {"qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration", "llava": "LlavaForConditionalGeneration",
           "paligemma": "PaliGemmaForConditionalGeneration", "siglip": "SiglipModel",
           "mllama": "MllamaForConditionalGeneration"}
RND = random.Random()
# Qwen2_5_VLConfig's defaults cannot run: the merger writes 3584-wide image tokens into the
# 8192-wide text embeddings (the importer refuses that by name); the default entry widens the merger
DEFAULT_KW = {"qwen2_5_vl": {"vision_config": {"out_hidden_size": 8192}}}


def pick(*xs):
    return RND.choice(xs)


def text(mt):
    heads, hd = pick(1, 2, 4), pick(8, 16, 32)
    kv = pick(*[k for k in (1, 2, 4) if heads % k == 0])
    return dict(model_type=mt, vocab_size=RND.randint(300, 3000), hidden_size=heads * hd, intermediate_size=RND.randint(8, 300),
                num_hidden_layers=RND.randint(1, 3), num_attention_heads=heads, num_key_value_heads=kv)


def gen(mt):
    vheads, vhd = pick(1, 2, 4), pick(8, 16)
    vision = dict(hidden_size=vheads * vhd, num_attention_heads=vheads, intermediate_size=RND.randint(8, 200),
                  num_hidden_layers=RND.randint(1, 3))
    if mt == "qwen2_5_vl":
        t = text("qwen2_5_vl_text")
        del t["model_type"]
        vision = dict(depth=RND.randint(1, 3), hidden_size=vheads * vhd, num_heads=vheads, intermediate_size=RND.randint(8, 200),
                      out_hidden_size=t["hidden_size"], in_channels=pick(1, 3), patch_size=pick(7, 14),
                      temporal_patch_size=pick(1, 2), spatial_merge_size=2, fullatt_block_indexes=[0])
        # flat text fields (as the hub's Qwen2.5-VL configs are written) or a text_config
        base = dict(vision_config=vision, tie_word_embeddings=pick(True, False))
        if pick(True, False):
            base.update(t)
        else:
            base["text_config"] = t
        return base
    if mt == "llava":
        patch = pick(4, 8, 14)
        vision.update(model_type="clip_vision_model", image_size=patch * RND.randint(1, 6), patch_size=patch, num_channels=pick(1, 3))
        return dict(vision_config=vision, text_config=text(pick("llama", "mistral", "qwen2")), multimodal_projector_bias=pick(True, False),
                    vision_feature_select_strategy=pick("default", "full"), tie_word_embeddings=pick(True, False))
    if mt == "mllama":
        return mllama(vision)
    if mt == "siglip":
        patch = pick(4, 8, 16)
        t = dict(hidden_size=vision["hidden_size"], num_attention_heads=vision["num_attention_heads"], intermediate_size=RND.randint(8, 200),
                 num_hidden_layers=RND.randint(1, 3), vocab_size=RND.randint(50, 3000), max_position_embeddings=RND.randint(4, 80))
        vision.update(image_size=patch * RND.randint(1, 6), patch_size=patch, num_channels=pick(1, 3))
        return dict(vision_config=vision, text_config=t)
    patch = pick(4, 8, 14)
    vision.update(model_type="siglip_vision_model", image_size=patch * RND.randint(1, 6), patch_size=patch, vision_use_head=False)
    t = text("gemma")
    # the projector's output is written into the text embeddings: projection_dim is the text width
    return dict(vision_config=vision, text_config=t, projection_dim=t["hidden_size"], tie_word_embeddings=pick(True, False))


def mllama(vision):
    """A valid Llama 3.2 Vision config: the aspect ratios of `max_num_tiles` tiles (MllamaVisionConfig
    refuses the default list with another tile count), `vision_output_dim` the concatenated width."""
    tiles, patch = pick(1, 2, 3, 4), pick(4, 7, 14)
    n = RND.randint(2, 5)
    idx = sorted(RND.sample(range(n), RND.randint(1, min(3, n))))
    vision["attention_heads"] = vision.pop("num_attention_heads")
    vision.update(num_hidden_layers=n, num_global_layers=RND.randint(1, 3), image_size=patch * RND.randint(1, 5), patch_size=patch,
                  num_channels=pick(1, 3), max_num_tiles=tiles, intermediate_layers_indices=idx,
                  supported_aspect_ratios=[[a, b] for a in range(1, tiles + 1) for b in range(1, tiles + 1) if a * b <= tiles],
                  vision_output_dim=vision["hidden_size"] * (len(idx) + 1))
    t = text("mllama_text_model")
    del t["model_type"]
    t["num_hidden_layers"] = n_text = RND.randint(2, 5)
    t["cross_attention_layers"] = sorted(RND.sample(range(n_text), RND.randint(1, n_text - 1)))
    # MllamaTextConfig's token ids (128000…) lie outside a small vocabulary: nn.Embedding refuses the padding index
    t.update(pad_token_id=RND.randint(0, t["vocab_size"] - 1), bos_token_id=0, eos_token_id=1)
    return dict(vision_config=vision, text_config=t)


def count(mt, kwargs, arch=None):
    """`{architecture, params, config}` of class `arch` (default: `CLASSES[mt]`) built from `kwargs`."""
    arch = arch or CLASSES[mt]
    cfg = AutoConfig.for_model(mt, **kwargs)
    cfg.architectures = [arch]
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    config = {k: v for k, v in json.loads(cfg.to_json_string()).items() if k != "transformers_version"}
    return {"architecture": arch, "params": sum(p.numel() for p in model.parameters()), "config": config}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--per-type", type=int, default=4)
    ap.add_argument("--types", nargs="+", default=list(CLASSES))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    RND.seed(args.seed)
    out = {}
    for mt in args.types:
        out[f"{mt}-default"] = count(mt, DEFAULT_KW.get(mt, {}))
        for i in range(args.per_type):
            out[f"{mt}-{i}"] = count(mt, gen(mt))
        print(mt, out[f"{mt}-default"]["params"], flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, sort_keys=True, indent=1)
    print(f"{len(out)} classes written to {args.out}")


if __name__ == "__main__":
    main()
