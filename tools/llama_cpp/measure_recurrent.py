#!/usr/bin/env python3
"""Measures llama.cpp's recurrent-state (RS) buffers and the other buffers for small Mamba,
Mamba-2, granitehybrid (Granite 4.0-H: Mamba-2 and attention layers) and jamba (Mamba-1 and
attention layers) models, and granite/granitemoe with random weights (same harness as tools/measure_llama_cpp.py: the `gguf`
package writes the file, a child process loads it with llama-cpp-python's CPU backend under
LD_PRELOAD=size_shim.so, which prints the exact bytes behind each logged buffer).

    gcc -shared -fPIC -O1 -o /tmp/size_shim.so tools/llama_cpp/size_shim.c -ldl
    /root/mvenv/bin/python tools/llama_cpp/measure_recurrent.py           # -> crates/core/tests/data/llama_cpp/recurrent.jsonl
    /root/mvenv/bin/python tools/llama_cpp/measure_recurrent.py --fresh   # -> recurrent_fresh.jsonl (settings measured after the graphs were written)

The RS buffer lines ("llama_memory_recurrent: CPU RS buffer size = X MiB") are recorded as
`rs_buffers`, the summary line ("R (f32): …, S (f32): …") as `rs_lines`.
"""
import json, os, re, subprocess, sys
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import measure_llama_cpp as M  # noqa: E402

RS = re.compile(r"llama_memory_recurrent:\s+(\S+) RS buffer size =\s+([\d.]+) MiB")


def writer(w, wt, rng, f32_names=()):
    """`t(name, shape[, type])`: a random tensor, shape in ggml order; 1-d tensors, norms and
    router weights f32, the rest of the file's type."""
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quant_shape_to_byte_shape

    def t(name, shape, ty=None):
        ty = wt if ty is None and len(shape) >= 2 and not name.endswith(f32_names) else (ty or Q.F32)
        if ty == Q.F32:
            w.add_tensor(name, rng.standard_normal(shape[::-1]).astype(np.float32) * 0.02)
        elif ty == Q.F16:
            w.add_tensor(name, (rng.standard_normal(shape[::-1]) * 0.02).astype(np.float16))
        else:
            bs = quant_shape_to_byte_shape(shape[::-1], ty)
            w.add_tensor(name, rng.integers(0, 255, size=bs, dtype=np.uint8), raw_dtype=ty)
    return t


def make_mamba(path, m):
    import gguf
    from gguf import GGMLQuantizationType as Q
    arch, wt = m["arch"], Q[m["wtype"]]
    E, L, V = m["n_embd"], m["n_layer"], m["n_vocab"]
    d_inner, d_state, d_conv = 2 * E, m["d_state"], m["d_conv"]
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(m.get("n_ctx_train", 8192))
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(m["dt_rank"])
    if arch == "mamba2":
        w.add_ssm_group_count(m["n_group"])
    M.vocab(w, V)
    t = writer(w, wt, rng)

    t("token_embd.weight", [E, V])
    t("output_norm.weight", [E])
    if not m.get("tied"):
        t("output.weight", [E, V])
    for i in range(L):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", [E])
        if arch == "mamba":
            t(b + "ssm_in.weight", [E, 2 * d_inner])
            t(b + "ssm_conv1d.weight", [d_conv, d_inner], Q.F32)
            t(b + "ssm_conv1d.bias", [d_inner])
            t(b + "ssm_x.weight", [d_inner, m["dt_rank"] + 2 * d_state])
            t(b + "ssm_dt.weight", [m["dt_rank"], d_inner])
            t(b + "ssm_dt.bias", [d_inner])
            t(b + "ssm_a", [d_state, d_inner], Q.F32)
            t(b + "ssm_d", [d_inner])
        else:
            n_head, ng = m["dt_rank"], m["n_group"]
            d_in_proj = 2 * d_inner + 2 * ng * d_state + n_head
            t(b + "ssm_in.weight", [E, d_in_proj])
            t(b + "ssm_conv1d.weight", [d_conv, d_inner + 2 * ng * d_state], Q.F32)
            t(b + "ssm_conv1d.bias", [d_inner + 2 * ng * d_state])
            t(b + "ssm_dt.bias", [n_head])
            t(b + "ssm_a", [1, n_head], Q.F32)
            t(b + "ssm_d", [1, n_head], Q.F32)
            t(b + "ssm_norm.weight", [d_inner // ng, ng], Q.F32)
        t(b + "ssm_out.weight", [d_inner, E])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_granite_hybrid(path, m):
    """granitehybrid (src/models/granite-hybrid.cpp): Mamba-2 layers where head_count_kv is 0."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    arch, wt = m["arch"], Q[m["wtype"]]
    hybrid = arch == "granitehybrid"
    E, L, V, H, KV, hd, F = m["n_embd"], m["n_layer"], m["n_vocab"], m["n_head"], m["n_head_kv"], m["head_dim"], m["n_ff"]
    d_inner, ds, dc, nh, ng = 2 * E, m["d_state"], m["d_conv"], m["dt_rank"], m["n_group"]
    attn = m["attn_layers"]
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(8192)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv([KV if i in attn else 0 for i in range(L)] if hybrid else KV)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-5)
    if hybrid:
        w.add_ssm_conv_kernel(dc)
        w.add_ssm_inner_size(d_inner)
        w.add_ssm_state_size(ds)
        w.add_ssm_time_step_rank(nh)
        w.add_ssm_group_count(ng)
    for k, v in (("embedding_scale", 12.0), ("residual_scale", 0.22), ("logit_scale", 8.0), ("attention.scale", 0.0078125)):
        w.add_float32(f"{arch}.{k}", v)
    if m.get("n_expert"):
        w.add_expert_count(m["n_expert"])
        w.add_expert_used_count(m["n_expert_used"])
        w.add_expert_shared_feed_forward_length(m["n_ff_shexp"])
    M.vocab(w, V)
    t = writer(w, wt, rng, ("gate_inp.weight", "norm.weight"))

    t("token_embd.weight", [E, V])
    t("output_norm.weight", [E])
    if not m.get("tied"):
        t("output.weight", [E, V])
    for i in range(L):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", [E])
        if i in attn or not hybrid:
            t(b + "attn_q.weight", [E, H * hd]); t(b + "attn_k.weight", [E, KV * hd]); t(b + "attn_v.weight", [E, KV * hd])
            t(b + "attn_output.weight", [H * hd, E])
        else:
            t(b + "ssm_in.weight", [E, 2 * d_inner + 2 * ng * ds + nh])
            t(b + "ssm_conv1d.weight", [dc, d_inner + 2 * ng * ds], Q.F32)
            t(b + "ssm_conv1d.bias", [d_inner + 2 * ng * ds])
            t(b + "ssm_dt.bias", [nh])
            t(b + "ssm_a", [1, nh], Q.F32)
            t(b + "ssm_d", [1, nh], Q.F32)
            t(b + "ssm_norm.weight", [d_inner // ng, ng], Q.F32)
            t(b + "ssm_out.weight", [d_inner, E])
        t(b + "ffn_norm.weight", [E])
        if m.get("n_expert"):
            X, S = m["n_expert"], m["n_ff_shexp"]
            t(b + "ffn_gate_inp.weight", [E, X])
            t(b + "ffn_gate_exps.weight", [E, F, X]); t(b + "ffn_up_exps.weight", [E, F, X]); t(b + "ffn_down_exps.weight", [F, E, X])
            t(b + "ffn_gate_shexp.weight", [E, S]); t(b + "ffn_up_shexp.weight", [E, S]); t(b + "ffn_down_shexp.weight", [S, E])
        else:
            t(b + "ffn_gate.weight", [E, F]); t(b + "ffn_up.weight", [E, F]); t(b + "ffn_down.weight", [F, E])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_jamba(path, m):
    """jamba (src/models/jamba.cpp): Mamba-1 layers (dt, B, C norms) where head_count_kv is 0,
    attention elsewhere; experts on the layers in `moe_layers`."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    wt = Q[m["wtype"]]
    E, L, V, H, KV, F = m["n_embd"], m["n_layer"], m["n_vocab"], m["n_head"], m["n_head_kv"], m["n_ff"]
    d_inner, ds, dc, dtr = 2 * E, m["d_state"], m["d_conv"], m["dt_rank"]
    attn, moe = m["attn_layers"], m["moe_layers"]
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "jamba")
    w.add_context_length(8192)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv([KV if i in attn else 0 for i in range(L)])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_ssm_conv_kernel(dc)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(ds)
    w.add_ssm_time_step_rank(dtr)
    w.add_expert_count(m["n_expert"])
    w.add_expert_used_count(m["n_expert_used"])
    M.vocab(w, V)
    t = writer(w, wt, rng, ("gate_inp.weight", "norm.weight"))
    t("token_embd.weight", [E, V])
    t("output_norm.weight", [E])
    t("output.weight", [E, V])
    hd = E // H
    for i in range(L):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", [E])
        if i in attn:
            t(b + "attn_q.weight", [E, E]); t(b + "attn_k.weight", [E, KV * hd]); t(b + "attn_v.weight", [E, KV * hd])
            t(b + "attn_output.weight", [E, E])
        else:
            t(b + "ssm_in.weight", [E, 2 * d_inner])
            t(b + "ssm_conv1d.weight", [dc, d_inner], Q.F32)
            t(b + "ssm_conv1d.bias", [d_inner])
            t(b + "ssm_x.weight", [d_inner, dtr + 2 * ds])
            t(b + "ssm_dt_norm.weight", [dtr]); t(b + "ssm_b_norm.weight", [ds]); t(b + "ssm_c_norm.weight", [ds])
            t(b + "ssm_dt.weight", [dtr, d_inner])
            t(b + "ssm_dt.bias", [d_inner])
            t(b + "ssm_a", [ds, d_inner], Q.F32)
            t(b + "ssm_d", [d_inner])
            t(b + "ssm_out.weight", [d_inner, E])
        t(b + "ffn_norm.weight", [E])
        if i in moe:
            X = m["n_expert"]
            t(b + "ffn_gate_inp.weight", [E, X])
            t(b + "ffn_gate_exps.weight", [E, F, X]); t(b + "ffn_up_exps.weight", [E, F, X]); t(b + "ffn_down_exps.weight", [F, E, X])
        else:
            t(b + "ffn_gate.weight", [E, F]); t(b + "ffn_up.weight", [E, F]); t(b + "ffn_down.weight", [F, E])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_falcon_h1(path, m):
    """falcon-h1 (src/models/falcon-h1.cpp): attention and Mamba-2 in every layer."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    wt = Q[m["wtype"]]
    E, L, V, H, KV, hd, F = m["n_embd"], m["n_layer"], m["n_vocab"], m["n_head"], m["n_head_kv"], m["head_dim"], m["n_ff"]
    d_inner, ds, dc, nh, ng = m["d_inner"], m["d_state"], m["d_conv"], m["dt_rank"], m["n_group"]
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "falcon-h1")
    w.add_context_length(8192)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_conv_kernel(dc)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(ds)
    w.add_ssm_time_step_rank(nh)
    w.add_ssm_group_count(ng)
    M.vocab(w, V)
    t = writer(w, wt, rng, ("norm.weight", "ffn_norm"))
    t("token_embd.weight", [E, V])
    t("output_norm.weight", [E])
    if not m.get("tied"):
        t("output.weight", [E, V])
    conv = d_inner + 2 * ng * ds
    for i in range(L):
        b = f"blk.{i}."
        t(b + "ssm_in.weight", [E, d_inner + conv + nh])
        t(b + "ssm_conv1d.weight", [dc, conv], Q.F32)
        t(b + "ssm_conv1d.bias", [conv])
        t(b + "ssm_dt.bias", [nh])
        t(b + "ssm_a", [1, nh], Q.F32)
        t(b + "ssm_d", [1, nh], Q.F32)
        t(b + "ssm_norm.weight", [d_inner // ng, ng], Q.F32)
        t(b + "ssm_out.weight", [d_inner, E])
        t(b + "attn_q.weight", [E, H * hd]); t(b + "attn_k.weight", [E, KV * hd]); t(b + "attn_v.weight", [E, KV * hd])
        t(b + "attn_output.weight", [H * hd, E])
        t(b + "attn_norm.weight", [E])
        t(b + "ffn_norm", [E], Q.F32)
        t(b + "ffn_gate.weight", [E, F]); t(b + "ffn_up.weight", [E, F]); t(b + "ffn_down.weight", [F, E])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


SPECS = {
    "mamba-q8_0": dict(arch="mamba", wtype="Q8_0", n_embd=512, n_layer=4, n_vocab=2048, d_state=16, d_conv=4, dt_rank=32),
    "mamba2-f16": dict(arch="mamba2", wtype="F16", n_embd=512, n_layer=4, n_vocab=2048, d_state=64, d_conv=4, dt_rank=16, n_group=1),
    "granitehybrid-q8_0": dict(arch="granitehybrid", wtype="Q8_0", n_embd=512, n_layer=4, n_vocab=2048, n_head=8, n_head_kv=2, head_dim=64, n_ff=1536,
                               d_state=64, d_conv=4, dt_rank=16, n_group=1, attn_layers=[2]),
    "ho-granitehybrid-moe-q4_0-tied": dict(arch="granitehybrid", wtype="Q4_0", n_embd=768, n_layer=5, n_vocab=3000, n_head=12, n_head_kv=4, head_dim=64,
                                           n_ff=512, n_expert=8, n_expert_used=2, n_ff_shexp=1024, d_state=128, d_conv=4, dt_rank=24, n_group=1,
                                           attn_layers=[1, 4], tied=True),
    # granite and granitemoe (Granite 3.x): granitehybrid's layers without the recurrent ones.
    "granite-q8_0": dict(arch="granite", wtype="Q8_0", n_embd=512, n_layer=4, n_vocab=2048, n_head=8, n_head_kv=2, head_dim=64, n_ff=1536,
                         d_state=0, d_conv=0, dt_rank=0, n_group=1, attn_layers=[]),
    "ho-granitemoe-q4_k-tied": dict(arch="granitemoe", wtype="Q4_K", n_embd=768, n_layer=3, n_vocab=3000, n_head=12, n_head_kv=4, head_dim=64,
                                    n_ff=512, n_expert=8, n_expert_used=2, n_ff_shexp=1024, d_state=0, d_conv=0, dt_rank=0, n_group=1,
                                    attn_layers=[], tied=True),
    "jamba-q8_0": dict(arch="jamba", wtype="Q8_0", n_embd=512, n_layer=4, n_vocab=2048, n_head=8, n_head_kv=2, n_ff=1024, d_state=16, d_conv=4,
                       dt_rank=32, n_expert=4, n_expert_used=2, attn_layers=[2], moe_layers=[1, 3]),
    "ho-jamba-q4_0": dict(arch="jamba", wtype="Q4_0", n_embd=768, n_layer=5, n_vocab=3000, n_head=12, n_head_kv=4, n_ff=1536, d_state=16, d_conv=4,
                          dt_rank=64, n_expert=8, n_expert_used=2, attn_layers=[0, 4], moe_layers=[1, 3]),
    "falcon-h1-q8_0": dict(arch="falcon-h1", wtype="Q8_0", n_embd=512, n_layer=3, n_vocab=2048, n_head=8, n_head_kv=2, head_dim=64, n_ff=1536,
                           d_inner=768, d_state=64, d_conv=4, dt_rank=12, n_group=1),
    "ho-falcon-h1-q4_k-tied": dict(arch="falcon-h1", wtype="Q4_K", n_embd=768, n_layer=2, n_vocab=3000, n_head=12, n_head_kv=4, head_dim=64,
                                   n_ff=2048, d_inner=1536, d_state=128, d_conv=4, dt_rank=24, n_group=2, tied=True),
    "ho-mamba2-q4_0-tied": dict(arch="mamba2", wtype="Q4_0", n_embd=768, n_layer=3, n_vocab=3000, d_state=128, d_conv=4, dt_rank=24, n_group=2, tied=True),
}


def configs(fresh):
    base = dict(n_ctx=4096, n_batch=2048, n_ubatch=512, fa="off", type_k="f16", type_v="f16", n_seq=1, kv_unified=False, swa_full=False, mmap=True)
    if fresh:
        # Measured after the graphs were written and checked (`--fresh` -> recurrent_fresh.jsonl).
        return [dict(base, n_ctx=32768, n_ubatch=2048, n_batch=2048), dict(base, n_seq=2, kv_unified=True, n_ctx=5000, n_ubatch=64, n_batch=64),
                dict(base, n_seq=5, n_ctx=10000, fa="on", n_ubatch=1000)]
    return [base, dict(base, n_seq=4, n_ctx=8192), dict(base, n_ubatch=128, n_batch=512), dict(base, mmap=False), dict(base, n_seq=3, n_ctx=3000, n_ubatch=256)]


def main():
    os.makedirs(M.MODELS, exist_ok=True)
    fresh = "--fresh" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--fresh"]
    out = open(os.path.join(M.DATA, "recurrent_fresh.jsonl" if fresh else "recurrent.jsonl"), "a")
    only = args[0] if args else ""
    for name, spec in SPECS.items():
        if not name.startswith(only):
            continue
        path = os.path.join(M.MODELS, name + ".gguf")
        if not os.path.exists(path):
            make = {"jamba": make_jamba, "falcon-h1": make_falcon_h1}.get(spec["arch"], make_granite_hybrid if spec["arch"].startswith("granite") else make_mamba)
            make(path, spec)
        with open(os.path.join(M.DATA, name + ".gguf-header"), "wb") as f:
            f.write(M.header_bytes(path))
        for cfg in configs(fresh):
            p = subprocess.run([sys.executable, M.__file__, "--child", path, json.dumps(cfg)], env=M.child_env(), capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(name, cfg, "FAILED", p.stderr[-3000:], file=sys.stderr)
                continue
            rec = dict(model=name, heldout=name.startswith("ho-"), file_size=os.path.getsize(path), params=cfg, **M.parse(p.stderr))
            last, rs = {}, {}
            for line in p.stderr.splitlines():
                if line.startswith("VRAMCALC_BUF "):
                    _, n, size = line.split()
                    last[n] = int(size)
                mm = RS.search(line)
                if mm:
                    exact = last[mm.group(1)]
                    assert abs(exact / 2**20 - float(mm.group(2))) < 0.006, line
                    rs[mm.group(1)] = rs.get(mm.group(1), 0) + exact
                if "llama_memory_recurrent: size" in line:
                    rec.setdefault("rs_lines", []).append(line.split("llama_memory_recurrent: ")[1])
            rec["rs_buffers"] = rs
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(name, json.dumps(cfg), {k: rec[k] for k in ("model_buffers", "rs_buffers", "compute_buffers", "output_buffers")})


if __name__ == "__main__":
    main()
