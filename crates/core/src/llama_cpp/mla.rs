//! deepseek2 with multi-head latent attention (`src/models/deepseek2.cpp`, the `is_mla` path):
//! Q through its low-rank `attn_q_a`/`attn_q_b` (or `attn_q` in the Lite models), the nope part
//! absorbed into the latent by `attn_k_b`, one K-only cache of `kv_lora_rank + n_rot`
//! (`build_attn_inp_k`, `build_attn` for `llm_graph_input_attn_k`: V is a view of K, decompressed
//! by `attn_v_b` after attention), leading dense layers, then experts plus shared experts.

use crate::gguf::{GgmlType, Value};

use super::build::Builder;
use super::ggml::{Op, T};

pub fn deepseek2(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let h = b.h;
    let key = |k: &str| h.get(&format!("deepseek2.{k}"));
    if key("expert_group_count").and_then(Value::as_u64).unwrap_or(1) > 1 {
        return None; // grouped expert selection (DeepSeek-V3's): not modelled
    }
    let norm_w = matches!(key("expert_weights_norm"), Some(Value::Bool(true)));
    let w_scale = key("expert_weights_scale").and_then(Value::as_f64).unwrap_or(0.0);
    let scale = w_scale != 0.0 && w_scale != 1.0;
    // `expert_gating_func`: 1 softmax (the default here), 2 sigmoid.
    let sigmoid = key("expert_gating_func").and_then(Value::as_u64) == Some(2);
    // The MTP blocks (`nextn_predict_layers`) are not in the graph.
    let n = hp.n_trunk() as usize;
    let n_tokens = b.s.n_tokens;
    let (kvr, rope) = (hp.kv_lora_rank, hp.n_rot);
    let nope = hp.head_k_mla.checked_sub(rope)?;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let inp = b.attn_inp_k(b.s.n_kv);
    for il in 0..n {
        b.at_layer(il);
        let nh = hp.n_head[il];
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let q = match b.wl(il, "attn_q.weight") {
            Some(wq) => b.g.mul_mat(wq, cur),
            None => {
                let wa = b.wl(il, "attn_q_a.weight")?;
                let q = b.g.mul_mat(wa, cur);
                let nw = b.wl(il, "attn_q_a_norm.weight");
                let q = b.rms_norm(q, nw);
                let wb = b.wl(il, "attn_q_b.weight")?;
                b.g.mul_mat(wb, q)
            }
        };
        let q = b.g.reshape(q, [hp.head_k_mla, nh, n_tokens, 1]);
        let wkv = b.wl(il, "attn_kv_a_mqa.weight")?;
        let kv_pe = b.g.mul_mat(wkv, cur);
        let row = b.g.t[kv_pe].nb[1];
        let kv_cmpr = b.g.view(kv_pe, [kvr, n_tokens, 1, 1], [row, row * n_tokens, row * n_tokens]);
        let k_pe = b.g.view(kv_pe, [rope, 1, n_tokens, 1], [row, row, row * n_tokens]);
        let k_pe = b.g.rope(k_pe, pos, None);
        let nw = b.wl(il, "attn_kv_a_norm.weight");
        let kv_cmpr = b.rms_norm(kv_cmpr, nw);
        let qnb = b.g.t[q].nb;
        let q_nope = b.g.view(q, [nope, nh, n_tokens, 1], [qnb[1], qnb[2], qnb[3]]);
        let q_pe = b.g.view(q, [rope, nh, n_tokens, 1], [qnb[1], qnb[2], qnb[3]]);
        let q_pe = b.g.rope(q_pe, pos, None);
        let q_nope = b.g.permute(q_nope, [0, 2, 1, 3]);
        let wk_b = b.wl(il, "attn_k_b.weight")?;
        let absorbed = b.g.mul_mat(wk_b, q_nope);
        let absorbed = b.g.permute(absorbed, [0, 2, 1, 3]);
        let qcur = concat0(b, absorbed, q_pe);
        let kv_cmpr = b.g.reshape(kv_cmpr, [kvr, 1, n_tokens, 1]);
        let kcur = concat0(b, kv_cmpr, k_pe);
        let vcur = kv_cmpr;
        // `build_attn(llm_graph_input_attn_k *, …)`.
        b.g.expand(qcur);
        b.g.expand(vcur);
        b.g.expand(kcur);
        let kc = b.g.external(b.s.type_k, [hp.n_embd_k_gqa(il), b.s.n_kv, b.s.n_stream, 1]);
        let ck = b.cpy_k(kc, kcur, inp.k_idxs);
        b.g.expand(ck);
        let tk = b.s.type_k;
        let (hk, ek) = (hp.head_k, hp.n_embd_k_gqa(il));
        let k = b.g.view(kc, [hk, hp.n_head_kv[il], b.s.n_kv, b.s.n_stream], [tk.row_bytes(hk), tk.row_bytes(ek), tk.row_bytes(ek * b.s.n_kv)]);
        let knb = b.g.t[k].nb;
        let kne = b.g.ne(k);
        let v = b.g.view(k, [b.g.ne(vcur)[0], kne[1], kne[2], kne[3]], [knb[1], knb[2], knb[3]]);
        let wv_b = b.wl(il, "attn_v_b.weight")?;
        let cur = b.mha(qcur, k, v, inp.mask, None, Some(wv_b));
        let wo = b.wl(il, "attn_output.weight")?;
        let cur = b.g.mul_mat(wo, cur);
        let (ffn_inp, cur) = b.ffn_input(il, cur, inp_sa, out_ids);
        let cur = if (il as u64) < hp.n_dense_lead {
            b.ffn(il, cur, "ffn")?
        } else {
            let moe = b.moe_gated(il, cur, norm_w, scale, sigmoid)?;
            let up = b.wl(il, "ffn_up_shexp.weight")?;
            let gate = b.wl(il, "ffn_gate_shexp.weight");
            let down = b.wl(il, "ffn_down_shexp.weight")?;
            let sh = b.ffn_with(cur, up, gate, down);
            b.g.add(moe, sh)
        };
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.head_out(inp_l, false)
}

/// `ggml_concat(a, b, 0)`.
pub(super) fn concat0(b: &mut Builder, x: T, y: T) -> T {
    let (nx, ny) = (b.g.ne(x), b.g.ne(y));
    let ty: GgmlType = b.g.t[x].ty;
    b.g.op(Op::Concat, ty, [nx[0] + ny[0], nx[1], nx[2], nx[3]], vec![x, y])
}
