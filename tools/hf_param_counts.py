#!/usr/bin/env python3
"""Exact parameter counts of Hugging Face classes for the dense importers' tests (issue 12).

Builds each class on the meta device (nothing allocated, nothing downloaded) from `AutoConfig.for_model`
with the library defaults (`<type>-default` for the causal-LM or classifier, `<type>-base` for the
bare model) and from random valid configs (`<type>-<i>`: random sizes, heads, K/V heads, tie on/off,
biases, parallel/sequential, sliding windows, soft-capping…), and writes
`{name: {architecture, params, config}}` with `params = sum(p.numel() for p in model.parameters())`.

    python3 -m venv .venv && .venv/bin/pip install torch transformers   # 2.15.0 / 5.24.0 here
    .venv/bin/python tools/hf_param_counts.py --seed 12 --per-type 4 \\
        --out crates/core/tests/data/hf/transformers_counts.json
    .venv/bin/python tools/hf_param_counts.py --out crates/core/tests/data/hf/preset_counts.json \\
        --config-files crates/core/src/presets/configs/*.json
    .venv/bin/python tools/hf_param_counts.py --seed 12 --per-type 4 --types t5 whisper clip \\
        --out crates/core/tests/data/hf/transformers_counts.json
    .venv/bin/python tools/hf_param_counts.py --seed 26 --per-type 4 --full-dict \\
        --types mamba mamba2 qwen3_next llama4_text jamba bamba falcon_h1 --out crates/core/tests/data/hf/hybrid_counts.json
    .venv/bin/python tools/hf_param_counts.py --seed 27 --per-type 4 --full-dict \\
        --types ernie4_5 hunyuan_v1_dense cohere2 nemotron exaone4 --out crates/core/tests/data/hf/dense_more_counts.json
    .venv/bin/python tools/hf_param_counts.py --seed 28 --per-type 4 --full-dict \\
        --types ernie4_5_moe bloom mpt minimax --out crates/core/tests/data/hf/more_counts.json
    .venv/bin/python tools/hf_param_counts.py --seed 25 --per-type 2 --full-dict \\
        --types mixtral qwen2_moe qwen3_moe deepseek_v3 deepseek_v2 olmoe granitemoe phimoe glm4_moe gpt_oss gemma3 smollm3 granite glm4 stablelm gptj olmo2 cohere distilbert mistral qwen3 roberta \\
        --out crates/core/tests/data/hf/full_dict_counts.json

`--full-dict` writes each config as `to_json_string(use_diff=False)` does: every field of the
class and of `PreTrainedConfig` (`chunk_size_feed_forward`, `problem_type`, …), as users save it
with `config.to_dict()`; the random distilbert configs set `sinusoidal_pos_embds` at random.
"""
import argparse
import json
import random

import torch
import transformers
from transformers import AutoConfig

STEMS = {"mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma": "Gemma", "gemma2": "Gemma2",
         "gemma3_text": "Gemma3", "phi": "Phi", "phi3": "Phi3", "gpt_neox": "GPTNeoX", "falcon": "Falcon",
         "opt": "OPT", "starcoder2": "Starcoder2", "roberta": "Roberta", "distilbert": "DistilBert",
         "t5": "T5", "whisper": "Whisper", "clip": "CLIP", "mixtral": "Mixtral", "qwen2_moe": "Qwen2Moe",
         "qwen3_moe": "Qwen3Moe", "deepseek_v3": "DeepseekV3", "glm4_moe": "Glm4Moe",
         "gpt_oss": "GptOss", "gemma3": "Gemma3", "smollm3": "SmolLM3", "granite": "Granite", "glm4": "Glm4", "stablelm": "StableLm", "gptj": "GPTJ", "deepseek_v2": "DeepseekV2", "olmoe": "Olmoe", "olmo2": "Olmo2", "granitemoe": "GraniteMoe", "phimoe": "Phimoe", "cohere": "Cohere",
         "mamba": "Mamba", "mamba2": "Mamba2", "qwen3_next": "Qwen3Next", "llama4_text": "Llama4",
         "jamba": "Jamba", "bamba": "Bamba", "falcon_h1": "FalconH1",
         "ernie4_5": "Ernie4_5", "hunyuan_v1_dense": "HunYuanDenseV1",
         "cohere2": "Cohere2", "nemotron": "Nemotron", "exaone4": "Exaone4",
         "ernie4_5_moe": "Ernie4_5_Moe", "bloom": "Bloom", "mpt": "Mpt", "minimax": "MiniMax"}
# class defaults the importer refuses by name, replaced for the `-default` entries: SigLIP's
# pooling head (unused by Gemma 3, off in its checkpoints), and Gemma3Config's 256 image tokens,
# which a 14 × 14 patch grid (SiglipVisionConfig's 224 / 16) cannot pool to (kernel 14 // 16 = 0:
# the class builds, its forward fails); 49 tokens pool it by 2
DEFAULT_KW = {"gemma3": {"vision_config": {"vision_use_head": False}, "mm_tokens_per_image": 49},
              # DeepseekV2Config's num_experts_per_tok is None (its router cannot run); DeepSeek-V2's 6
              "deepseek_v2": {"num_experts_per_tok": 6},
              # HunYuanDenseV1Config's head_dim is None, with which the class does not build
              "hunyuan_v1_dense": {"head_dim": 128},
              # NemotronConfig's num_key_value_heads is None, which NemotronAttention divides by
              "nemotron": {"num_key_value_heads": 8}}
MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "glm4_moe", "gpt_oss", "deepseek_v2", "olmoe", "granitemoe", "phimoe")
SEQ2SEQ = ("t5", "whisper")
ENCODERS = ("roberta", "distilbert")


def classes(mt):
    stem = STEMS[mt]
    if mt in ENCODERS:
        return stem + "ForSequenceClassification", stem + "Model"
    if mt == "clip":
        return "CLIPModel", "CLIPModel"
    if mt in SEQ2SEQ or mt == "gemma3":
        return stem + "ForConditionalGeneration", stem + "Model"
    base = {"gemma3_text": "Gemma3TextModel", "llama4_text": "Llama4TextModel"}.get(mt, stem + "Model")
    return stem + "ForCausalLM", base
def gen(mt):
    """Random valid keyword arguments for `mt`'s config class."""
    heads, hd = pick(1, 2, 4, 8), pick(8, 16, 32)
    kv = pick(*[k for k in (1, 2, 4, 8) if heads % k == 0])
    L = RND.randint(1, 4)
    base = dict(vocab_size=RND.randint(50, 3000), num_hidden_layers=L, tie_word_embeddings=pick(True, False))
    if mt in ("mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3"):
        base.update(hidden_size=heads*hd*pick(1, 2) if mt.startswith(("gemma", "qwen3", "mistral")) else heads*hd,
                    intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv)
        if mt.startswith(("gemma", "qwen3", "mistral")): base["head_dim"] = pick(8, 16, 32)
        if mt in ("qwen3", "gemma", "gemma2", "gemma3_text"): base["attention_bias"] = pick(True, False)
        if mt in ("qwen2", "qwen3"):
            base["use_sliding_window"] = pick(True, False); base["max_window_layers"] = RND.randint(0, L)
        if mt in ("mistral", "gemma2", "gemma3_text", "phi3"): base["sliding_window"] = pick(None, 64, 4096)
        if mt == "gemma2": base.update(final_logit_softcapping=pick(None, 30.0), attn_logit_softcapping=pick(None, 50.0))
        if mt == "phi3": base.update(resid_pdrop=pick(0.0, 0.1), embd_pdrop=pick(0.0, 0.1))
    elif mt == "phi":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, qk_layernorm=pick(True, False), partial_rotary_factor=pick(0.5, 1.0, 0.25))
    elif mt == "gpt_neox":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    attention_bias=pick(True, False), use_parallel_residual=pick(True, False), rotary_pct=pick(0.25, 0.5, 1.0))
    elif mt == "falcon":
        new = pick(True, False)
        base.update(hidden_size=heads*hd, num_attention_heads=heads, num_kv_heads=kv, new_decoder_architecture=new,
                    multi_query=pick(True, False), bias=pick(True, False), ffn_hidden_size=pick(None, RND.randint(8, 300)))
        if new: base.update(parallel_attn=True, num_ln_in_parallel_attn=pick(None, 1, 2))
        else: base.update(parallel_attn=pick(True, False))
    elif mt == "opt":
        h = heads*hd
        base.update(hidden_size=h, num_attention_heads=heads, ffn_dim=RND.randint(8, 300), word_embed_proj_dim=pick(h, h//2 or 1, 2*h),
                    do_layer_norm_before=pick(True, False), enable_bias=pick(True, False), max_position_embeddings=RND.randint(16, 600),
                    dropout=pick(0.0, 0.1))
    elif mt == "starcoder2":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, use_bias=pick(True, False), sliding_window=pick(None, 128))
    elif mt == "roberta":
        base.update(hidden_size=heads*hd, num_attention_heads=heads, intermediate_size=RND.randint(8, 300),
                    max_position_embeddings=RND.randint(16, 600), type_vocab_size=RND.randint(1, 3), num_labels=RND.randint(1, 5))
        del base["tie_word_embeddings"]
    elif mt == "t5":
        base = dict(vocab_size=RND.randint(50, 3000), d_model=RND.randint(8, 300), d_kv=pick(8, 16, 32, 64), num_heads=heads,
                    d_ff=RND.randint(8, 300), num_layers=L, num_decoder_layers=pick(None, RND.randint(1, 4)),
                    relative_attention_num_buckets=pick(8, 32, 64), feed_forward_proj=pick("relu", "gated-gelu", "gelu"),
                    tie_word_embeddings=pick(True, False), dropout_rate=pick(0.0, 0.1))
    elif mt == "whisper":
        base = dict(vocab_size=RND.randint(50, 3000), d_model=heads*hd, encoder_layers=L, decoder_layers=RND.randint(1, 4),
                    encoder_attention_heads=heads, decoder_attention_heads=pick(*[k for k in (1, 2, 4, 8) if (heads*hd) % k == 0]),
                    encoder_ffn_dim=RND.randint(8, 300), decoder_ffn_dim=RND.randint(8, 300), num_mel_bins=pick(80, 128),
                    max_source_positions=RND.randint(16, 1500), max_target_positions=RND.randint(16, 448),
                    decoder_start_token_id=1, bos_token_id=1, eos_token_id=2)
    elif mt == "clip":
        patch = pick(4, 8, 16, 32)
        tower = lambda: dict(hidden_size=heads*hd, num_attention_heads=heads, intermediate_size=RND.randint(8, 300),
                             num_hidden_layers=RND.randint(1, 4), hidden_act=pick("quick_gelu", "gelu"))
        text = dict(tower(), vocab_size=RND.randint(50, 3000), max_position_embeddings=RND.randint(4, 100))
        vision = dict(tower(), image_size=patch * RND.randint(1, 8), patch_size=patch, num_channels=pick(1, 3))
        base = dict(text_config=text, vision_config=vision, projection_dim=RND.randint(4, 300))
    elif mt == "distilbert":
        base = dict(vocab_size=RND.randint(50, 3000), n_layers=L, dim=heads*hd, n_heads=heads, hidden_dim=RND.randint(8, 300),
                    max_position_embeddings=RND.randint(16, 600), num_labels=RND.randint(1, 5))
    elif mt in MOE:
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, num_experts_per_tok=pick(1, 2))
        if mt == "mixtral":
            base.update(num_local_experts=pick(2, 4))
        elif mt == "phimoe":
            base.update(num_local_experts=pick(2, 4, 8), num_experts_per_tok=2, attention_bias=pick(True, False), lm_head_bias=pick(True, False))
        elif mt == "granitemoe":
            base.update(num_local_experts=pick(2, 4, 8), attention_bias=pick(True, False), embedding_multiplier=pick(1.0, 12.0),
                        logits_scaling=pick(1.0, 6.0), residual_multiplier=pick(1.0, 0.22), attention_multiplier=pick(1.0, 0.015625))
        elif mt == "olmoe":
            base.update(num_experts=pick(2, 4, 8), attention_bias=pick(True, False), norm_topk_prob=pick(True, False),
                        clip_qkv=pick(None, 8.0))
        elif mt == "deepseek_v2":
            base.update(n_routed_experts=pick(4, 8), moe_intermediate_size=RND.randint(8, 100), first_k_dense_replace=RND.randint(0, L),
                        n_shared_experts=pick(0, 1, 2), q_lora_rank=pick(None, 16, 32), kv_lora_rank=pick(8, 16), qk_rope_head_dim=pick(4, 8),
                        qk_nope_head_dim=pick(8, 16), v_head_dim=pick(8, 16), topk_method=pick("greedy", "group_limited_greedy"),
                        n_group=2, topk_group=1, attention_bias=pick(True, False))
            del base["num_key_value_heads"]
        elif mt == "deepseek_v3":
            base.update(n_routed_experts=pick(4, 8), moe_intermediate_size=RND.randint(8, 100), n_group=pick(1, 2), topk_group=1,
                        first_k_dense_replace=RND.randint(0, L), n_shared_experts=pick(0, 1, 2), q_lora_rank=pick(None, 16, 32),
                        kv_lora_rank=pick(8, 16), qk_rope_head_dim=pick(4, 8), qk_nope_head_dim=pick(8, 16), v_head_dim=pick(8, 16))
            del base["num_key_value_heads"]
        elif mt == "gpt_oss":
            base.update(num_local_experts=pick(2, 4, 8), head_dim=pick(8, 16, 32), attention_bias=pick(True, False),
                        sliding_window=pick(16, 128), layer_types=[pick("sliding_attention", "full_attention") for _ in range(L)])
        elif mt == "glm4_moe":
            base.update(n_routed_experts=pick(2, 4, 8), moe_intermediate_size=RND.randint(8, 100), n_shared_experts=pick(0, 1, 2),
                        first_k_dense_replace=RND.randint(0, L), head_dim=pick(8, 16, 32), attention_bias=pick(True, False),
                        use_qk_norm=pick(True, False), partial_rotary_factor=pick(0.5, 1.0, 0.25), norm_topk_prob=pick(True, False))
        else:
            base.update(num_experts=pick(2, 4), moe_intermediate_size=RND.randint(8, 100), norm_topk_prob=pick(True, False),
                        decoder_sparse_step=pick(1, 2), mlp_only_layers=pick([], [0]))
            if mt == "qwen2_moe": base.update(shared_expert_intermediate_size=RND.randint(8, 100))
            if mt == "qwen3_moe": base.update(attention_bias=pick(True, False), head_dim=pick(8, 16, 32))
    elif mt == "smollm3":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, attention_bias=pick(True, False), mlp_bias=pick(True, False),
                    no_rope_layer_interval=pick(1, 2, 4), use_sliding_window=pick(True, False), sliding_window=pick(None, 64))
    elif mt == "cohere":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, attention_bias=pick(True, False), logit_scale=pick(0.0625, 0.125))
    elif mt == "olmo2":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, attention_bias=pick(True, False))
    elif mt == "gptj":
        base = dict(vocab_size=RND.randint(50, 3000), n_embd=heads*hd, n_head=heads, n_layer=L, n_inner=pick(None, RND.randint(8, 300)),
                    rotary_dim=pick(hd // 2 if hd // 2 % 2 == 0 else hd, hd), tie_word_embeddings=pick(True, False),
                    activation_function=pick("gelu_new", "gelu"), resid_pdrop=pick(0.0, 0.1), embd_pdrop=pick(0.0, 0.1))
    elif mt == "stablelm":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, use_qkv_bias=pick(True, False), use_parallel_residual=pick(True, False),
                    partial_rotary_factor=pick(0.25, 0.5, 1.0), hidden_dropout=pick(0.0, 0.1))
    elif mt == "glm4":
        base.update(hidden_size=heads*hd*pick(1, 2), intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, head_dim=pick(8, 16, 32), attention_bias=pick(True, False),
                    partial_rotary_factor=pick(0.5, 1.0, 0.25))
    elif mt == "granite":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, attention_bias=pick(True, False), mlp_bias=pick(True, False),
                    embedding_multiplier=pick(1.0, 12.0), logits_scaling=pick(1.0, 8.0), residual_multiplier=pick(1.0, 0.22),
                    attention_multiplier=pick(1.0, 0.0078125))
    elif mt == "gemma3":
        patch, side, per = pick(2, 4, 8), pick(4, 8), pick(1, 2, 4)
        vheads, vhd = pick(1, 2, 4), pick(8, 16)
        vision = dict(hidden_size=vheads*vhd, num_attention_heads=vheads, intermediate_size=RND.randint(8, 200),
                      num_hidden_layers=RND.randint(1, 3), image_size=patch*side, patch_size=patch, vision_use_head=False,
                      num_channels=pick(1, 3))
        text = dict(vocab_size=RND.randint(50, 3000), hidden_size=heads*hd, intermediate_size=RND.randint(8, 300),
                    num_hidden_layers=L, num_attention_heads=heads, num_key_value_heads=kv, head_dim=pick(8, 16, 32),
                    sliding_window=pick(16, 512))
        base = dict(vision_config=vision, text_config=text, mm_tokens_per_image=(side // per) ** 2 if side % per == 0 else 1,
                    tie_word_embeddings=pick(True, False))
    elif mt == "mamba":
        base.update(hidden_size=RND.randint(8, 200), state_size=pick(4, 8, 16), expand=pick(1, 2), conv_kernel=pick(2, 4),
                    time_step_rank=pick("auto", RND.randint(1, 16)), use_bias=pick(True, False), use_conv_bias=pick(True, False))
    elif mt == "mamba2":
        groups = pick(1, 2); heads2 = pick(2, 4, 8); h = heads2 * pick(8, 16)
        base.update(hidden_size=h, num_heads=heads2 * 2, head_dim=h // heads2, expand=2, n_groups=groups, state_size=pick(8, 16, 32),
                    conv_kernel=pick(2, 4), chunk_size=pick(8, 64, 256), use_bias=pick(True, False), use_conv_bias=pick(True, False))
    elif mt == "qwen3_next":
        kh = pick(1, 2, 4)
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    head_dim=pick(8, 16, 32), attention_bias=pick(True, False), linear_num_key_heads=kh, linear_num_value_heads=kh * pick(1, 2),
                    linear_key_head_dim=pick(8, 16), linear_value_head_dim=pick(8, 16), linear_conv_kernel_dim=pick(2, 4),
                    num_experts=pick(2, 4, 8), num_experts_per_tok=pick(1, 2), moe_intermediate_size=RND.randint(8, 100),
                    shared_expert_intermediate_size=RND.randint(8, 100), decoder_sparse_step=pick(1, 2), mlp_only_layers=pick([], [0]),
                    layer_types=[pick("linear_attention", "full_attention") for _ in range(L)])
    elif mt == "llama4_text":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), intermediate_size_mlp=RND.randint(8, 300),
                    num_attention_heads=heads, num_key_value_heads=kv, head_dim=pick(8, 16, 32), attention_bias=pick(True, False),
                    num_local_experts=pick(2, 4, 8), num_experts_per_tok=1, interleave_moe_layer_step=pick(1, 2),
                    no_rope_layer_interval=pick(2, 4), attention_chunk_size=pick(None, 16, 8192))
    elif mt == "jamba":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    num_experts=pick(1, 2, 4), num_experts_per_tok=pick(1, 2), expert_layer_period=pick(1, 2), expert_layer_offset=0,
                    attn_layer_period=pick(1, 2, 3), attn_layer_offset=0, mamba_d_state=pick(4, 8, 16), mamba_d_conv=pick(2, 4),
                    mamba_expand=pick(1, 2), mamba_dt_rank=pick("auto", RND.randint(1, 8)), mamba_conv_bias=pick(True, False),
                    mamba_proj_bias=pick(True, False), use_mamba_kernels=False)
        if base["num_experts"] < base["num_experts_per_tok"]: base["num_experts_per_tok"] = 1
    elif mt == "bamba":
        mh = pick(2, 4, 8)
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    attn_layer_indices=sorted(RND.sample(range(L), RND.randint(0, L))), mamba_n_heads=mh, mamba_n_groups=pick(1, 2) if mh > 1 else 1,
                    mamba_d_state=pick(8, 16), mamba_d_conv=pick(2, 4), mamba_chunk_size=pick(16, 256), mamba_conv_bias=pick(True, False),
                    mamba_proj_bias=pick(True, False), attention_bias=pick(True, False), mlp_bias=pick(True, False))
    elif mt == "falcon_h1":
        mh = pick(2, 4, 8)
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    mamba_d_ssm=pick(None, mh * pick(8, 16)), mamba_n_heads=mh, mamba_n_groups=pick(1, 2) if mh > 1 else 1,
                    mamba_d_state=pick(8, 16), mamba_d_conv=pick(2, 4), mamba_chunk_size=pick(16, 256), mamba_conv_bias=pick(True, False),
                    mamba_proj_bias=pick(True, False), projectors_bias=pick(True, False), mamba_rms_norm=pick(True, False),
                    attention_bias=pick(True, False), mlp_bias=pick(True, False), embedding_multiplier=pick(1.0, 2.5))
    elif mt == "cohere2":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads,
                    num_key_value_heads=kv, attention_bias=pick(True, False), sliding_window=pick(16, 4096),
                    layer_types=[pick("sliding_attention", "full_attention") for _ in range(L)])
    elif mt == "nemotron":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    head_dim=pick(8, 16, 32), attention_bias=pick(True, False), mlp_bias=pick(True, False),
                    partial_rotary_factor=pick(0.5, 1.0))
    elif mt == "exaone4":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    head_dim=pick(8, 16, 32), sliding_window=pick(16, 4096), sliding_window_pattern=pick(2, 4))
    elif mt == "ernie4_5":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    head_dim=pick(8, 16, 32), use_bias=pick(True, False))
    elif mt == "hunyuan_v1_dense":
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    head_dim=pick(8, 16, 32), attention_bias=pick(True, False))
    elif mt == "ernie4_5_moe":
        e = pick(2, 4, 8)
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    use_bias=pick(True, False), moe_intermediate_size=RND.randint(8, 100), moe_num_experts=e,
                    moe_k=pick(*[k for k in (1, 2, 4) if k <= e]), moe_num_shared_experts=pick(0, 1, 2),
                    moe_layer_start_index=pick(0, 1), moe_layer_end_index=pick(-1, L - 1, 1), moe_layer_interval=pick(1, 2))
    elif mt == "bloom":
        base.update(hidden_size=heads*hd, n_head=heads, n_layer=L, hidden_dropout=pick(0.0, 0.1), attention_dropout=pick(0.0, 0.1))
        del base["num_hidden_layers"]
    elif mt == "mpt":
        base.update(d_model=heads*hd, n_heads=heads, n_layers=L, max_seq_len=RND.randint(16, 600), no_bias=pick(True, False),
                    attn_config=dict(attn_pdrop=0, alibi_bias_max=pick(8, 16)))
        del base["num_hidden_layers"]
    elif mt == "minimax":
        e = pick(2, 4, 8)
        base.update(hidden_size=heads*hd, intermediate_size=RND.randint(8, 300), num_attention_heads=heads, num_key_value_heads=kv,
                    head_dim=pick(None, 8, 16, 32), num_local_experts=e, num_experts_per_tok=pick(*[k for k in (1, 2) if k <= e]),
                    block_size=pick(16, 64, 256), layer_types=[pick("full_attention", "linear_attention") for _ in range(L)])
    if mt == "distilbert" and FULL_DICT:
        base["sinusoidal_pos_embds"] = pick(True, False)
    if mt != "clip":
        base["pad_token_id"] = 1
    return base


def count(mt, arch, kwargs):
    cfg = AutoConfig.for_model(mt, **kwargs)
    cfg.architectures = [arch]
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    if FULL_DICT:
        config = json.loads(cfg.to_json_string(use_diff=False))
    else:
        config = {k: v for k, v in json.loads(cfg.to_json_string()).items() if k != "transformers_version"}
    return {"architecture": arch, "params": sum(p.numel() for p in model.parameters()), "config": config}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--per-type", type=int, default=4)
    ap.add_argument("--out", required=True)
    ap.add_argument("--types", nargs="+", metavar="MODEL_TYPE", help="only these; add them to an existing --out")
    ap.add_argument("--config-files", nargs="+", metavar="JSON",
                    help="instead: count each config.json as its `architectures` class, {file stem: params}")
    ap.add_argument("--full-dict", action="store_true", help="configs as to_json_string(use_diff=False) writes them")
    args = ap.parse_args()
    global FULL_DICT
    FULL_DICT = args.full_dict
    if args.config_files:
        out = {}
        for path in args.config_files:
            d = json.load(open(path))
            kwargs = {k: v for k, v in d.items() if k not in ("architectures", "model_type")}
            stem = path.rsplit("/", 1)[-1].removesuffix(".json")
            out[stem] = count(d["model_type"], d["architectures"][0], kwargs)["params"]
            print(stem, out[stem], flush=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
        return
    RND.seed(args.seed)
    out = json.load(open(args.out)) if args.types and not args.full_dict else {}
    for mt in args.types or STEMS:
        head, base = classes(mt)
        # --full-dict: the default distilbert with sinusoidal positions (the random ones draw it)
        extra = {"sinusoidal_pos_embds": True} if FULL_DICT and mt == "distilbert" else {}
        out[f"{mt}-default"] = count(mt, head, {**DEFAULT_KW.get(mt, {}), **extra})
        out[f"{mt}-base"] = count(mt, base, DEFAULT_KW.get(mt, {}))
        for i in range(args.per_type):
            arch = pick(head, base) if mt in ENCODERS else pick(head, head, base)
            out[f"{mt}-{i}"] = count(mt, arch, gen(mt))
    with open(args.out, "w") as f:
        json.dump(out, f, sort_keys=True)
    print(f"{len(out)} classes written to {args.out}")


RND = random.Random()
FULL_DICT = False


def pick(*xs):
    return RND.choice(xs)


if __name__ == "__main__":
    main()
