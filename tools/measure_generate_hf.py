#!/usr/bin/env python3
"""A `generate()` of any Hugging Face causal LM config, measured as `shared/reference/llm/measure_llm.py`'s
`kvcache` family measures GPT-2 and LLaMA (FakeTensorMode + MemTracker, its `generate_mirror` of
transformers 5.24's `generate()` -> `_sample()`): that script builds only its two named families, so
this one swaps its model builder for the class named in CONFIG's `architectures`, then runs it.

    python tools/measure_generate_hf.py CONFIG --batch 1 --prompt-len 128 --new-tokens 16 --cache dynamic [--attn eager]

Prints one JSON line: measure_llm.py's record plus `hf_config_file` (CONFIG itself), `model`
(`<model_type>-small`) and `command`. Everything after CONFIG is passed to measure_llm.py.

The cache: `generate()` gives Mamba, Jamba and Qwen3-Next the same `DynamicCache(config=...)` as
any model (`generation/utils.py` `_prepare_cache_for_generation`: only reformer, minimax, xlnet,
rwkv and xlstm are excluded), whose linear-attention layers (`cache_utils.py`
`LinearAttentionLayer`) hold `conv_states` and `recurrent_states` instead of `keys`/`values`.
measure_llm.py's `kv_cache_bytes` counts only `keys`/`values`, so it is replaced here by one that
counts every tensor storage of a cache layer (keys, values, conv and recurrent states, once each).
A cache of linear-attention layers only (Mamba) records `cache_seq_len_end` as -1 (its
`get_seq_length` raises).

MiniMax is one of the excluded: `generate()` passes no cache and `MiniMaxModel.forward` makes its
own empty `MiniMaxCache()` (`modeling_minimax.py`), a `DynamicCache` whose linear-attention layers
keep their state `[b, heads, head_dim, head_dim]` in `linear_cache` (a list of tensors, one per
layer; `[]` for the full-attention layers). The same empty `MiniMaxCache()` is made here before the
prefill instead (nothing allocated), and `linear_cache`'s tensors are counted too.
"""
import json
import os
import sys
import tempfile

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference", "llm"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference"))
import measure_llm  # noqa: E402


def cache_bytes(cache):
    """Bytes of every tensor storage the cache's layers hold (each storage once)."""
    if cache is None:
        return 0
    tensors = list(getattr(cache, "linear_cache", []))  # MiniMaxCache's per-layer states
    for layer in getattr(cache, "layers", []):
        tensors.extend(getattr(layer, n, None) for n in ("keys", "values"))
        for n in ("conv_states", "recurrent_states"):
            tensors.extend((getattr(layer, n, None) or {}).values())
    seen, tot = set(), 0
    for t in tensors:
        if isinstance(t, torch.Tensor):
            st = t.untyped_storage()
            key = id(st) if not hasattr(st, "_cdata") else st._cdata
            if key not in seen:
                seen.add(key)
                tot += st.nbytes()
    return tot


def main():
    path, rest = sys.argv[1], sys.argv[2:]
    d = json.load(open(path))
    command = "python tools/measure_generate_hf.py CONFIG " + " ".join(rest)
    attn = "eager"
    if "--attn" in rest:
        i = rest.index("--attn")
        attn = rest[i + 1]
        del rest[i:i + 2]

    def build(model, attn_impl, dtype, device="cpu"):
        cfg = transformers.AutoConfig.for_model(d["model_type"], **{k: v for k, v in d.items() if k not in ("architectures", "model_type")})
        cfg._attn_implementation = attn_impl
        m = getattr(transformers, d["architectures"][0])(cfg)
        if dtype != torch.float32:
            m = m.to(dtype)
        return measure_llm.M._to(m, device)

    measure_llm.build_causal_lm = build
    measure_llm.kv_cache_bytes = cache_bytes
    make_cache = measure_llm.make_cache

    def make(model, gen, batch):
        # `Cache.get_seq_length` raises on a cache of linear-attention layers only (Mamba); the
        # mirror calls it once at the end for `cache_seq_len_end`, a field of the record only
        if not model._supports_default_dynamic_cache():
            # MiniMax: the model's own cache, as its forward makes it when given none
            module = sys.modules[type(model).__module__]
            cache = getattr(module, "MiniMaxCache")()
        else:
            cache = make_cache(model, gen, batch)
        seq_length = cache.get_seq_length

        def get_seq_length(*a, **k):
            try:
                return seq_length(*a, **k)
            except ValueError:
                return -1
        cache.get_seq_length = get_seq_length
        return cache

    measure_llm.make_cache = make
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.jsonl")
        sys.argv = ["measure_llm.py", "--family", "kvcache", "--model", "llama-h1024-l4", "--attn-impl", attn, "--out", out, *rest]
        measure_llm.main()
        if not os.path.exists(out):
            sys.exit(open(out + ".errors").read() if os.path.exists(out + ".errors") else "no record")
        for line in open(out):
            rec = json.loads(line)
            rec.update(hf_config_file=d, model=f"{d['model_type']}-small", command=command)
            print(json.dumps(rec, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
