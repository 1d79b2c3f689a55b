#!/usr/bin/env python3
"""Measures what llama.cpp allocates for GGUF models with random weights.

Writes small models of several architectures and tensor types with the `gguf` package (random
bytes for the weights: llama.cpp never reads them while it sizes its buffers), loads each in a
child process through llama-cpp-python's low-level API with the CPU backend, and records the
buffers it allocates: model buffers, KV cache (K and V), compute buffers and the output buffer.
The child runs under LD_PRELOAD=size_shim.so (tools/llama_cpp/size_shim.c), which prints the exact
byte count behind each of llama.cpp's "... buffer size = X MiB" lines.

Output: one JSON line per configuration (crates/core/tests/data/llama_cpp/measured.jsonl), and
the GGUF headers (cut after the tensor infos) in crates/core/tests/data/llama_cpp/*.gguf-header.

    gcc -shared -fPIC -O1 -o /tmp/size_shim.so tools/llama_cpp/size_shim.c -ldl
    /root/mvenv/bin/python tools/measure_llama_cpp.py            # all configurations
    /root/mvenv/bin/python tools/measure_llama_cpp.py --only qwen3   # one model family
    /root/mvenv/bin/python tools/measure_llama_cpp.py --heldout      # the held-out models
    /root/mvenv/bin/python tools/measure_llama_cpp.py --fresh        # every model at new settings

llama-cpp-python 0.3.36 (its vendored llama.cpp), CPU backend, 1 thread.
"""
import argparse, ctypes, json, os, re, subprocess, sys
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "crates/core/tests/data/llama_cpp")
MODELS = "/tmp/vramcalc_gguf"
SHIM = "/tmp/size_shim.so"


def vocab(w, n_vocab):
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    toks += [f"t{i}" for i in range(n_vocab - len(toks))]
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * n_vocab)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (n_vocab - 259))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def make_model(path, m):
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quant_shape_to_byte_shape
    arch = m["arch"]
    wt = Q[m["wtype"]]
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, arch)
    E, L, H, KV, hd, F, V = m["n_embd"], m["n_layer"], m["n_head"], m["n_head_kv"], m["head_dim"], m["n_ff"], m["n_vocab"]
    w.add_context_length(m.get("n_ctx_train", 8192))
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_layer_norm_rms_eps(1e-6)
    if arch != "deepseek2":
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_rope_dimension_count(hd)
    vocab(w, V)

    def t(name, ne, typ=None):
        # ne in ggml order (innermost first); gguf-py takes the numpy shape, outermost first.
        typ = wt if typ is None else typ
        if len(ne) == 1 or name.endswith("_norm.weight") or name.endswith(".bias") or name.endswith("gate_inp.weight"):
            typ = Q.F32
        shape = list(reversed(ne))
        if typ == Q.F32:
            a = rng.standard_normal(shape, dtype=np.float32) * 0.02
            w.add_tensor(name, a)
        elif typ == Q.F16:
            w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float16))
        else:
            bshape = quant_shape_to_byte_shape(shape, typ)
            w.add_tensor(name, rng.integers(0, 256, size=bshape, dtype=np.uint8), raw_shape=bshape, raw_dtype=typ)

    t("token_embd.weight", [E, V])
    for i in range(L):
        p = f"blk.{i}."
        if arch != "olmo2":
            t(p + "attn_norm.weight", [E])
        if arch == "olmo2":
            t(p + "attn_q_norm.weight", [H * hd]); t(p + "attn_k_norm.weight", [KV * hd])
        if arch == "starcoder2":
            t(p + "attn_norm.bias", [E]); t(p + "ffn_norm.bias", [E])
        if arch == "phi2":
            t(p + "attn_norm.bias", [E])
        if arch == "deepseek2":
            qr, kvr, rope, nope, vh = m["q_lora_rank"], m["kv_lora_rank"], m["rope_dim"], m["nope_dim"], m["v_head_dim"]
            t(p + "attn_q_a_norm.weight", [qr])
            t(p + "attn_kv_a_norm.weight", [kvr])
            t(p + "attn_q_a.weight", [E, qr])
            t(p + "attn_q_b.weight", [qr, H * (nope + rope)])
            t(p + "attn_kv_a_mqa.weight", [E, kvr + rope])
            t(p + "attn_k_b.weight", [nope, kvr, H])
            t(p + "attn_v_b.weight", [kvr, vh, H])
            t(p + "attn_output.weight", [H * vh, E])
        elif arch == "phi3" or (arch == "phi2" and m.get("fused")):
            t(p + "attn_qkv.weight", [E, H * hd + 2 * KV * hd])
            if arch == "phi2":
                t(p + "attn_qkv.bias", [H * hd + 2 * KV * hd])
            t(p + "attn_output.weight", [H * hd, E])
        else:
            t(p + "attn_q.weight", [E, H * hd])
            t(p + "attn_k.weight", [E, KV * hd])
            t(p + "attn_v.weight", [E, KV * hd])
            if arch in ("qwen2", "gpt-oss", "qwen2moe", "starcoder2", "phi2", "glm4moe", "glm4"):
                t(p + "attn_q.bias", [H * hd]); t(p + "attn_k.bias", [KV * hd]); t(p + "attn_v.bias", [KV * hd])
            if arch in ("qwen3", "qwen3moe", "gemma3"):
                t(p + "attn_q_norm.weight", [hd]); t(p + "attn_k_norm.weight", [hd])
            t(p + "attn_output.weight", [H * hd, E])
            if arch in ("starcoder2", "phi2"):
                t(p + "attn_output.bias", [E])
            if arch == "gpt-oss":
                t(p + "attn_output.bias", [E]); t(p + "attn_sinks.weight", [H], Q.F32)
                t(p + "post_attention_norm.weight", [E])
            if arch in ("gemma2", "gemma3", "glm4moe", "glm4", "olmo2"):
                t(p + "post_attention_norm.weight", [E])
        if arch == "phi2" and m.get("fused"):
            t(p + "attn_output.bias", [E])
        if arch not in ("gpt-oss", "command-r", "cohere2", "phi2", "glm4moe", "olmo2"):
            t(p + "ffn_norm.weight", [E])
        moe = arch in ("qwen3moe", "gpt-oss", "qwen2moe") or (arch in ("deepseek2", "glm4moe") and i >= m["n_dense"]) \
            or (arch == "llama4" and (i + 1) % m["moe_step"] == 0)
        if moe:
            X, Fx = m["n_expert"], m["n_ff_exp"]
            t(p + "ffn_gate_inp.weight", [E, X])
            t(p + "ffn_gate_exps.weight", [E, Fx, X])
            t(p + "ffn_up_exps.weight", [E, Fx, X])
            t(p + "ffn_down_exps.weight", [Fx, E, X])
            if arch == "gpt-oss":
                t(p + "ffn_gate_inp.bias", [X]); t(p + "ffn_gate_exps.bias", [Fx, X], Q.F32)
                t(p + "ffn_up_exps.bias", [Fx, X], Q.F32); t(p + "ffn_down_exps.bias", [E, X], Q.F32)
            if arch == "qwen2moe":
                S = m["n_ff_shexp"]
                t(p + "ffn_gate_inp_shexp.weight", [E])
                t(p + "ffn_gate_shexp.weight", [E, S]); t(p + "ffn_up_shexp.weight", [E, S]); t(p + "ffn_down_shexp.weight", [S, E])
            if arch == "glm4moe":
                t(p + "exp_probs_b.bias", [X])
            if arch in ("deepseek2", "glm4moe", "llama4"):
                S = m.get("n_shared", 1) * Fx
                t(p + "ffn_gate_shexp.weight", [E, S]); t(p + "ffn_up_shexp.weight", [E, S]); t(p + "ffn_down_shexp.weight", [S, E])
        elif arch in ("phi3", "glm4"):
            t(p + "ffn_up.weight", [E, 2 * F]); t(p + "ffn_down.weight", [F, E])
        elif arch in ("starcoder2", "phi2"):
            t(p + "ffn_up.weight", [E, F]); t(p + "ffn_up.bias", [F]); t(p + "ffn_down.weight", [F, E]); t(p + "ffn_down.bias", [E])
        else:
            t(p + "ffn_gate.weight", [E, F]); t(p + "ffn_up.weight", [E, F]); t(p + "ffn_down.weight", [F, E])
        if arch in ("gemma2", "gemma3", "glm4", "olmo2"):
            t(p + "post_ffw_norm.weight", [E])
        if i >= L - m.get("nextn", 0):
            # A multi-token-prediction block (llama.cpp skips it unless load_mtp).
            t(p + "nextn.eh_proj.weight", [2 * E, E]); t(p + "nextn.enorm.weight", [E]); t(p + "nextn.hnorm.weight", [E])
            t(p + "nextn.shared_head_norm.weight", [E])
    t("output_norm.weight", [E])
    if arch in ("starcoder2", "phi2"):
        t("output_norm.bias", [E])
    if not m.get("tied"):
        t("output.weight", [E, V])
    if arch == "phi2":
        t("output.bias", [V])

    if arch == "gpt-oss":
        w.add_sliding_window(m["n_swa"])
    if arch == "qwen2moe":
        w.add_expert_shared_feed_forward_length(m["n_ff_shexp"])
    if arch in ("command-r", "cohere2"):
        w.add_logit_scale(0.0625)
    if arch == "cohere2":
        w.add_sliding_window(m["n_swa"])
    if arch in ("command-r", "cohere2", "starcoder2", "phi2"):
        w.add_layer_norm_eps(1e-5)
    if arch == "olmo2" and m.get("n_swa"):
        w.add_sliding_window(m["n_swa"])
    if arch == "glm4" and m.get("nextn"):
        w.add_uint32("glm4.nextn_predict_layers", m["nextn"])
    if arch == "glm4moe":
        w.add_leading_dense_block_count(m["n_dense"])
        w.add_expert_shared_count(m["n_shared"])
        w.add_expert_weights_scale(2.5)
        w.add_expert_weights_norm(True)
        w.add_uint32("glm4moe.expert_gating_func", 2)
        if m.get("nextn"):
            w.add_uint32("glm4moe.nextn_predict_layers", m["nextn"])
    if arch == "llama4":
        w.add_interleave_moe_layer_step(m["moe_step"])
        if "n_swa" in m:
            w.add_sliding_window(m["n_swa"])
    if arch in ("qwen3moe", "deepseek2", "gpt-oss", "qwen2moe", "glm4moe", "llama4"):
        w.add_expert_count(m["n_expert"])
        w.add_expert_used_count(m["n_expert_used"])
        w.add_expert_feed_forward_length(m["n_ff_exp"])
    if arch == "gemma3":
        w.add_sliding_window(m["n_swa"])
    if arch == "gemma2":
        w.add_sliding_window(m["n_swa"])
        w.add_attn_logit_softcapping(50.0)
        w.add_final_logit_softcapping(30.0)
    if arch == "deepseek2":
        kvr, rope = m["kv_lora_rank"], m["rope_dim"]
        w.add_leading_dense_block_count(m["n_dense"])
        w.add_q_lora_rank(m["q_lora_rank"])
        w.add_kv_lora_rank(kvr)
        w.add_key_length(kvr + rope)
        w.add_value_length(kvr)
        w.add_key_length_mla(m["nope_dim"] + rope)
        w.add_value_length_mla(m["v_head_dim"])
        w.add_rope_dimension_count(rope)
        w.add_expert_shared_count(m["n_shared"])
        w.add_expert_weights_scale(1.0)
        if m.get("nextn"):
            w.add_uint32("deepseek2.nextn_predict_layers", m["nextn"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, ftype):
    import llama_cpp as L
    p = L.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 1
    rc = L.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    assert rc == 0, rc


# Small models: dimensions multiples of 256 so every k-quant fits.
BASE = dict(n_embd=512, n_layer=4, n_head=8, n_head_kv=2, head_dim=64, n_ff=1536, n_vocab=2048)
MODELS_SPEC = {
    "llama-f16": dict(BASE, arch="llama", wtype="F16"),
    "llama-q8_0": dict(BASE, arch="llama", wtype="Q8_0"),
    "llama-q4_0-tied": dict(BASE, arch="llama", wtype="Q4_0", tied=True),
    "qwen2-q6_k": dict(BASE, arch="qwen2", wtype="Q6_K", n_head_kv=4),
    "qwen3-f16-tied": dict(BASE, arch="qwen3", wtype="F16", head_dim=128, tied=True),
    "qwen3-q4_k_m": dict(BASE, arch="qwen3", wtype="F16", head_dim=128, quantize="Q4_K_M"),
    "qwen3moe-q8_0": dict(BASE, arch="qwen3moe", wtype="Q8_0", n_layer=3, head_dim=128, n_expert=8, n_expert_used=2, n_ff_exp=256),
    "gemma2-q8_0": dict(BASE, arch="gemma2", wtype="Q8_0", n_layer=6, head_dim=256, n_head=4, n_swa=512, tied=True),
    # Added with the gpt-oss graph (`--only gpt-oss`).
    "gpt-oss-q8_0": dict(BASE, arch="gpt-oss", wtype="Q8_0", n_layer=4, n_head=8, n_head_kv=2, head_dim=64, n_expert=8, n_expert_used=2, n_ff_exp=256, n_swa=128),
    # Added with the phi3 graph (`--only phi3`).
    "phi3-q8_0": dict(BASE, arch="phi3", wtype="Q8_0", n_head_kv=8, n_vocab=3072),
    # Added with the gemma3 graph (appended to measured.jsonl by `--only gemma3`).
    "gemma3-q4_0": dict(BASE, arch="gemma3", wtype="Q4_0", n_layer=6, head_dim=256, n_head=4, n_swa=512, tied=True),
    # A large vocabulary: the logits are the compute buffer's peak, as in real models.
    "llama-vocab16k-q8_0": dict(BASE, arch="llama", wtype="Q8_0", n_embd=256, n_head=4, n_ff=768, n_vocab=16384),
    "qwen3-vocab16k-q4_0-tied": dict(BASE, arch="qwen3", wtype="Q4_0", n_embd=256, n_head=4, head_dim=128, n_ff=768, n_vocab=16384, tied=True),
    "deepseek2-q8_0": dict(BASE, arch="deepseek2", wtype="Q8_0", n_layer=3, n_head=8, n_head_kv=1, n_dense=1,
                           q_lora_rank=256, kv_lora_rank=256, rope_dim=64, nope_dim=128, v_head_dim=128,
                           n_expert=8, n_expert_used=2, n_ff_exp=256, n_shared=1),
}
# Held out: not looked at while the compute model's per-token terms were derived
# (`--heldout` writes them to heldout.jsonl).
HELDOUT = {
    "ho-llama-q5_k": dict(BASE, arch="llama", wtype="Q5_K", n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, n_vocab=6000, n_layer=5),
    "ho-qwen2-q8_0-tied": dict(BASE, arch="qwen2", wtype="Q8_0", n_embd=1024, n_head=16, n_head_kv=2, n_ff=2816, n_vocab=3000, tied=True),
    "ho-qwen3-q4_k": dict(BASE, arch="qwen3", wtype="Q4_K", n_embd=768, n_head=6, n_head_kv=2, head_dim=128, n_ff=2304, n_vocab=24000),
    "ho-qwen3moe-q4_0": dict(BASE, arch="qwen3moe", wtype="Q4_0", n_layer=2, n_embd=768, n_head=8, n_head_kv=4, head_dim=128, n_expert=16, n_expert_used=4, n_ff_exp=512, n_vocab=4000),
    "ho-gemma2-f16": dict(BASE, arch="gemma2", wtype="F16", n_layer=4, n_embd=768, head_dim=256, n_head=4, n_head_kv=2, n_ff=2048, n_swa=1024, tied=True, n_vocab=5000),
    "ho-deepseek2-q8_0": dict(BASE, arch="deepseek2", wtype="Q8_0", n_layer=3, n_embd=768, n_head=12, n_head_kv=1, n_dense=1,
                              q_lora_rank=384, kv_lora_rank=256, rope_dim=64, nope_dim=128, v_head_dim=128,
                              n_expert=8, n_expert_used=3, n_ff_exp=512, n_shared=2, n_vocab=4000),
}
# Architectures moved onto the graph after the others (`--more` -> more.jsonl: each at configs()
# and at the FRESH settings; the ho- models are held out: other sizes and types).
MORE = {
    "qwen2moe-q8_0": dict(BASE, arch="qwen2moe", wtype="Q8_0", n_layer=3, n_head_kv=4, n_expert=8, n_expert_used=2, n_ff_exp=256, n_ff_shexp=512),
    "mistral3-q4_k": dict(BASE, arch="mistral3", wtype="Q4_K", n_head_kv=4, head_dim=128, n_ff=1536),
    "ho-qwen2moe-q4_0": dict(BASE, arch="qwen2moe", wtype="Q4_0", n_layer=2, n_embd=768, n_head=12, n_head_kv=2, n_expert=16, n_expert_used=4,
                                  n_ff_exp=512, n_ff_shexp=1024, n_vocab=3000),
    "command-r-q8_0": dict(BASE, arch="command-r", wtype="Q8_0", tied=True),
    "ho-command-r-q4_k": dict(BASE, arch="command-r", wtype="Q4_K", n_layer=3, n_embd=768, n_head=6, n_head_kv=2, head_dim=128, n_ff=2048,
                              n_vocab=4096, tied=True),
    "starcoder2-q8_0": dict(BASE, arch="starcoder2", wtype="Q8_0", n_head_kv=4),
    "ho-starcoder2-q5_k-tied": dict(BASE, arch="starcoder2", wtype="Q5_K", n_layer=3, n_embd=768, n_head=12, n_head_kv=2, n_ff=3072, n_vocab=4096, tied=True),
    # DeepSeek-V3-style files with an MTP block (nextn_predict_layers 1, its tensors skipped).
    "deepseek2-mtp-q8_0": dict(BASE, arch="deepseek2", wtype="Q8_0", n_layer=4, n_head=8, n_head_kv=1, n_dense=1, nextn=1,
                               q_lora_rank=256, kv_lora_rank=256, rope_dim=64, nope_dim=128, v_head_dim=128,
                               n_expert=8, n_expert_used=2, n_ff_exp=256, n_shared=1),
    "glm4moe-q8_0": dict(BASE, arch="glm4moe", wtype="Q8_0", n_layer=4, n_head_kv=2, head_dim=128, n_dense=1, nextn=1,
                         n_expert=8, n_expert_used=2, n_ff_exp=256, n_shared=1),
    "ho-glm4moe-q4_k": dict(BASE, arch="glm4moe", wtype="Q4_K", n_layer=3, n_embd=768, n_head=12, n_head_kv=4, head_dim=128, n_ff=1536, n_dense=1,
                            n_expert=16, n_expert_used=4, n_ff_exp=512, n_shared=1, n_vocab=4096),
    "llama4-q8_0": dict(BASE, arch="llama4", wtype="Q8_0", n_layer=4, n_head_kv=2, moe_step=2, n_expert=8, n_expert_used=1, n_ff_exp=256),
    "ho-llama4-q4_k-nochunk": dict(BASE, arch="llama4", wtype="Q4_K", n_layer=5, n_embd=768, n_head=12, n_head_kv=4, n_ff=1536, moe_step=1,
                                   n_expert=16, n_expert_used=1, n_ff_exp=512, n_vocab=4096, n_swa=0),
    "glm4-q8_0-mtp": dict(BASE, arch="glm4", wtype="Q8_0", n_layer=4, n_head_kv=2, head_dim=128, n_ff=1024, nextn=1),
    "ho-glm4-q5_k": dict(BASE, arch="glm4", wtype="Q5_K", n_layer=3, n_embd=768, n_head=6, n_head_kv=2, head_dim=128, n_ff=2048, n_vocab=4096),
    "smollm3-q8_0": dict(BASE, arch="smollm3", wtype="Q8_0", n_layer=4),
    "ho-smollm3-q4_k-tied": dict(BASE, arch="smollm3", wtype="Q4_K", n_layer=8, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, n_vocab=4096, tied=True),
    "olmo2-q8_0": dict(BASE, arch="olmo2", wtype="Q8_0", n_head_kv=8),
    "ho-olmo2-swa-q4_k": dict(BASE, arch="olmo2", wtype="Q4_K", n_layer=4, n_embd=768, n_head=12, n_head_kv=4, n_ff=2048, n_vocab=4096, n_swa=512),
    "cohere2-q8_0": dict(BASE, arch="cohere2", wtype="Q8_0", n_head_kv=2, n_swa=256, tied=True),
    "ho-cohere2-q6_k": dict(BASE, arch="cohere2", wtype="Q6_K", n_layer=8, n_embd=768, n_head=6, n_head_kv=2, head_dim=128, n_ff=2048,
                            n_vocab=4096, n_swa=1024, tied=True),
    "phi2-q8_0-fused": dict(BASE, arch="phi2", wtype="Q8_0", n_head_kv=8, fused=True),
    "ho-phi2-q4_0": dict(BASE, arch="phi2", wtype="Q4_0", n_layer=3, n_embd=768, n_head=12, n_head_kv=12, n_ff=3072, n_vocab=4096),
    "ho-mistral3-q6_k": dict(BASE, arch="mistral3", wtype="Q6_K", n_layer=3, n_embd=1024, n_head=8, n_head_kv=2, head_dim=128, n_ff=2816, n_vocab=5000),
}
FTYPES = {"Q4_K_M": 15, "Q6_K": 18, "Q8_0": 7}
FRESH = False

# Configurations: llama.cpp context parameters.
def configs(name):
    base = dict(n_ctx=4096, n_batch=2048, n_ubatch=512, fa="off", type_k="f16", type_v="f16", n_seq=1, kv_unified=False, swa_full=False, mmap=True)
    out = [base,
           dict(base, n_ctx=1000),
           dict(base, fa="on"),
           dict(base, fa="on", type_k="q8_0", type_v="q8_0", n_ctx=8192),
           dict(base, fa="on", type_k="q4_0", type_v="f16", n_ubatch=256),
           dict(base, n_ctx=2048, n_ubatch=128, n_batch=512),
           dict(base, n_seq=4, n_ctx=8192),
           dict(base, n_seq=3, kv_unified=True, n_ctx=6000, fa="on"),
           dict(base, mmap=False),
           dict(base, n_ctx=16384, fa="on", n_ubatch=1024, n_batch=1024)]
    if FRESH:
        # Settings never used while the compute graphs were written (`--fresh`).
        out = [dict(base, n_ctx=32768, fa="on"),
               dict(base, n_ctx=3000, n_ubatch=64, n_batch=64),
               dict(base, n_seq=2, n_ctx=8192, fa="on", type_k="q8_0", type_v="q4_0"),
               dict(base, n_ctx=2048, n_ubatch=2048, n_batch=2048),
               dict(base, n_seq=2, kv_unified=True, n_ctx=5000, type_k="q8_0")]
        if name.startswith(("gemma2", "ho-gemma2", "gemma3")):
            out.append(dict(base, n_seq=3, n_ctx=9000, fa="on", n_ubatch=256))
        return out
    if name.startswith(("gemma2", "gemma3")):
        out += [dict(base, swa_full=True), dict(base, n_seq=2, n_ctx=8192, fa="on"), dict(base, n_seq=2, n_ctx=8192, kv_unified=True)]
    return out


TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "bf16": 30, "iq4_nl": 20}


def child_env():
    import llama_cpp
    base = os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so")
    return dict(os.environ, LD_PRELOAD=SHIM, VRAMCALC_GGML_BASE=base, OMP_NUM_THREADS="1")


def child(path, cfg):
    import llama_cpp as L
    L.llama_log_set(ctypes.cast(None, L.llama_log_callback), ctypes.c_void_p())  # llama.cpp's own stderr logger
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.load_mode = 1 if cfg["mmap"] else 0
    mp.use_extra_bufts = False  # no CPU weight repacking: the buffers a GPU user's host side gets
    model = L.llama_model_load_from_file(path.encode(), mp)
    assert model
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = cfg["n_ctx"], cfg["n_batch"], cfg["n_ubatch"]
    cp.n_seq_max = cfg["n_seq"]
    cp.flash_attn_type = {"off": 0, "on": 1, "auto": -1}[cfg["fa"]]
    cp.type_k, cp.type_v = TYPES[cfg["type_k"]], TYPES[cfg["type_v"]]
    cp.kv_unified, cp.swa_full = cfg["kv_unified"], cfg["swa_full"]
    cp.n_threads = cp.n_threads_batch = 1
    cp.no_perf = True
    ctx = L.llama_init_from_model(model, cp)
    assert ctx
    sys.stderr.flush()
    os._exit(0)


LINE = re.compile(r"(load_tensors|llama_kv_cache|llama_context|sched_reserve|graph_reserve)\S*:\s+(\S+)\s+(model|KV|compute|output) buffer size =\s+([\d.]+) MiB")


def parse(log):
    """Pairs each buffer line with the exact size the shim printed just before it."""
    rec = {"model_buffers": {}, "kv_buffers": {}, "compute_buffers": {}, "output_buffers": {}}
    last = {}
    for line in log.splitlines():
        if line.startswith("VRAMCALC_BUF ") or line.startswith("VRAMCALC_SCHED "):
            _, name, size = line.split()
            last[name] = int(size)
            continue
        m = LINE.search(line)
        if m:
            name, kind, mib = m.group(2), m.group(3), float(m.group(4))
            exact = last.get(name)
            if exact is None and kind == "compute":
                exact = last.get(name.split("_")[0])
            assert exact is not None and abs(exact / 2**20 - mib) < 0.006, (line, exact)
            key = {"model": "model_buffers", "KV": "kv_buffers", "compute": "compute_buffers", "output": "output_buffers"}[kind]
            rec[key][name] = rec[key].get(name, 0) + exact if kind != "compute" else exact
        m = re.search(r"llama_kv_cache: size = .*K \((\w+)\):\s+([\d.]+) MiB, V \((\w+)\):\s+([\d.]+) MiB", line)
        if m:
            rec.setdefault("kv_lines", []).append(line.split("llama_kv_cache: ")[1])
        m = re.search(r"n_ctx\s+= (\d+)", line)
        if m and "llama_context" in line:
            rec["n_ctx"] = int(m.group(1))
        m = re.search(r"n_ctx_seq\s+= (\d+)", line)
        if m:
            rec["n_ctx_seq"] = int(m.group(1))
        m = re.search(r"flash_attn\s+= (\w+)", line)
        if m:
            rec["flash_attn"] = m.group(1)
    return rec


def header_bytes(path):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from gguf import GGUFReader
    r = GGUFReader(path)
    # The data section starts at r.data_offset; the header ends at or before it (alignment padding).
    return open(path, "rb").read(r.data_offset)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--out")
    ap.add_argument("--heldout", action="store_true")
    ap.add_argument("--more", action="store_true", help="the MORE models at configs() and the FRESH settings -> more.jsonl")
    ap.add_argument("--fresh", action="store_true", help="every model at the settings of configs()'s FRESH list -> fresh.jsonl")
    a = ap.parse_args()
    global FRESH
    FRESH = a.fresh
    if a.child:
        child(a.child[0], json.loads(a.child[1]))
        return
    os.makedirs(MODELS, exist_ok=True)
    os.makedirs(DATA, exist_ok=True)
    specs = HELDOUT if a.heldout else MODELS_SPEC
    if a.fresh:
        specs = dict(MODELS_SPEC, **HELDOUT)
    if a.more:
        specs = MORE
    default = "more.jsonl" if a.more else "fresh.jsonl" if a.fresh else "heldout.jsonl" if a.heldout else "measured.jsonl"
    out = open(a.out or os.path.join(DATA, default), "a")
    for name, spec in specs.items():
        if a.only and not name.startswith(a.only):
            continue
        path = os.path.join(MODELS, name + ".gguf")
        if not os.path.exists(path):
            if "quantize" in spec:
                src = os.path.join(MODELS, name + ".src.gguf")
                make_model(src, spec)
                quantize(src, path, FTYPES[spec["quantize"]])
            else:
                make_model(path, spec)
        with open(os.path.join(DATA, name + ".gguf-header"), "wb") as f:
            f.write(header_bytes(path))
        cfgs = configs(name)
        if a.more:
            FRESH = True
            cfgs = cfgs + configs(name)
            FRESH = False
        for cfg in cfgs:
            env = child_env()
            p = subprocess.run([sys.executable, __file__, "--child", path, json.dumps(cfg)], env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(name, cfg, "FAILED", p.stderr[-2000:], file=sys.stderr)
                continue
            rec = dict(model=name, heldout=a.heldout, file_size=os.path.getsize(path), params=cfg, **parse(p.stderr))
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(name, json.dumps(cfg), {k: rec[k] for k in ("model_buffers", "kv_buffers", "compute_buffers", "output_buffers")})


if __name__ == "__main__":
    main()
