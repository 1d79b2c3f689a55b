#!/usr/bin/env python3
"""Peak live-tensor bytes of a Qwen2.5-VL training step or inference forward, traced op by op.

`tools/trace_hf.py`'s `LiveBytes` (every live storage after each aten op), but on real CPU tensors:
Qwen2.5-VL's vision tower reads its windows from the image grid with `.tolist()` and boolean
indexing (`vision_utils.get_vision_window_index`, `torch.split(..., lengths.tolist())` in
`Qwen2_5_VLVisionAttention.forward`), data-dependent steps FakeTensorMode cannot run. The configs
are tiny (one thread, fp32, eager attention, no dropout), so running them for real is cheap, and
the memory is the same as the fake run's would be.

One image of `--image W H` pixels, resized as `Qwen2VLImageProcessor` does (`smart_resize`), its
patches as the processor lays them out (`[grid_t·grid_h·grid_w, C·T·P·P]`), and a prompt of
`--seq-len` tokens: `<vision_start>`, the image's merged tokens, then text. `--mode train`: forward
with `labels=input_ids`, backward, from `zero_grad(set_to_none=True)` (compare with `vramcalc
estimate … --optimizer sgd`); `--mode infer`: the forward under `torch.no_grad()` with
`use_cache=False` (a scoring forward, vramcalc's `--mode infer`); `--mode generate --new-tokens N`:
a real greedy `model.generate()` of N new tokens on the prompt (vramcalc's `--mode generate
--new-tokens N`: its own dynamic cache, `logits_to_keep=1`), given what `Qwen2_5_VLProcessor` gives
it — `input_ids`, an all-ones `attention_mask`, `pixel_values`, `image_grid_thw` and
`mm_token_type_ids` (1 at the image tokens: `return_mm_token_type_ids = True`), so `generate()`
computes the 3-D rope positions (`get_rope_index`) — with `eos_token_id` unset so that it makes
all N tokens. The caller's tensors are tracked from the start (compare with `--batch 1`). A
generate record also carries its phases and cache as `tools/trace_vlm_generate.py` splits them
(the same hooks): `prefill_peak_bytes` (up to the start of the second forward: the tower, the
prefill forward and the first token's selection), `decode_peak_bytes` (after it), and
`kv_cache_bytes_after_prefill` / `kv_cache_bytes_end` (every layer's keys and values).

    /root/mvenv/bin/python tools/trace_qwen_vl.py CONFIG --image 252 196 --seq-len 128 --mode train

Output: one JSON line (`tests/data/hf/qwen_vl_traces.jsonl`; `tools/trace_qwen_vl.sh` writes them all).
"""
import argparse
import copy
import json
import os
import sys

import torch

torch.set_num_threads(1)
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from trace_hf import LiveBytes  # noqa: E402
from trace_vlm_generate import cache_bytes, cache_of, split_phases  # noqa: E402


def smart_resize(height, width, factor, min_pixels, max_pixels):
    """`image_processing_qwen2_vl.smart_resize` (transformers 5.24; that module needs torchvision)."""
    import math
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--image", type=int, nargs=2, metavar=("W", "H"), default=[252, 196])
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--mode", choices=["train", "infer", "generate"], default="train")
    ap.add_argument("--new-tokens", type=int, default=8, help="--mode generate: max_new_tokens")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    a = ap.parse_args()
    cfgd = json.load(open(a.config))
    given = copy.deepcopy(cfgd)  # the config class rewrites nested dicts in place
    cfg = transformers.AutoConfig.for_model(cfgd["model_type"], **{k: v for k, v in cfgd.items() if k not in ("architectures", "model_type")})
    cfg._attn_implementation = a.attn
    cfg.vision_config._attn_implementation = a.attn
    cfg.text_config._attn_implementation = a.attn
    v = cfg.vision_config
    factor = v.patch_size * v.spatial_merge_size
    h, w = smart_resize(a.image[1], a.image[0], factor=factor, min_pixels=56 * 56, max_pixels=28 * 28 * 1280)
    gh, gw = h // v.patch_size, w // v.patch_size
    n_patches = gh * gw
    n_tokens = n_patches // v.spatial_merge_size ** 2
    torch.manual_seed(0)
    model = transformers.Qwen2_5_VLForConditionalGeneration(cfg)
    model.train(a.mode == "train")
    pixels = torch.randn(a.batch * n_patches, v.in_channels * v.temporal_patch_size * v.patch_size ** 2)
    grid = torch.tensor([[1, gh, gw]] * a.batch)
    vocab = cfg.text_config.vocab_size
    ids = torch.randint(0, min(cfg.image_token_id, cfg.vision_start_token_id, cfg.video_token_id, cfg.vision_end_token_id), (a.batch, a.seq_len))
    ids[:, 0] = cfg.vision_start_token_id
    ids[:, 1:1 + n_tokens] = cfg.image_token_id
    ids[:, 1 + n_tokens] = cfg.vision_end_token_id
    assert 2 + n_tokens <= a.seq_len and max(cfg.image_token_id, cfg.vision_start_token_id) < vocab
    tracker = LiveBytes()
    mask = torch.ones_like(ids)
    types = (ids == cfg.image_token_id).long()  # the processor's mm_token_type_ids: 1 = image
    for t in [*model.parameters(), *model.buffers(), pixels, ids, grid]:
        tracker.track(t)
    if a.mode == "generate":
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
        for t in (mask, types):
            tracker.track(t)
    phases = split_phases(model, tracker) if a.mode == "generate" else {}
    with tracker:
        if a.mode == "generate":
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=mask, pixel_values=pixels, image_grid_thw=grid,
                                     mm_token_type_ids=types, max_new_tokens=a.new_tokens, do_sample=False,
                                     return_dict_in_generate=True)
            assert out.sequences.shape[1] == a.seq_len + a.new_tokens, out.sequences.shape
            phases = {"prefill_peak_bytes": phases["prefill"], "decode_peak_bytes": tracker.peak, "forward_calls": phases["calls"],
                      "kv_cache_bytes_after_prefill": phases["kv_prefill"], "kv_cache_bytes_end": cache_bytes(cache_of(out))}
        elif a.mode == "train":
            loss = model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, labels=ids).loss
            loss.backward()
        else:
            with torch.no_grad():
                model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, logits_to_keep=0, use_cache=False)
    print(json.dumps({
        "family": "qwen2_5_vl", "class": "Qwen2_5_VLForConditionalGeneration", "mode": a.mode, "batch": a.batch,
        "seq_len": a.seq_len, "image": a.image, "resized": [w, h], "image_tokens": n_tokens, "attention": a.attn,
        "dtype": "fp32", "measured_peak_bytes": max(tracker.peak, phases.get("prefill_peak_bytes", 0)), "config": given,
        "command": f"python tools/trace_qwen_vl.py CONFIG --image {a.image[0]} {a.image[1]} --seq-len {a.seq_len} --batch {a.batch} --mode {a.mode} --attn {a.attn}"
                   + (f" --new-tokens {a.new_tokens}" if a.mode == "generate" else ""),
        **({"new_tokens": a.new_tokens, **phases} if a.mode == "generate" else {}),
        "transformers": transformers.__version__, "torch": torch.__version__,
    }, sort_keys=True))


if __name__ == "__main__":
    main()
