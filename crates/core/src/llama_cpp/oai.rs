//! gpt-oss (`src/models/openai-moe.cpp`): sliding-window layers every other layer
//! (`build_attn_inp_kv_iswa`), Q/K/V and output biases, attention sinks, and experts with biased
//! router and experts (`ggml_add_id`), `LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT` (the softmax
//! over the chosen experts' logits) and `swiglu_oai`. The last layer's output (`t_h_nextn`) is a
//! graph output, and the output rows are taken after the layers (`embeddings_nextn_masked` is off
//! by default, `llama_context` constructor).

use crate::gguf::{GgmlType, Value};

use super::build::Builder;
use super::ggml::{Op, T};

pub fn gpt_oss(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let base = b.attn_inp(b.s.n_kv);
    let swa = b.attn_inp(b.s.n_kv_swa);
    let w_scale = b.h.get(&format!("{}.expert_weights_scale", hp.arch)).and_then(Value::as_f64).unwrap_or(0.0);
    for il in 0..n {
        b.at_layer(il);
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let (q, k, v) = b.qkv(il, cur, hp.n_rot, hp.n_rot)?;
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let sinks = b.wl(il, "attn_sinks.weight");
        let inp = if hp.is_swa[il] { swa } else { base };
        let cur = b.attn_sinks(&inp, il, q, k, v, None, true, sinks)?;
        let ffn_inp = b.g.add(cur, inp_sa);
        let w = b.wl(il, "post_attention_norm.weight");
        let cur = b.rms_norm(ffn_inp, w);
        let cur = moe_oai(b, il, cur, w_scale != 0.0 && w_scale != 1.0)?;
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.g.set_output(inp_l);
    let cur = b.g.get_rows(inp_l, out_ids);
    b.head_out(cur, false)
}

/// `build_moe_ffn` as gpt-oss calls it.
fn moe_oai(b: &mut Builder, il: usize, cur: T, scale: bool) -> Option<T> {
    let ne = b.g.ne(cur);
    let (n_embd, n_tokens) = (ne[0], ne[1]);
    let (n_expert, n_used) = (b.hp.n_expert, b.hp.n_expert_used);
    if n_used == 0 || n_used > n_expert || n_expert > 1024 {
        return None;
    }
    let gate_inp = b.wl(il, "ffn_gate_inp.weight")?;
    let mut logits = b.g.mul_mat(gate_inp, cur);
    if let Some(bias) = b.wl(il, "ffn_gate_inp.bias") {
        logits = b.g.add(logits, bias);
    }
    let sorted = b.g.op(Op::Argsort, GgmlType::I32, b.g.ne(logits), vec![logits]);
    let snb = b.g.t[sorted].nb;
    let selected = b.g.view(sorted, [n_used, n_tokens, 1, 1], [snb[1], snb[2], snb[3]]);
    let probs3 = b.g.reshape(logits, [1, n_expert, n_tokens, 1]);
    let weights = b.g.get_rows(probs3, selected);
    let w2 = b.g.reshape(weights, [n_used, n_tokens, 1, 1]);
    let w2 = b.g.soft_max(w2, None, None);
    let mut weights = b.g.reshape(w2, [1, n_used, n_tokens, 1]);
    if scale {
        weights = b.g.scale(weights);
    }
    b.g.expand(weights);
    let cur = b.g.reshape(cur, [n_embd, 1, n_tokens, 1]);
    let expert = |b: &mut Builder, name: &str, x: T| -> Option<T> {
        let w = b.wl(il, &format!("ffn_{name}_exps.weight"))?;
        let y = b.g.mul_mat_id(w, x, selected);
        Some(match b.wl(il, &format!("ffn_{name}_exps.bias")) {
            Some(bias) => b.g.unary_like(Op::AddId, y, vec![y, bias, selected]),
            None => y,
        })
    };
    let up = expert(b, "up", cur)?;
    let gate = expert(b, "gate", cur)?;
    let act = b.g.glu_split(gate, up);
    let experts = expert(b, "down", act)?;
    let experts = b.g.mul(experts, weights);
    Some(b.sum_experts(experts, n_used))
}
