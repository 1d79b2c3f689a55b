#!/usr/bin/env python3
"""Peak live-tensor bytes of a greedy `model.generate()` of an encoder–decoder, traced op by op.

`tools/trace_vlm_generate.py`'s method (real CPU tensors, `trace_hf.LiveBytes`: every live storage
after each aten op; one thread, fp32, eager or SDPA, transformers' own cache, `eos_token_id`
unset so that it makes all N tokens) for `BartForConditionalGeneration` (transformers 5.24
`generation/utils.py`): `generate(input_ids, attention_mask, max_new_tokens=N)` with the source
of `--seq-len` tokens. Before the first forward `_prepare_encoder_decoder_kwargs_for_generation`
runs the encoder and keeps its output in `model_kwargs["encoder_outputs"]` to the end; the
decoder starts from `[[decoder_start_token_id]]` (one token), with an `EncoderDecoderCache`: its
self-attention layers grow by one token per forward, its cross-attention layers hold the
encoder output's keys and values, projected in the first forward.

`forced_bos_token_id` / `forced_eos_token_id` are unset too (BART's `ForcedEOSTokenLogitsProcessor`
would add a `[b, vocab]` fp32 `full_like` in the last step), so the loop is plain greedy decoding,
as vramcalc's `--mode generate` models it.

Phases, as `tools/trace_vlm_generate.py` splits them: the prefill is everything up to the start
of the second forward (the encoder, the first decoder forward, the first token's selection), the
decode everything after; the cache bytes (every layer's keys and values, self- and
cross-attention) after the first forward and at the end. The caller's tensors are tracked from
the start.

    /root/mvenv/bin/python tools/trace_seq2seq_generate.py tools/generate_configs/bart.json --seq-len 128 --new-tokens 8

Output: one JSON line (`crates/core/tests/data/generate_seq2seq.jsonl`; `tools/measure_generate_seq2seq.sh`).
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


def both_caches(cache):
    """An `EncoderDecoderCache`'s bytes: its self-attention and cross-attention caches."""
    parts = [getattr(cache, n, None) for n in ("self_attention_cache", "cross_attention_cache")]
    return sum(cache_bytes(c) for c in parts if c is not None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--seq-len", type=int, default=128, help="the source's tokens (the encoder's input)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    a = ap.parse_args()
    cfgd = json.load(open(a.config))
    given = copy.deepcopy(cfgd)
    arch = cfgd["architectures"][0]
    cfg = transformers.AutoConfig.for_model(cfgd["model_type"], **{k: v for k, v in cfgd.items() if k not in ("architectures", "model_type")})
    cfg._attn_implementation = a.attn
    torch.manual_seed(0)
    model = getattr(transformers, arch)(cfg)
    model.eval()
    ids = torch.randint(3, cfg.vocab_size, (a.batch, a.seq_len))
    mask = torch.ones_like(ids)
    tracker = LiveBytes()
    for x in [*model.parameters(), *model.buffers(), ids, mask]:
        tracker.track(x)
    gc = model.generation_config
    gc.eos_token_id = None
    gc.forced_eos_token_id = None
    gc.forced_bos_token_id = None
    gc.pad_token_id = cfg.pad_token_id
    phases = split_phases(model, tracker, both_caches)
    with tracker, torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=a.new_tokens, do_sample=False,
                             return_dict_in_generate=True)
    assert out.sequences.shape[1] == 1 + a.new_tokens, out.sequences.shape
    decode = tracker.peak
    print(json.dumps({
        "family": cfgd["model_type"], "class": arch, "mode": "generate", "batch": a.batch, "seq_len": a.seq_len,
        "new_tokens": a.new_tokens, "attention": a.attn, "dtype": "fp32",
        "measured_peak_bytes": max(phases["prefill"], decode), "prefill_peak_bytes": phases["prefill"],
        "decode_peak_bytes": decode, "kv_cache_bytes_after_prefill": phases["kv_prefill"],
        "kv_cache_bytes_end": both_caches(cache_of(out)), "forward_calls": phases["calls"], "config": given,
        "command": f"python tools/trace_seq2seq_generate.py CONFIG --seq-len {a.seq_len} --batch {a.batch} --new-tokens {a.new_tokens} --attn {a.attn}",
        "transformers": transformers.__version__, "torch": torch.__version__,
    }, sort_keys=True))


if __name__ == "__main__":
    main()
