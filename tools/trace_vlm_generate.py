#!/usr/bin/env python3
"""Peak live-tensor bytes of a greedy `model.generate()` of an image-text model, traced op by op.

`tools/trace_qwen_vl.py --mode generate`'s method (real CPU tensors, `trace_hf.LiveBytes`: every
live storage after each aten op; one thread, fp32, eager or SDPA, transformers' own dynamic
cache, `logits_to_keep=1`, `eos_token_id` unset so that it makes all N tokens) for LLaVA,
PaliGemma, Gemma 3 (`Gemma3ForConditionalGeneration`) and Llama 3.2 Vision
(`MllamaForConditionalGeneration`). The inputs are what each processor gives `generate()`:

* llava: `input_ids` whose first `(image_size / patch_size)²` tokens are `image_token_index`
  (`vision_feature_select_strategy` "default": the CLS row dropped), `attention_mask`,
  `pixel_values [B, C, H, W]`;
* paligemma / gemma3: the same with `mm_tokens_per_image` / `num_image_tokens` image tokens, and
  `token_type_ids` (1 at the image tokens: the processors' `return_token_type_ids`);
* mllama: one image of `max_num_tiles` tiles (`pixel_values [B, 1, T, C, H, W]`, aspect-ratio id
  1, every tile present), no `cross_attention_mask` (every token sees the whole image: as
  `tools/trace_hf.py`'s training records).

Phases, as `shared/reference/llm/measure_llm.py`'s `generate_mirror` splits them: the prefill is
everything up to the start of the second forward (the tower, which runs before the first forward
in `_prepare_multimodal_encoder_kwargs_for_generation` for the models that take
`mm_encoder_outputs`, the prefill forward and the selection of the first new token), the decode
everything after; the cache bytes (every layer's keys and
values, mllama's cross-attention layers' image keys too) after the first forward and at the end.
The caller's tensors are tracked from the start (compare with `--batch 1`).

    /root/mvenv/bin/python tools/trace_vlm_generate.py tools/generate_configs/llava.json --seq-len 96 --new-tokens 8

Output: one JSON line (`crates/core/tests/data/generate_vlm2.jsonl`; `tools/measure_generate_vlm2.sh`).
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


def cache_bytes(cache):
    """Bytes of the distinct storages of every layer's keys and values."""
    seen = {}
    for layer in getattr(cache, "layers", []):
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor) and t.numel() > 0:
                st = t.untyped_storage()
                seen[st._cdata] = st.nbytes()
    return sum(seen.values())


def cache_of(out):
    """The cache an output carries (`cache` in transformers 5.24, `past_key_values` before)."""
    c = getattr(out, "cache", None)
    return c if c is not None else getattr(out, "past_key_values", None)


def split_phases(model, tracker, bytes_of=cache_bytes):
    """Hooks on `model`'s forward that split a `generate()` in two, as `generate_mirror` does: at
    the start of the second forward the peak so far is the prefill's (`phases["prefill"]`) and
    the tracker's peak restarts from what is live (the decode's from there); after the first
    forward, `phases["kv_prefill"]` is `bytes_of` its cache. `phases["calls"]` counts forwards."""
    phases = {"calls": 0}

    def traced(_module, _args, out):
        phases["calls"] += 1
        if phases["calls"] == 1:
            phases["kv_prefill"] = bytes_of(cache_of(out))

    def second(_module, _args):
        if phases["calls"] == 1 and "prefill" not in phases:
            phases["prefill"] = tracker.peak
            tracker.peak = tracker.total()  # the decode phase from here
    model.register_forward_hook(traced)
    model.register_forward_pre_hook(second)
    return phases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--seq-len", type=int, default=96, help="the prompt's tokens, image tokens included")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    a = ap.parse_args()
    cfgd = json.load(open(a.config))
    given = copy.deepcopy(cfgd)  # the config classes rewrite nested dicts in place
    arch = cfgd["architectures"][0]
    cfg = transformers.AutoConfig.for_model(cfgd["model_type"], **{k: v for k, v in cfgd.items() if k not in ("architectures", "model_type")})
    for c in (cfg, cfg.vision_config, cfg.text_config):
        c._attn_implementation = a.attn
    torch.manual_seed(0)
    model = getattr(transformers, arch)(cfg)
    model.eval()
    v, t = cfg.vision_config, cfg.text_config
    kind = cfgd["model_type"]
    extra = {}
    if kind == "mllama":
        ids = torch.randint(3, t.vocab_size, (a.batch, a.seq_len))
        pixels = torch.randn(a.batch, 1, v.max_num_tiles, v.num_channels, v.image_size, v.image_size)
        extra = {"aspect_ratio_ids": torch.ones(a.batch, 1, dtype=torch.long),
                 "aspect_ratio_mask": torch.ones(a.batch, 1, v.max_num_tiles, dtype=torch.long)}
        n = 0
    else:
        image_id = cfg.image_token_id
        if kind == "llava":
            n = (v.image_size // v.patch_size) ** 2 + (cfg.vision_feature_select_strategy == "full")
        elif kind == "gemma3":
            n = cfg.mm_tokens_per_image
        else:
            n = t.num_image_tokens
        ids = torch.randint(3, image_id - 3, (a.batch, a.seq_len))
        ids[:, :n] = image_id
        pixels = torch.randn(a.batch, v.num_channels, v.image_size, v.image_size)
        if kind in ("gemma3", "paligemma"):
            extra = {"token_type_ids": (ids == image_id).long()}
    mask = torch.ones_like(ids)
    tracker = LiveBytes()
    for x in [*model.parameters(), *model.buffers(), pixels, ids, mask, *extra.values()]:
        tracker.track(x)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    phases = split_phases(model, tracker)
    with tracker, torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, pixel_values=pixels, max_new_tokens=a.new_tokens,
                             do_sample=False, return_dict_in_generate=True, **extra)
    assert out.sequences.shape[1] == a.seq_len + a.new_tokens, out.sequences.shape
    decode = tracker.peak
    print(json.dumps({
        "family": kind, "class": arch, "mode": "generate", "batch": a.batch, "seq_len": a.seq_len,
        "new_tokens": a.new_tokens, "image_tokens": n, "attention": a.attn, "dtype": "fp32",
        "measured_peak_bytes": max(phases["prefill"], decode), "prefill_peak_bytes": phases["prefill"],
        "decode_peak_bytes": decode, "kv_cache_bytes_after_prefill": phases["kv_prefill"],
        "kv_cache_bytes_end": cache_bytes(cache_of(out)), "forward_calls": phases["calls"], "config": given,
        "command": f"python tools/trace_vlm_generate.py CONFIG --seq-len {a.seq_len} --batch {a.batch} --new-tokens {a.new_tokens} --attn {a.attn}",
        "transformers": transformers.__version__, "torch": torch.__version__,
    }, sort_keys=True))


if __name__ == "__main__":
    main()
