//! More architectures' graphs (`src/models/<arch>.cpp`), built from `build`'s pieces like
//! those of `models.rs`: command-r and cohere2, starcoder2, phi2, glm4, glm4moe, llama4 and
//! olmo2.
//! Each was written from source before it was measured (`tools/measure_llama_cpp.py --more`,
//! `tests/llama_cpp_gallocr.rs`).

use crate::gguf::Header;

use super::build::{AttnInp, Builder};
use super::ggml::T;

/// command-r (`models/command-r.cpp`, Command R / Aya): layer norms, attention and FFN in
/// parallel on the same normed input, optional Q/K layer norms, the logits scaled; cohere2
/// (`models/cohere2.cpp`, Command R7B): the same with sliding-window layers
/// (`build_attn_inp_kv_iswa`), RoPE on those alone.
pub(super) fn command_r(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let cohere2 = hp.arch == "cohere2";
    let (mut inp_l, pos, out_ids) = b.start()?;
    let base = b.attn_inp(b.s.n_kv);
    let swa: Option<AttnInp> = (cohere2 && hp.any_swa()).then(|| b.attn_inp(b.s.n_kv_swa));
    for il in 0..n {
        let inp = if hp.is_swa[il] { swa.unwrap_or(base) } else { base };
        let rope = !cohere2 || hp.is_swa[il];
        b.at_layer(il);
        let w = b.wl(il, "attn_norm.weight");
        let mut ffn_inp = b.layer_norm(inp_l, w, None);
        let (mut q, mut k, v) = b.qkv(il, ffn_inp, hp.head_k, hp.head_v)?;
        if let Some(qn) = b.wl(il, "attn_q_norm.weight").filter(|_| !cohere2) {
            q = b.layer_norm(q, Some(qn), None);
        }
        if rope {
            q = b.g.rope(q, pos, None);
        }
        if let Some(kn) = b.wl(il, "attn_k_norm.weight").filter(|_| !cohere2) {
            k = b.layer_norm(k, Some(kn), None);
        }
        if rope {
            k = b.g.rope(k, pos, None);
        }
        let mut attn_out = b.attn(&inp, il, q, k, v, None, swa.is_some())?;
        if il + 1 == n {
            attn_out = b.g.get_rows(attn_out, out_ids);
            inp_l = b.g.get_rows(inp_l, out_ids);
            ffn_inp = b.g.get_rows(ffn_inp, out_ids);
        }
        let cur = b.ffn(il, ffn_inp, "ffn")?;
        let cur = b.g.add(cur, inp_l);
        inp_l = b.g.add(cur, attn_out);
    }
    let logit_scale = has_key(b.h, &format!("{}.logit_scale", hp.arch));
    b.head_norm_out(inp_l, true, false, logit_scale)
}

/// starcoder2 (`models/starcoder2.cpp`): layer norms with biases, biased Q/K/V and output,
/// a sequential GELU FFN with biases (`LLM_FFN_GELU`, `LLM_FFN_SEQ`).
pub(super) fn starcoder2(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let inp = b.attn_inp(b.s.n_kv);
    for il in 0..n {
        b.at_layer(il);
        let inp_sa = inp_l;
        let (w, bias) = (b.wl(il, "attn_norm.weight"), b.wl(il, "attn_norm.bias"));
        let cur = b.layer_norm(inp_l, w, bias);
        let (q, k, v) = b.qkv(il, cur, hp.head_k, hp.head_v)?;
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let cur = b.attn(&inp, il, q, k, v, None, false)?;
        let (cur, inp_sa) = b.last_rows(il, n, cur, inp_sa, out_ids);
        let ffn_inp = b.g.add(cur, inp_sa);
        let (w, bias) = (b.wl(il, "ffn_norm.weight"), b.wl(il, "ffn_norm.bias"));
        let cur = b.layer_norm(ffn_inp, w, bias);
        let cur = ffn_gelu(b, il, cur)?;
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.head_norm_out(inp_l, true, false, false)
}

/// `build_ffn(cur, up, up_b, …, down, down_b, LLM_FFN_GELU, LLM_FFN_SEQ)`: no gate.
pub(super) fn ffn_gelu(b: &mut Builder, il: usize, cur: T) -> Option<T> {
    let up = b.wl(il, "ffn_up.weight")?;
    let ub = b.wl(il, "ffn_up.bias");
    let cur = b.mm(up, cur, ub);
    let cur = b.g.unary(cur);
    let down = b.wl(il, "ffn_down.weight")?;
    let db = b.wl(il, "ffn_down.bias");
    Some(b.mm(down, cur, db))
}

/// phi2 (`models/phi2.cpp`): a biased layer norm feeding attention (fused or separate Q/K/V, Q
/// scaled after RoPE) and a GELU FFN in parallel, both added to the input; biased head.
pub(super) fn phi2(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let inp = b.attn_inp(b.s.n_kv);
    for il in 0..n {
        b.at_layer(il);
        let (w, bias) = (b.wl(il, "attn_norm.weight"), b.wl(il, "attn_norm.bias"));
        let mut normed = b.layer_norm(inp_l, w, bias);
        let (q, k, v) = match b.wl(il, "attn_qkv.weight") {
            Some(w) => {
                let bias = b.wl(il, "attn_qkv.bias");
                let qkv = b.mm(w, normed, bias);
                b.split_qkv(il, qkv, hp.head_k)
            }
            None => b.qkv(il, normed, hp.head_k, hp.head_v)?,
        };
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let q = b.g.scale(q);
        let mut cur = b.attn(&inp, il, q, k, v, None, false)?;
        if il + 1 == n {
            cur = b.g.get_rows(cur, out_ids);
            inp_l = b.g.get_rows(inp_l, out_ids);
            normed = b.g.get_rows(normed, out_ids);
        }
        let ffn = ffn_gelu(b, il, normed)?;
        let cur = b.g.add(cur, ffn);
        inp_l = b.g.add(cur, inp_l);
    }
    b.head_norm_out(inp_l, true, false, false)
}

/// `build_ffn(cur, ffn_up, …, ffn_down, LLM_FFN_SWIGLU, LLM_FFN_SEQ)`: up and gate fused in
/// `ffn_up`, one GLU over its halves.
pub(super) fn ffn_swiglu_fused(b: &mut Builder, il: usize, cur: T) -> Option<T> {
    let up = b.wl(il, "ffn_up.weight")?;
    let down = b.wl(il, "ffn_down.weight")?;
    let tmp = b.g.mul_mat(up, cur);
    let ne = b.g.ne(tmp);
    let ty = b.g.t[tmp].ty;
    let act = b.g.op(super::ggml::Op::Glu, ty, [ne[0] / 2, ne[1], ne[2], ne[3]], vec![tmp]);
    Some(b.g.mul_mat(down, act))
}

/// glm4 (`models/glm4.cpp`, GLM-4-0414): biased Q/K/V, norms after attention and after the FFN
/// (up and gate fused in `ffn_up`); not the M-RoPE vision variant; MTP blocks left out.
pub(super) fn glm4(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_trunk() as usize;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let inp = b.attn_inp(b.s.n_kv);
    for il in 0..n {
        b.at_layer(il);
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let (q, k, v) = b.qkv(il, cur, hp.head_k, hp.head_v)?;
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let cur = b.attn(&inp, il, q, k, v, None, false)?;
        let (cur, inp_sa) = b.last_rows(il, n, cur, inp_sa, out_ids);
        let w = b.wl(il, "post_attention_norm.weight");
        let cur = b.rms_norm(cur, w);
        let ffn_inp = b.g.add(cur, inp_sa);
        let w = b.wl(il, "ffn_norm.weight");
        let cur = b.rms_norm(ffn_inp, w);
        let cur = ffn_swiglu_fused(b, il, cur)?;
        let w = b.wl(il, "post_ffw_norm.weight");
        let cur = b.rms_norm(cur, w);
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.head_out(inp_l, false)
}

/// glm4moe (`models/glm4-moe.cpp`, GLM-4.5/4.6): biased Q/K/V, optional Q/K norms, the
/// post-attention norm before the FFN, dense leading layers, then experts (gating, selection
/// bias, normalisation and scale from the file) plus an ungated shared expert; MTP blocks out.
pub(super) fn glm4moe(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_trunk() as usize;
    let h = b.h;
    let key = |k: &str| h.get(&format!("glm4moe.{k}"));
    let norm_w = matches!(key("expert_weights_norm"), Some(crate::gguf::Value::Bool(true)));
    let w_scale = key("expert_weights_scale").and_then(crate::gguf::Value::as_f64).unwrap_or(0.0);
    let scale = w_scale != 0.0 && w_scale != 1.0;
    let sigmoid = key("expert_gating_func").and_then(crate::gguf::Value::as_u64) == Some(2);
    let (mut inp_l, pos, out_ids) = b.start()?;
    let inp = b.attn_inp(b.s.n_kv);
    for il in 0..n {
        b.at_layer(il);
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let (mut q, mut k, v) = b.qkv(il, cur, hp.head_k, hp.head_v)?;
        if let Some(qn) = b.wl(il, "attn_q_norm.weight") {
            q = b.rms_norm(q, Some(qn));
        }
        if let Some(kn) = b.wl(il, "attn_k_norm.weight") {
            k = b.rms_norm(k, Some(kn));
        }
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let cur = b.attn(&inp, il, q, k, v, None, false)?;
        let (cur, inp_sa) = b.last_rows(il, n, cur, inp_sa, out_ids);
        let ffn_inp = b.g.add(cur, inp_sa);
        let w = b.wl(il, "post_attention_norm.weight");
        let cur = b.rms_norm(ffn_inp, w);
        let cur = if (il as u64) < hp.n_dense_lead {
            b.ffn(il, cur, "ffn")?
        } else {
            let routed = b.moe_gated(il, cur, norm_w, scale, sigmoid)?;
            let shared = b.shared_expert(il, cur)?;
            b.g.add(routed, shared)
        };
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.head_out(inp_l, false)
}

/// llama4 (`models/llama4.cpp`): chunked attention on 3 layers of 4 (`build_attn_inp_kv_iswa`,
/// none when the window is 0), every 4th layer without RoPE and with the attention temperature
/// (`inp_attn_scale`), the others with RoPE and (but the 128-expert model) an unweighted RMS norm
/// of Q and K; dense or MoE layers (`moe_llama4`) with a shared expert.
pub(super) fn llama4(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_trunk() as usize;
    let no_rope_step = if hp.any_swa() { 4 } else { n };
    let kq_norm = hp.n_expert != 128;
    let w_scale = b.h.get("llama4.expert_weights_scale").and_then(crate::gguf::Value::as_f64).unwrap_or(0.0);
    let (mut inp_l, pos, out_ids) = b.start()?;
    let attn_scale = b.g.input(crate::gguf::GgmlType::F32, [1, 1, b.s.n_tokens, 1]);
    let base = b.attn_inp(b.s.n_kv);
    let swa: Option<AttnInp> = hp.any_swa().then(|| b.attn_inp(b.s.n_kv_swa));
    let rope_freqs = b.w("rope_freqs.weight");
    for il in 0..n {
        b.at_layer(il);
        let inp = if hp.is_swa[il] { swa.unwrap_or(base) } else { base };
        let use_rope = no_rope_step > 0 && (il + 1) % no_rope_step != 0;
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let (mut q, mut k, v) = b.qkv(il, cur, hp.head_k, hp.head_v)?;
        if use_rope {
            q = b.g.rope(q, pos, rope_freqs);
            k = b.g.rope(k, pos, rope_freqs);
        } else {
            q = b.g.mul(q, attn_scale);
        }
        if use_rope && kq_norm {
            q = b.g.rms_norm(q);
            k = b.g.rms_norm(k);
        }
        let cur = b.attn(&inp, il, q, k, v, None, swa.is_some())?;
        let (cur, inp_sa) = b.last_rows(il, n, cur, inp_sa, out_ids);
        let ffn_inp = b.g.add(cur, inp_sa);
        let w = b.wl(il, "ffn_norm.weight");
        let normed = b.rms_norm(ffn_inp, w);
        let cur = if b.h.tensor(&format!("blk.{il}.ffn_gate_inp.weight")).is_some() {
            let moe = b.moe_llama4(il, normed, w_scale != 0.0 && w_scale != 1.0)?;
            let shared = b.shared_expert(il, normed)?;
            b.g.add(moe, shared)
        } else {
            b.ffn(il, normed, "ffn")?
        };
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.head_out(inp_l, false)
}

pub(super) fn has_key(h: &Header, k: &str) -> bool {
    h.get(k).and_then(crate::gguf::Value::as_f64).is_some_and(|x| x != 0.0)
}

/// olmo2 (`models/olmo2.cpp`, OLMo 2 and, with a window, OLMo 3): no pre-norms; Q and K
/// RMS-normed over all heads before the reshape (`build_qkv(…, reshape = false)`), norms after
/// attention and after the FFN (that one with `il = -1`, so never pinned).
pub(super) fn olmo2(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_trunk() as usize;
    let n_tokens = b.s.n_tokens;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let base = b.attn_inp(b.s.n_kv);
    let swa: Option<AttnInp> = hp.any_swa().then(|| b.attn_inp(b.s.n_kv_swa));
    for il in 0..n {
        b.at_layer(il);
        let inp = if hp.is_swa[il] { swa.unwrap_or(base) } else { base };
        let inp_sa = inp_l;
        let (nh, nkv) = (hp.n_head[il], hp.n_head_kv[il]);
        let proj = |b: &mut Builder, x: &str| {
            let w = b.wl(il, &format!("attn_{x}.weight"))?;
            let bias = b.wl(il, &format!("attn_{x}.bias"));
            Some(b.mm(w, inp_l, bias))
        };
        let (q, k, v) = (proj(b, "q")?, proj(b, "k")?, proj(b, "v")?);
        let qn = b.wl(il, "attn_q_norm.weight");
        let q = b.rms_norm(q, qn);
        let kn = b.wl(il, "attn_k_norm.weight");
        let k = b.rms_norm(k, kn);
        let q = b.g.reshape(q, [hp.head_k, nh, n_tokens, 1]);
        let k = b.g.reshape(k, [hp.head_k, nkv, n_tokens, 1]);
        let v = b.g.reshape(v, [hp.head_v, nkv, n_tokens, 1]);
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let cur = b.attn(&inp, il, q, k, v, None, swa.is_some())?;
        let (cur, inp_sa) = b.last_rows(il, n, cur, inp_sa, out_ids);
        let w = b.wl(il, "post_attention_norm.weight");
        let cur = b.rms_norm(cur, w);
        let ffn_inp = b.g.add(cur, inp_sa);
        let cur = b.ffn(il, ffn_inp, "ffn")?;
        let normed = b.g.rms_norm(cur);
        let cur = match b.wl(il, "post_ffw_norm.weight") {
            Some(w) => b.g.mul(normed, w),
            None => normed,
        };
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.head_out(inp_l, false)
}
