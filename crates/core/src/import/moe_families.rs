//! The newer mixture-of-experts decoders `hf_moe.rs` dispatches to: GLM-4.5 (`glm4_moe`) and
//! GPT-OSS (`gpt_oss`), as transformers 5.24 builds them (see `hf_moe.rs`'s table).

use super::moe_cfg::{gqa_attention, head_dim, Block, Cfg, Defaults};
use crate::error::{Error, Result};
use crate::layer::attention::MultiheadAttention;
use crate::layer::linear::GatedMlp;
use crate::layer::moe::{ExpertActivation, Router, SparseMoe};
use crate::layer::norm::NormKind;
use crate::spec::Layer;
use serde_json::Value;

/// GLM-4.5 (`modeling_glm4_moe.py`): `Glm4MoeAttention` (GQA, q/k/v biases, partial rotary,
/// optional per-head q/k RMSNorm), dense `Glm4MoeMLP` on the first `first_k_dense_replace`
/// layers, then `Glm4MoeMoE`: DeepSeek-V3's grouped-sigmoid router (fp32 `weight [E, D]`, the
/// `e_score_correction_bias` buffer), `n_routed_experts` experts and the shared experts.
pub(super) fn glm4_moe(c: &Cfg, d: &Defaults, h: u64, n_layers: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    let hd = head_dim(c, h, heads)?;
    let head = hd.unwrap_or(h / heads);
    // `Glm4MoeConfig.__post_init__` defaults `partial_rotary_factor` to 0.5 (into `rope_parameters`)
    let factor = match c.get("rope_parameters") {
        Some(Value::Object(m)) if m.get("partial_rotary_factor").is_some_and(|v| !v.is_null()) => {
            let v = &m["partial_rotary_factor"];
            c.ignore(&["partial_rotary_factor"]);
            v.as_f64().ok_or_else(|| Cfg::wrong("rope_parameters.partial_rotary_factor", "a number", v))?
        }
        _ => c.float("partial_rotary_factor", 0.5)?,
    };
    if !(factor > 0.0 && factor <= 1.0) {
        return Err(Error::Import(format!("partial rotary factor {factor} must be in (0, 1]")));
    }
    // `inv_freq` over `arange(0, dim, 2)` with `dim = int(head_dim × factor)`; `apply_rotary_pos_emb`
    // rotates `cos.shape[-1]` = twice its length features: an odd `dim` rounds up
    let rd = ((head as f64 * factor) as u64).div_ceil(2) * 2;
    if rd == 0 {
        return Err(Error::Import(format!("partial rotary: head_dim {head} × {factor} rotates no features")));
    }
    let bias = c.flag("attention_bias", false)?;
    c.ignore(&["num_nextn_predict_layers", "num_mtp_layers", "pretraining_tp"]);
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        dropout: c.prob("attention_dropout", 0.0)?,
        out_bias: bias.then_some(false),
        qk_norm: c.flag("use_qk_norm", false)?.then_some(NormKind::RmsNorm),
        rotary_dim: (rd < head).then_some(rd),
        ..gqa_attention(h, heads, kv, head, bias)
    });
    let moe_i = c.size("moe_intermediate_size", 1408)?;
    let n_shared = c.int("n_shared_experts", 1)?;
    c.float("routed_scaling_factor", 1.0)?;
    let experts = match (c.opt_int("n_routed_experts")?, c.opt_int("num_local_experts")?) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => 128,
    };
    let moe = SparseMoe {
        hidden_size: h,
        num_experts: experts,
        top_k: c.size("num_experts_per_tok", 8)?,
        intermediate_size: moe_i,
        router: Router::GroupedSigmoid,
        norm_topk_prob: c.flag("norm_topk_prob", true)?,
        n_group: c.size("n_group", 1)?,
        topk_group: c.size("topk_group", 1)?,
        shared_intermediate_size: (n_shared > 0).then(|| moe_i.saturating_mul(n_shared)),
        shared_expert_gate: false,
        expert_bias: false,
        router_bias: false,
        activation: ExpertActivation::Silu,
        shared_bias: false,
        router_stats: false,
    };
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", d.intermediate)?, bias: false, gelu_new_dropout: None });
    let first_dense = c.int("first_k_dense_replace", 1)?;
    Ok((0..n_layers).map(|i| (attn.clone(), if i < first_dense { dense.clone() } else { Layer::SparseMoe(moe.clone()) })).collect())
}

/// `layer_types` (or `default` for each of `n` layers) as sliding windows: `Some(window)` for
/// `sliding_attention`, `None` for `full_attention`; another type is refused by name.
fn layer_windows(c: &Cfg, n: u64, window: Option<u64>, default: impl Fn(u64) -> bool) -> Result<Vec<Option<u64>>> {
    let slide = |s: bool| if s { window } else { None };
    match c.get("layer_types") {
        None => Ok((0..n).map(|i| slide(default(i))).collect()),
        Some(Value::Array(a)) => {
            if a.len() as u64 != n {
                return Err(Error::Import(format!("field `layer_types` has {} entries for {n} layers", a.len())));
            }
            a.iter()
                .map(|t| match t.as_str() {
                    Some("sliding_attention") => Ok(slide(true)),
                    Some("full_attention") => Ok(None),
                    _ => Err(Error::Import(format!("field `layer_types`: `{t}` layers are not modelled (full_attention, sliding_attention)"))),
                })
                .collect()
        }
        Some(v) => Err(Cfg::wrong("layer_types", "a list of layer types", v)),
    }
}

/// GPT-OSS (`modeling_gpt_oss.py`): `GptOssAttention` (GQA, all four projections biased, its own
/// `head_dim`, `sinks`; `sliding_window` on `sliding_attention` layers, by default the even ones:
/// `GptOssConfig.__post_init__`), `GptOssMLP`: `GptOssTopKRouter` and `GptOssExperts` (biased,
/// `_apply_gate`), every layer sparse.
pub(super) fn gpt_oss(c: &Cfg, d: &Defaults, h: u64, n_layers: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    let hd = match c.opt_int("head_dim")? {
        Some(0) => return Err(Error::Import("field `head_dim` must be at least 1".into())),
        Some(hd) => hd,
        None => 64,
    };
    let window = match c.map.get("sliding_window") {
        Some(Value::Null) => {
            c.ignore(&["sliding_window"]);
            None
        }
        _ => Some(c.size("sliding_window", 128)?),
    };
    let windows = layer_windows(c, n_layers, window, |i| (i + 1) % 2 == 1)?;
    let bias = c.flag("attention_bias", true)?;
    let rotary_dim = match c.get("rope_parameters") {
        Some(Value::Object(m)) if m.get("partial_rotary_factor").is_some_and(|v| !v.is_null()) => {
            return Err(Error::Import("field `rope_parameters.partial_rotary_factor`: GPT-OSS rotates whole heads".into()));
        }
        _ => None,
    };
    let attn = |w: Option<u64>| {
        Layer::MultiheadAttention(MultiheadAttention {
            embed_dim: h,
            num_heads: heads,
            num_kv_heads: (kv != heads).then_some(kv),
            dropout: 0.0,
            bias,
            causal: true,
            rotary: true,
            fused_qkv: false,
            out_bias: None,
            qk_norm: None,
            head_dim: (Some(hd) != h.checked_div(heads).filter(|_| h.is_multiple_of(heads))).then_some(hd),
            rotary_dim,
            sliding_window: w,
            logit_softcap: None,
            key_bias: None,
            position_bias: false,
            contiguous_heads: false,
            sinks: true,
            qk_norm_full: false,
            attention_chunk: None,
            output_gate: false,
            eager_only: false,
            rotary_local: false,
            windows: None,
        })
    };
    c.prob("attention_dropout", 0.0)?;
    // the published configs' `experts_per_token` and `initial_context_length` are OpenAI's
    // names, which GptOssConfig stores and nothing reads (`num_experts_per_tok`, the YaRN base)
    c.ignore(&["experts_per_token", "initial_context_length"]);
    c.float("swiglu_alpha", 1.702)?;
    c.float("swiglu_limit", 7.0)?;
    let moe = SparseMoe {
        hidden_size: h,
        num_experts: c.size("num_local_experts", 128)?,
        top_k: c.size("num_experts_per_tok", 4)?,
        intermediate_size: c.size("intermediate_size", d.intermediate)?,
        router: Router::TopkSoftmax,
        norm_topk_prob: false,
        n_group: 1,
        topk_group: 1,
        shared_intermediate_size: None,
        shared_expert_gate: false,
        expert_bias: true,
        router_bias: true,
        activation: ExpertActivation::ClampedSwiglu,
        shared_bias: false,
        router_stats: false,
    };
    Ok(windows.into_iter().map(|w| (attn(w), Layer::SparseMoe(moe.clone()))).collect())
}

/// ERNIE 4.5 MoE (`modeling_ernie4_5_moe.py`): `Ernie4_5_MoeAttention` (GQA + RoPE, every
/// projection biased by `use_bias`, `head_dim` by `getattr(config, "head_dim", hidden //
/// heads)`); a sparse block on layer `i` when `(i + 1) % moe_layer_interval == 0` and
/// `moe_layer_start_index ≤ i ≤ moe_layer_end_index` (`-1`: the last layer,
/// `Ernie4_5_MoeConfig.__post_init__`), the dense `intermediate_size` MLP elsewhere (layer 0 by
/// default: dense-first). The sparse block: `Ernie4_5_MoeTopKRouter` (fp32 `weight [E, D]`,
/// softmax, top-k over the probabilities plus `moe_statics.e_score_correction_bias`, a frozen
/// `[1, E]` parameter; renormalised), bias-free fused experts, and `moe_num_shared_experts`
/// shared experts as one MLP of `moe_intermediate_size × n` (biased by `use_bias`).
pub(super) fn ernie4_5_moe(c: &Cfg, d: &Defaults, h: u64, n_layers: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    if !heads.is_multiple_of(kv) {
        return Err(Error::Import(format!("num_attention_heads ({heads}) must be divisible by num_key_value_heads ({kv})")));
    }
    let hd = head_dim(c, h, heads)?;
    let bias = c.flag("use_bias", false)?;
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        dropout: c.prob("attention_dropout", 0.0)?,
        ..gqa_attention(h, heads, kv, hd.unwrap_or(h / heads), bias)
    });
    let experts = c.size("moe_num_experts", c.opt_int("num_experts")?.unwrap_or(64))?;
    let top_k = c.size("moe_k", c.opt_int("num_experts_per_tok")?.unwrap_or(6))?;
    if top_k > experts {
        return Err(Error::Import(format!("field `moe_k` ({top_k}) must be at most moe_num_experts ({experts})")));
    }
    let moe_i = c.size("moe_intermediate_size", 1536)?;
    let n_shared = c.int("moe_num_shared_experts", 2)?;
    c.float("moe_norm_min", 1e-12)?;
    let moe = SparseMoe {
        hidden_size: h,
        num_experts: experts,
        top_k,
        intermediate_size: moe_i,
        router: Router::Softmax,
        norm_topk_prob: true,
        n_group: 1,
        topk_group: 1,
        shared_intermediate_size: (n_shared > 0).then(|| moe_i.saturating_mul(n_shared)),
        shared_expert_gate: false,
        expert_bias: false,
        router_bias: false,
        activation: ExpertActivation::Silu,
        shared_bias: bias,
        router_stats: true,
    };
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", d.intermediate)?, bias, gelu_new_dropout: None });
    // layer indices as Python compares them: `moe_layer_end_index` may be -1 (the last layer)
    let index = |key: &str, default: i64| -> Result<i64> {
        match c.get(key) {
            None => Ok(default),
            Some(v) => v.as_i64().filter(|i| *i >= -1).ok_or_else(|| Cfg::wrong(key, "a layer index (or -1)", v)),
        }
    };
    let start = index("moe_layer_start_index", 1)?;
    let end = match index("moe_layer_end_index", -1)? {
        -1 => n_layers as i64 - 1,
        e => e,
    };
    let interval = c.size("moe_layer_interval", 1)?;
    Ok((0..n_layers)
        .map(|i| {
            let sparse = (i + 1).is_multiple_of(interval) && (i as i64) >= start && (i as i64) <= end;
            (attn.clone(), if sparse { Layer::SparseMoe(moe.clone()) } else { dense.clone() })
        })
        .collect())
}
