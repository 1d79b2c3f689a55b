//! The graphs llama.cpp builds for one micro-batch, per architecture (`src/models/<arch>.cpp`,
//! the `graph` constructors), out of `build`'s pieces; and the compute buffers `gallocr` sizes for
//! them. Covered here: llama, mistral3, smollm3, qwen2, qwen3, qwen3moe, qwen2moe (the llama-family body,
//! with `build_moe_ffn` and qwen2moe's gated shared expert), gemma2 and gemma3 (sliding-window
//! caches, soft-capping), phi3; phi2, command-r and cohere2, starcoder2, glm4 and glm4moe,
//! llama4, olmo2 (`more_models.rs`); gpt-oss (`oai.rs`), deepseek2 with MLA (`mla.rs`), and the recurrent and hybrid
//! models with granite (`ssm.rs`). Other architectures return `None` and keep the estimate of
//! `compute.rs`.

use crate::gguf::Header;

use super::build::{AttnInp, Builder, Shape, WeightSlots};
use super::more_models as more;
use super::gallocr::BufType;
use super::ggml::{Graph, T};
use super::hparams::Hparams;
use super::kv::Context;
use super::params::Params;

/// The graph of `llama_context::graph_reserve(n_tokens, n_seqs, n_outputs)` for this model, or
/// `None` when its architecture is not modelled here.
fn graph(h: &Header, hp: &Hparams, s: Shape, layer_backend: Vec<usize>, slots: Option<&WeightSlots>) -> Option<Graph> {
    if !within_bounds(h, hp, &s) {
        return None;
    }
    // `graph_get_cb`: `full_offload` is `n_gpu_layers() > n_layer`, every layer and the output on GPUs.
    let full_offload = layer_backend.iter().all(|&b| b != 0);
    let mut b = Builder::new(h, hp, s, layer_backend);
    b.slots = slots;
    b.pin_norms = s.n_tokens < 32 || full_offload;
    match hp.arch.as_str() {
        "llama" | "qwen2" | "qwen3" | "qwen3moe" | "qwen2moe" | "smollm3" if !hp.is_mla => llama_like(&mut b)?,
        // `models/mistral3.cpp`: llama's graph, plus Llama 4's attention temperature when set.
        "mistral3" if !more::has_key(h, "mistral3.attention.temperature_scale") => llama_like(&mut b)?,
        "gemma2" | "gemma3" => gemma(&mut b)?,
        "phi3" => phi3(&mut b)?,
        "command-r" | "cohere2" => more::command_r(&mut b)?,
        "starcoder2" => more::starcoder2(&mut b)?,
        "phi2" => more::phi2(&mut b)?,
        "llama4" => more::llama4(&mut b)?,
        "olmo2" => more::olmo2(&mut b)?,
        "glm4" if h.get("glm4.rope.dimension_sections").is_none() => more::glm4(&mut b)?,
        "glm4moe" if h.get("glm4moe.rope.dimension_sections").is_none() => more::glm4moe(&mut b)?,
        "gpt-oss" => super::oai::gpt_oss(&mut b)?,
        "deepseek2" if hp.is_mla => super::mla::deepseek2(&mut b)?,
        "mamba" | "mamba2" => super::ssm::mamba(&mut b)?,
        "granitehybrid" | "granite" | "granitemoe" => super::ssm::granite_hybrid(&mut b)?,
        "jamba" => super::ssm::jamba(&mut b)?,
        "falcon-h1" => super::ssm::falcon_h1(&mut b)?,
        _ => return None,
    }
    Some(b.g)
}

/// The llama body shared by llama, qwen2 (Q/K/V biases), qwen3 (Q/K norms) and their MoE
/// variants (`models/llama.cpp`, `qwen2.cpp`, `qwen3.cpp`, `qwen3moe.cpp`).
fn llama_like(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let head = hp.head_k;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let inp = b.attn_inp(b.s.n_kv);
    let rope_freqs = b.w("rope_freqs.weight");
    for il in 0..n {
        b.at_layer(il);
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let (mut q, mut k, v) = b.qkv(il, cur, head, hp.head_v)?;
        // smollm3 (`models/smollm3.cpp`): no RoPE on every 4th layer.
        let rope = hp.arch != "smollm3" || (il + 1) % 4 != 0;
        if let Some(qn) = b.wl(il, "attn_q_norm.weight") {
            q = b.rms_norm(q, Some(qn));
        }
        if rope {
            q = b.g.rope(q, pos, rope_freqs);
        }
        if let Some(kn) = b.wl(il, "attn_k_norm.weight") {
            k = b.rms_norm(k, Some(kn));
        }
        if rope {
            k = b.g.rope(k, pos, rope_freqs);
        }
        let cur = b.attn(&inp, il, q, k, v, None, false)?;
        let (ffn_inp, cur) = b.ffn_input(il, cur, inp_sa, out_ids);
        let cur = if hp.arch == "qwen2moe" {
            qwen2moe_ffn(b, il, cur)?
        } else if b.h.tensor(&format!("blk.{il}.ffn_gate_inp.weight")).is_some() {
            if b.h.tensor(&format!("blk.{il}.ffn_up_shexp.weight")).is_some() {
                return None; // a shared expert outside qwen2moe: not modelled
            }
            b.moe(il, cur, true, false)?
        } else {
            b.ffn(il, cur, "ffn")?
        };
        inp_l = b.g.add(cur, ffn_inp);
    }
    b.head_out(inp_l, false)
}








/// qwen2moe's FFN (`models/qwen2moe.cpp`): the experts (softmax gating, weights not normalised,
/// scaled by `expert_weights_scale` unless 0 or 1) plus the shared expert, gated per token by
/// `sigmoid(ffn_gate_inp_shexp · x)` written `silu(g) / g`.
fn qwen2moe_ffn(b: &mut Builder, il: usize, cur: T) -> Option<T> {
    let w_scale = b.h.get("qwen2moe.expert_weights_scale").and_then(crate::gguf::Value::as_f64).unwrap_or(0.0);
    let moe = b.moe(il, cur, false, w_scale != 0.0 && w_scale != 1.0)?;
    let gate_w = b.wl(il, "ffn_gate_inp_shexp.weight")?;
    let gate_inp = b.g.mul_mat(gate_w, cur);
    let silu = b.g.unary(gate_inp);
    let gate = b.g.div(silu, gate_inp);
    let ffn = b.shared_expert(il, cur)?;
    let shexp = b.g.mul(ffn, gate);
    Some(b.g.add(moe, shexp))
}

/// phi3 (`models/phi3.cpp`; llama.cpp runs it without sliding windows): a fused `attn_qkv`
/// (`build_qkv`'s views), Q scaled after RoPE, norms with optional biases, the FFN's up and gate
/// fused in `ffn_up` (`LLM_FFN_SWIGLU`: one GLU over halves), or experts.
fn phi3(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let head = hp.head_k;
    let (mut inp_l, pos, out_ids) = b.start()?;
    let inp = b.attn_inp(b.s.n_kv);
    for il in 0..n {
        b.at_layer(il);
        let residual = inp_l;
        let cur = b.norm_bias(il, "attn_norm", inp_l);
        let (q, k, v) = match b.wl(il, "attn_qkv.weight") {
            Some(w) => {
                let bias = b.wl(il, "attn_qkv.bias");
                let qkv = b.mm(w, cur, bias);
                b.split_qkv(il, qkv, head)
            }
            None => b.qkv(il, cur, head, hp.head_v)?,
        };
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let q = b.g.scale(q);
        let cur = b.attn(&inp, il, q, k, v, None, false)?;
        let (sa, cur) = if il + 1 == n { (b.g.get_rows(residual, out_ids), b.g.get_rows(cur, out_ids)) } else { (residual, cur) };
        let cur = b.g.add(cur, sa);
        let residual = cur;
        let cur = b.norm_bias(il, "ffn_norm", cur);
        let cur = if b.h.tensor(&format!("blk.{il}.ffn_gate_inp.weight")).is_some() {
            b.moe(il, cur, true, false)?
        } else {
            more::ffn_swiglu_fused(b, il, cur)?
        };
        inp_l = b.g.add(residual, cur);
    }
    b.head_out(inp_l, false)
}



/// gemma2 / gemma3 (`models/gemma2.cpp`, `gemma3.cpp`): embeddings scaled, sliding-window layers
/// on their own cache (`build_attn_inp_kv_iswa`; gemma3 without a window: one cache,
/// `build_attn_inp_kv`), Q/K norms (gemma3), Q scaled after RoPE, attention soft-capping
/// (gemma2), post-attention and post-FFN norms, GEGLU.
fn gemma(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let gemma2 = hp.arch == "gemma2";
    b.at_layer(0);
    let emb = b.inp_embd()?;
    let mut inp_l = b.g.scale(emb);
    let pos = b.inp_pos();
    let base = b.attn_inp(b.s.n_kv);
    let swa: Option<AttnInp> = hp.any_swa().then(|| b.attn_inp(b.s.n_kv_swa));
    let out_ids = b.inp_out_ids();
    for il in 0..n {
        b.at_layer(il);
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let (hk, hv) = if hp.is_swa[il] { (hp.head_k_swa, hp.head_v_swa) } else { (hp.head_k, hp.head_v) };
        let (mut q, mut k, v) = b.qkv(il, cur, hk, hv)?;
        if !gemma2 {
            let qn = b.wl(il, "attn_q_norm.weight");
            q = b.rms_norm(q, qn);
        }
        q = b.g.rope(q, pos, None);
        if !gemma2 {
            let kn = b.wl(il, "attn_k_norm.weight");
            k = b.rms_norm(k, kn);
        }
        k = b.g.rope(k, pos, None);
        q = b.g.scale(q);
        let inp = if hp.is_swa[il] { swa.as_ref().unwrap_or(&base) } else { &base };
        let inp = *inp;
        let softcap = gemma2.then_some(50.0);
        let mut cur = b.attn(&inp, il, q, k, v, softcap, swa.is_some())?;
        if il == n - 1 {
            cur = b.g.get_rows(cur, out_ids);
            inp_l = b.g.get_rows(inp_l, out_ids);
        }
        let w = b.wl(il, "post_attention_norm.weight");
        let cur = b.rms_norm(cur, w);
        let sa_out = b.g.add(cur, inp_l);
        let w = b.wl(il, "ffn_norm.weight");
        let cur = b.rms_norm(sa_out, w);
        let cur = b.ffn(il, cur, "ffn")?;
        let w = b.wl(il, "post_ffw_norm.weight");
        let cur = b.rms_norm(cur, w);
        inp_l = b.g.add(cur, sa_out);
    }
    // gemma2 soft-caps the logits always, gemma3 when its file sets `final_logit_softcapping`.
    let key = format!("{}.final_logit_softcapping", hp.arch);
    let final_cap = gemma2 || b.h.get(&key).and_then(crate::gguf::Value::as_f64).is_some_and(|x| x != 0.0);
    b.head_out(inp_l, final_cap)
}

/// The graphs `llama_context::sched_reserve` reserves (`src/llama-context.cpp`): prompt processing
/// with `n_tokens = min(n_ctx, n_ubatch)` (rounded up to a multiple of the sequences) and
/// `n_outputs = min(n_tokens, n_batch)`, then token generation with one token per sequence.
/// `None` when the architecture is not modelled.
pub(super) fn graphs(h: &Header, hp: &Hparams, ctx: &Context, p: &Params, layer_backend: &[usize]) -> Option<Vec<Graph>> {
    graphs_placed(h, hp, ctx, p, layer_backend, None)
}

/// [`graphs`] with each weight on the backend of its buffer (`slots`), as `-ot` and
/// `--n-cpu-moe` place them.
pub(super) fn graphs_placed(h: &Header, hp: &Hparams, ctx: &Context, p: &Params, layer_backend: &[usize], slots: Option<&WeightSlots>) -> Option<Vec<Graph>> {
    let n_seq = ctx.n_seq.max(1);
    let n_tokens = ctx.n_ctx.min(ctx.n_ubatch);
    let base = Shape {
        // `graph_reserve` rounds the tokens up, after `n_outputs` was taken from them.
        n_tokens: n_tokens.div_ceil(n_seq) * n_seq,
        n_outputs: n_tokens.min(ctx.n_batch),
        n_stream: ctx.n_stream,
        n_seqs: n_seq,
        n_kv: ctx.n_ctx_seq,
        n_kv_swa: ctx.swa_cells,
        flash_attn: p.flash_attn_on(),
        type_k: p.type_k,
        type_v: p.type_v,
    };
    let tg = Shape { n_tokens: n_seq, n_outputs: n_seq, ..base };
    Some(vec![graph(h, hp, base, layer_backend.to_vec(), slots)?, graph(h, hp, tg, layer_backend.to_vec(), slots)?])
}

/// Each backend's compute buffer: the largest `ggml_gallocr_reserve_n` needs over the reserved
/// graphs (a buffer only grows, `ggml_gallocr_reserve_n_impl`). `types[b]` is backend `b`'s
/// buffer type.
pub fn compute_buffers(graphs: &[Graph], types: &[BufType]) -> Vec<u64> {
    let mut out = vec![0; types.len()];
    for g in graphs {
        for (o, x) in out.iter_mut().zip(super::gallocr::reserve(g, types)) {
            *o = (*o).max(x);
        }
    }
    out
}

/// The reserved graphs of a CPU-only run of `header` with settings `p` (see `graphs`).
pub fn reserve_graphs(h: &Header, p: &Params) -> Result<Option<Vec<Graph>>, super::error::LlamaError> {
    let hp = Hparams::from_header(h)?;
    let ctx = Context::new(&hp, p)?;
    Ok(graphs(h, &hp, &ctx, p, &vec![0; hp.n_layer as usize + 1]))
}

/// Whether every byte count of the graph fits a `u64` with room to spare: the widest dimension
/// (of the hyperparameters and the file's tensors) × the cells × the tokens × the heads × 8 below
/// 2⁶² (real models stay below 2⁵⁹). Hostile metadata fails it and keeps the fitted formula.
fn within_bounds(h: &Header, hp: &Hparams, s: &Shape) -> bool {
    let n = hp.n_layer as usize;
    let per_layer = (0..n).flat_map(|il| {
        [
            hp.n_head[il].saturating_mul(hp.head_k.max(hp.head_v).max(hp.head_k_swa).max(hp.head_v_swa).max(hp.head_k_mla)),
            hp.n_head_kv[il].saturating_mul(hp.head_k.max(hp.head_v).max(hp.head_k_swa).max(hp.head_v_swa)),
            hp.n_ff[il],
        ]
    });
    let tensors = h.tensors.iter().flat_map(|t| t.dims.iter().copied());
    let dims = [hp.n_embd, hp.n_vocab, hp.n_ff_exp.saturating_mul(hp.n_expert_used), hp.kv_lora_rank.saturating_add(hp.n_rot), hp.n_expert];
    let widest = dims.into_iter().chain(per_layer).chain(tensors).max().unwrap_or(0).max(1);
    let heads = hp.n_head.iter().chain(&hp.n_head_kv).copied().max().unwrap_or(1).max(1);
    let cells = s.n_kv.max(s.n_kv_swa).max(s.n_tokens).saturating_mul(s.n_stream).max(1);
    let product = widest as f64 * cells as f64 * s.n_tokens.max(1) as f64 * heads as f64 * 8.0;
    product < (1u64 << 62) as f64
}
