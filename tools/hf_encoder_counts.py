#!/usr/bin/env python3
"""Exact parameter counts of the encoder and vision classes of issue 25 (`xlm-roberta`, `electra`, …).

Builds each class on the meta device (nothing allocated, nothing downloaded) from `AutoConfig.for_model`
with the library defaults (`<type>-default`: the head class; `<type>-base`: the bare model) and from random
valid small configs (`<type>-<i>`), and writes `{name: {architecture, params, config}}` with
`params = sum(p.numel() for p in model.parameters())` and `config` as `to_json_string()` writes it.

    /root/mvenv/bin/python tools/hf_encoder_counts.py --seed 25 --per-type 4 \\
        --out crates/core/tests/data/hf/encoder_counts.json      # torch 2.15, transformers 5.24
    /root/mvenv/bin/python tools/hf_encoder_counts.py --seed 29 --per-type 4 --types deberta-v2 swin wav2vec2 \\
        --out crates/core/tests/data/hf/encoder_more_counts.json
"""
import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from hf_vlm_counts import count  # noqa: E402  (one way of building and counting a class)

# model_type: (head class, bare class)
CLASSES = {"xlm-roberta": ("XLMRobertaForSequenceClassification", "XLMRobertaModel"),
           "electra": ("ElectraForSequenceClassification", "ElectraModel"),
           "bart": ("BartForConditionalGeneration", "BartModel"),
           "dinov2": ("Dinov2ForImageClassification", "Dinov2Model"),
           "convnext": ("ConvNextForImageClassification", "ConvNextModel"),
           "modernbert": ("ModernBertForSequenceClassification", "ModernBertModel"),
           "deberta-v2": ("DebertaV2ForSequenceClassification", "DebertaV2Model"),
           "swin": ("SwinForImageClassification", "SwinModel"),
           "wav2vec2": ("Wav2Vec2ForCTC", "Wav2Vec2Model")}
RND = random.Random()


def pick(*xs):
    return RND.choice(xs)


def gen(mt):
    heads, hd = pick(1, 2, 4), pick(8, 16, 32)
    if mt == "dinov2":
        patch = pick(4, 8, 14)
        return dict(hidden_size=heads * hd, num_attention_heads=heads, num_hidden_layers=RND.randint(1, 3), mlp_ratio=pick(4, 2, 3),
                    use_swiglu_ffn=pick(True, False), qkv_bias=pick(True, False), image_size=patch * RND.randint(1, 6), patch_size=patch,
                    num_channels=pick(1, 3), num_labels=pick(0, 1, 5), use_mask_token=pick(True, False), hidden_act=pick("gelu", "relu"))
    if mt == "convnext":
        stages = RND.randint(1, 4)
        return dict(num_stages=stages, hidden_sizes=[RND.randint(4, 64) for _ in range(stages)], depths=[RND.randint(1, 3) for _ in range(stages)],
                    patch_size=pick(2, 4), image_size=pick(32, 64), num_channels=pick(1, 3), num_labels=pick(0, 1, 5),
                    layer_scale_init_value=pick(0.0, 1e-6), hidden_act=pick("gelu", "relu"))
    if mt == "modernbert":
        return dict(vocab_size=RND.randint(50, 3000), hidden_size=heads * hd, num_attention_heads=heads, intermediate_size=RND.randint(8, 300),
                    num_hidden_layers=RND.randint(1, 4), norm_bias=pick(True, False), attention_bias=pick(True, False),
                    mlp_bias=pick(True, False), classifier_bias=pick(True, False), num_labels=RND.randint(1, 5), pad_token_id=0)
    if mt == "wav2vec2":
        k = RND.randint(1, 3)
        return dict(vocab_size=RND.randint(8, 100), hidden_size=heads * hd * 2, num_attention_heads=heads, intermediate_size=RND.randint(8, 300),
                    num_hidden_layers=RND.randint(1, 3), conv_dim=[RND.randint(4, 64) for _ in range(k)], conv_stride=[pick(2, 3, 5) for _ in range(k)],
                    conv_kernel=[pick(2, 3, 10) for _ in range(k)], conv_bias=pick(True, False), feat_extract_norm=pick("group", "layer"),
                    num_conv_pos_embeddings=pick(16, 32, 127), num_conv_pos_embedding_groups=pick(1, 2, 4), do_stable_layer_norm=pick(True, False),
                    mask_time_prob=pick(0.0, 0.05), hidden_act=pick("gelu", "relu"))
    if mt == "swin":
        # every stage at least one window wide (narrower ones fail in transformers' forward)
        stages, window, patch = RND.randint(1, 3), pick(2, 4, 7), pick(2, 4)
        side = window * 2 ** (stages - 1) * pick(1, 2)
        hs = [pick(1, 2, 4) for _ in range(stages)]
        return dict(image_size=side * patch, patch_size=patch, num_channels=pick(1, 3), embed_dim=max(hs) * pick(4, 8), depths=[RND.randint(1, 3) for _ in range(stages)],
                    num_heads=hs, window_size=window, mlp_ratio=pick(4.0, 2.0, 3.0), qkv_bias=pick(True, False), use_absolute_embeddings=pick(True, False),
                    drop_path_rate=pick(0.0, 0.1), num_labels=pick(0, 1, 5), hidden_act=pick("gelu", "relu"))
    if mt == "deberta-v2":
        rel = pick(True, False)
        return dict(vocab_size=RND.randint(50, 3000), hidden_size=heads * hd, num_attention_heads=heads, intermediate_size=RND.randint(8, 300),
                    num_hidden_layers=RND.randint(1, 3), max_position_embeddings=RND.randint(16, 600), type_vocab_size=pick(0, 2),
                    relative_attention=rel, pos_att_type=pick("p2c|c2p", ["c2p"], "p2c", None), share_att_key=pick(True, False),
                    position_buckets=pick(-1, 32, 256), max_relative_positions=pick(-1, 64), norm_rel_ebd=pick("none", "layer_norm"),
                    position_biased_input=pick(True, False), embedding_size=pick(heads * hd, RND.randint(8, 200)),
                    num_labels=RND.randint(1, 5), hidden_act=pick("gelu", "relu"))
    if mt == "bart":
        return dict(vocab_size=RND.randint(50, 3000), d_model=heads * hd, encoder_layers=RND.randint(1, 3), decoder_layers=RND.randint(1, 3),
                    encoder_attention_heads=heads, decoder_attention_heads=pick(*[k for k in (1, 2, 4) if (heads * hd) % k == 0]),
                    encoder_ffn_dim=RND.randint(8, 300), decoder_ffn_dim=RND.randint(8, 300), max_position_embeddings=RND.randint(16, 600),
                    scale_embedding=pick(True, False), activation_function=pick("gelu", "relu"), dropout=pick(0.0, 0.1))
    base = dict(vocab_size=RND.randint(50, 3000), hidden_size=heads * hd, num_attention_heads=heads,
                intermediate_size=RND.randint(8, 300), num_hidden_layers=RND.randint(1, 3),
                max_position_embeddings=RND.randint(16, 600), type_vocab_size=RND.randint(1, 3), num_labels=RND.randint(1, 5))
    if mt == "electra":
        base.update(embedding_size=pick(heads * hd, RND.randint(8, 200)), classifier_dropout=pick(None, 0.2))
    return base


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
        head, bare = CLASSES[mt]
        out[f"{mt}-default"] = count(mt, {}, head)
        out[f"{mt}-base"] = count(mt, {}, bare)
        for i in range(args.per_type):
            arch = pick(head, bare)
            out[f"{mt}-{i}"] = count(mt, gen(mt), arch)
        print(mt, out[f"{mt}-default"]["params"], out[f"{mt}-base"]["params"], flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, sort_keys=True, indent=1)
    print(f"{len(out)} classes written to {args.out}")


if __name__ == "__main__":
    main()
