//! Mixture-of-experts decoders whose layers differ in kind, dispatched from `hf_moe.rs`
//! (transformers 5.24): Qwen3-Next (`qwen3_next`: gated DeltaNet layers with a full-attention
//! layer every `full_attention_interval`) and Llama 4's text model (`llama4_text`: chunked
//! attention on the RoPE layers, no-RoPE full-attention layers, MoE layers interleaved with
//! dense ones). Each layer is `(token mixer, feed-forward)`, wrapped by `hf_moe::group`.

use super::moe_cfg::{gqa_attention as attention, Block, Cfg, Defaults};
use crate::error::{Error, Result};
use crate::layer::attention::MultiheadAttention;
use crate::layer::gated_delta::GatedDeltaNet;
use crate::layer::linear::GatedMlp;
use crate::layer::moe::{ExpertActivation, Router, SparseMoe};
use crate::layer::norm::NormKind;
use crate::spec::Layer;
use serde_json::Value;

/// `layer_types` as given (each one of `allowed`), or `default(i)` for each of `n` layers.
fn layer_types(c: &Cfg, n: u64, allowed: &[&str], default: impl Fn(u64) -> &'static str) -> Result<Vec<String>> {
    match c.get("layer_types") {
        None => Ok((0..n).map(|i| default(i).to_string()).collect()),
        Some(Value::Array(a)) if a.len() as u64 == n => a
            .iter()
            .map(|t| match t.as_str() {
                Some(s) if allowed.contains(&s) => Ok(s.to_string()),
                _ => Err(Error::Import(format!("field `layer_types`: `{t}` layers are not modelled ({})", allowed.join(", ")))),
            })
            .collect(),
        Some(v) => Err(Cfg::wrong("layer_types", &format!("a list of {n} layer types"), v)),
    }
}

/// `partial_rotary_factor` from `rope_parameters` or the top level (default `default`), as
/// `int(head_dim × factor)` rotated features (`None`: the whole head).
fn rotary_dim(c: &Cfg, head_dim: u64, default: f64) -> Result<Option<u64>> {
    let nested = match c.get("rope_parameters") {
        Some(Value::Object(m)) => m.get("partial_rotary_factor").filter(|v| !v.is_null()).cloned(),
        _ => None,
    };
    let factor = match nested {
        Some(v) => {
            c.ignore(&["partial_rotary_factor"]);
            v.as_f64().ok_or_else(|| Cfg::wrong("rope_parameters.partial_rotary_factor", "a number", &v))?
        }
        None => c.float("partial_rotary_factor", default)?,
    };
    if !(factor > 0.0 && factor <= 1.0) {
        return Err(Error::Import(format!("partial rotary factor {factor} must be in (0, 1]")));
    }
    let rd = (head_dim as f64 * factor) as u64;
    if rd == 0 || !rd.is_multiple_of(2) {
        return Err(Error::Import(format!("partial rotary: {rd} rotated features per head (head_dim {head_dim} × {factor}) must be even and at least 2")));
    }
    Ok((rd < head_dim).then_some(rd))
}

/// `experts` SwiGLU experts of `i`, `top_k` per token, softmax-routed, no shared expert (callers
/// set what differs).
fn moe(h: u64, experts: u64, top_k: u64, i: u64) -> SparseMoe {
    SparseMoe {
        hidden_size: h,
        num_experts: experts,
        top_k,
        intermediate_size: i,
        router: Router::Softmax,
        norm_topk_prob: false,
        n_group: 1,
        topk_group: 1,
        shared_intermediate_size: None,
        shared_expert_gate: false,
        expert_bias: false,
        router_bias: false,
        activation: ExpertActivation::Silu,
        shared_bias: false,
        router_stats: false,
    }
}

/// Qwen3-Next (`modeling_qwen3_next.py`): `Qwen3NextGatedDeltaNet` on `linear_attention` layers,
/// `Qwen3NextAttention` (GQA, `q_proj` doubled for the output gate, per-head `q_norm`/`k_norm`,
/// partial rotary, default factor 0.25) on `full_attention` ones; `Qwen3NextSparseMoeBlock`
/// (softmax top-k router, experts, a shared expert with its sigmoid gate) where
/// `layer_idx not in mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0`, else the
/// dense `intermediate_size` MLP.
pub(super) fn qwen3_next(c: &Cfg, d: &Defaults, h: u64, n: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    let hd = c.size("head_dim", 256)?;
    // `full_attention_interval` is a constructor keyword popped when `layer_types` is absent
    let interval = c.size("full_attention_interval", 4)?;
    let types = layer_types(c, n, &["linear_attention", "full_attention"], |i| if (i + 1) % interval != 0 { "linear_attention" } else { "full_attention" })?;
    let full = Layer::MultiheadAttention(MultiheadAttention {
        qk_norm: Some(NormKind::RmsNorm),
        rotary_dim: rotary_dim(c, hd, 0.25)?,
        dropout: c.prob("attention_dropout", 0.0)?,
        output_gate: true,
        ..attention(h, heads, kv, hd, c.flag("attention_bias", false)?)
    });
    let linear = Layer::GatedDeltaNet(GatedDeltaNet {
        hidden_size: h,
        num_k_heads: c.size("linear_num_key_heads", 16)?,
        num_v_heads: c.size("linear_num_value_heads", 32)?,
        head_k_dim: c.size("linear_key_head_dim", 128)?,
        head_v_dim: c.size("linear_value_head_dim", 128)?,
        conv_kernel: c.size("linear_conv_kernel_dim", 4)?,
    });
    // published configs carry these; Qwen3NextConfig reads neither
    if c.flag("use_sliding_window", false)? {
        return Err(Error::Import("field `use_sliding_window`: Qwen3-Next attends fully".into()));
    }
    c.ignore(&["sliding_window", "max_window_layers"]);
    let experts = c.int("num_experts", 512)?;
    let sparse = SparseMoe {
        shared_intermediate_size: Some(c.size("shared_expert_intermediate_size", 512)?),
        shared_expert_gate: true,
        norm_topk_prob: c.flag("norm_topk_prob", true)?,
        ..moe(h, experts, c.size("num_experts_per_tok", 10)?, c.size("moe_intermediate_size", 512)?)
    };
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", d.intermediate)?, bias: false, gelu_new_dropout: None });
    let step = c.int("decoder_sparse_step", 1)?;
    let mlp_only = c.int_list("mlp_only_layers")?;
    Ok(types
        .iter()
        .zip(0..)
        .map(|(t, i)| {
            let mixer = if t == "full_attention" { full.clone() } else { linear.clone() };
            let is_sparse = !mlp_only.contains(&i) && experts > 0 && step > 0 && (i + 1) % step == 0;
            (mixer, if is_sparse { Layer::SparseMoe(sparse.clone()) } else { dense.clone() })
        })
        .collect())
}

/// Llama 4's text decoder (`modeling_llama4.py`, `Llama4TextConfig.__post_init__`):
/// `no_rope_layers[i]` (default: every `no_rope_layer_interval`-th layer has no RoPE) picks
/// RoPE; `layer_types` (default: `chunked_attention` on the RoPE layers when
/// `attention_chunk_size` is set) the chunked ones; `moe_layers` (default every
/// `interleave_moe_layer_step`-th) the `Llama4TextMoe` layers, the others a dense
/// `intermediate_size_mlp` MLP. `Llama4TextMoe` runs every expert on every token
/// (`hidden_states.repeat(num_experts, 1)` scaled by the sigmoid router scores, then one `bmm`
/// per projection), so its experts are lowered with `top_k = num_experts`: `tokens × E` rows,
/// what the eager code computes; the router is `Llama4Router` (`nn.Linear(H, E)`, top-k, sigmoid),
/// plus the shared expert. The `Llama4TextL2Norm` on Q and K (`use_qk_norm`) has no weights and
/// its two `[S, H·d]` temporaries are not modelled.
pub(super) fn llama4_text(c: &Cfg, d: &Defaults, h: u64, n: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    let hd = c.size("head_dim", 128)?;
    let interval = c.size("no_rope_layer_interval", 4)?;
    let no_rope: Vec<u64> = match c.int_list("no_rope_layers")? {
        v if v.is_empty() => (0..n).map(|i| u64::from((i + 1) % interval != 0)).collect(),
        v if v.len() as u64 == n => v,
        v => return Err(Error::Import(format!("field `no_rope_layers` has {} entries for {n} layers", v.len()))),
    };
    let chunk = match c.map.get("attention_chunk_size") {
        Some(Value::Null) => {
            c.ignore(&["attention_chunk_size"]);
            None
        }
        _ => Some(c.size("attention_chunk_size", 8192)?),
    };
    let types = layer_types(c, n, &["chunked_attention", "full_attention"], |i| {
        if no_rope[i as usize] != 0 && chunk.is_some() { "chunked_attention" } else { "full_attention" }
    })?;
    if types.iter().any(|t| t == "chunked_attention") && chunk.is_none() {
        return Err(Error::Import("field `layer_types`: `chunked_attention` layers need `attention_chunk_size`".into()));
    }
    c.flag("use_qk_norm", true)?;
    // attention temperature tuning scales the no-RoPE layers' queries: no parameters
    c.ignore(&["attn_temperature_tuning", "floor_scale", "attn_scale", "router_jitter_noise"]);
    let bias = c.flag("attention_bias", false)?;
    c.prob("attention_dropout", 0.0)?;
    let experts = c.size("num_local_experts", 16)?;
    c.size("num_experts_per_tok", 1)?;
    let i = c.size("intermediate_size", 8192)?;
    let sparse = SparseMoe { shared_intermediate_size: Some(i), router: Router::TopkSoftmax, ..moe(h, experts, experts, i) };
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size_mlp", 16384)?, bias: false, gelu_new_dropout: None });
    let step = c.size("interleave_moe_layer_step", 1)?;
    let moe_layers = match c.int_list("moe_layers")? {
        v if v.is_empty() && c.get("moe_layers").is_none() => (step - 1..n).step_by(step as usize).collect(),
        v => v,
    };
    Ok(types
        .iter()
        .zip(0..)
        .map(|(t, l)| {
            let attn = MultiheadAttention {
                rotary: no_rope[l as usize] != 0,
                attention_chunk: if t == "chunked_attention" { chunk } else { None },
                ..attention(h, heads, kv, hd, bias)
            };
            let ffn = if moe_layers.contains(&l) { Layer::SparseMoe(sparse.clone()) } else { dense.clone() };
            (Layer::MultiheadAttention(attn), ffn)
        })
        .collect())
}

/// Jamba (`modeling_jamba.py`): `attention` where `i % attn_layer_period == attn_layer_offset`
/// (GQA, no biases, no positional encoding at all), else `JambaMambaMixer` (Mamba's mixer with
/// `dt_layernorm`, `b_layernorm`, `c_layernorm`); the feed-forward is `JambaSparseMoeBlock`
/// (a bias-free router, `num_experts` SwiGLU experts of `intermediate_size`, softmax top-k)
/// where `i % expert_layer_period == expert_layer_offset`, else the dense `JambaMLP`.
pub(super) fn jamba(c: &Cfg, d: &Defaults, h: u64, n: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    if !h.is_multiple_of(heads) {
        return Err(Error::Import(format!("hidden_size ({h}) must be divisible by num_attention_heads ({heads})")));
    }
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        rotary: false,
        dropout: c.prob("attention_dropout", 0.0)?,
        ..attention(h, heads, kv, h / heads, false)
    });
    let mamba = Layer::MambaMixer(crate::layer::ssm::MambaMixer {
        hidden_size: h,
        intermediate_size: h.saturating_mul(c.size("mamba_expand", 2)?),
        state_size: c.size("mamba_d_state", 16)?,
        conv_kernel: c.size("mamba_d_conv", 4)?,
        time_step_rank: match c.get("mamba_dt_rank") {
            None => h.div_ceil(16),
            Some(Value::String(s)) if s == "auto" => h.div_ceil(16),
            Some(_) => c.size("mamba_dt_rank", 1)?,
        },
        conv_bias: c.flag("mamba_conv_bias", true)?,
        bias: c.flag("mamba_proj_bias", false)?,
        inner_norms: true,
    });
    c.ignore(&["use_mamba_kernels", "use_mambapy", "use_associative_scan", "num_logits_to_keep", "router_jitter_noise"]);
    let i = c.size("intermediate_size", d.intermediate)?;
    let experts = c.size("num_experts", 16)?;
    let sparse = Layer::SparseMoe(SparseMoe { router: Router::SoftmaxFp32, ..moe(h, experts, c.size("num_experts_per_tok", 2)?, i) });
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: i, bias: false, gelu_new_dropout: None });
    let (ap, ao) = (c.size("attn_layer_period", 8)?, c.int("attn_layer_offset", 4)?);
    let (ep, eo) = (c.size("expert_layer_period", 2)?, c.int("expert_layer_offset", 1)?);
    Ok((0..n)
        .map(|l| {
            let mixer = if l % ap == ao { attn.clone() } else { mamba.clone() };
            // `layers_num_experts`: one expert is the dense MLP
            (mixer, if l % ep == eo && experts > 1 { sparse.clone() } else { dense.clone() })
        })
        .collect())
}

/// Bamba (`modeling_bamba.py`): `BambaAttention` (GQA, `attention_bias`, rotary on half of each
/// head: `partial_rotary_factor` 0.5 hard-coded by `BambaConfig`) on `attn_layer_indices`,
/// `BambaMixer` (Mamba-2's, `mamba_*` sizes, `mamba_proj_bias` on both projections) elsewhere;
/// every feed-forward the dense `BambaMLP` (`mlp_bias`).
pub(super) fn bamba(c: &Cfg, d: &Defaults, h: u64, n: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    let hd = match c.opt_int("head_dim")? {
        Some(hd) => hd,
        None if h.is_multiple_of(heads) => h / heads,
        None => return Err(Error::Import(format!("hidden_size ({h}) must be divisible by num_attention_heads ({heads})"))),
    };
    let rd = hd / 2;
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        rotary_dim: (rd < hd && rd > 0 && rd.is_multiple_of(2)).then_some(rd),
        rotary: rd > 0,
        dropout: c.prob("attention_dropout", 0.0)?,
        ..attention(h, heads, kv, hd, c.flag("attention_bias", false)?)
    });
    let inner = h.saturating_mul(c.size("mamba_expand", 2)?);
    let mamba = mamba2_mixer(c, h, inner, None, true)?;
    c.ignore(&["time_step_limit", "num_logits_to_keep", "z_loss_coefficient", "use_mamba_kernels"]);
    let mlp = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", d.intermediate)?, bias: c.flag("mlp_bias", false)?, gelu_new_dropout: None });
    let attn_layers = c.int_list("attn_layer_indices")?;
    Ok((0..n).map(|l| (if attn_layers.contains(&l) { attn.clone() } else { mamba.clone() }, mlp.clone())).collect())
}

/// Falcon-H1 (`modeling_falcon_h1.py`): every layer runs `FalconH1Mixer` (Mamba-2's, of
/// `mamba_d_ssm` channels or `mamba_expand × hidden_size`; the gated norm only with
/// `mamba_rms_norm`; `out_proj` biased by `projectors_bias`) and `FalconH1Attention` (GQA,
/// rotary) side by side on the same normed input and adds them, then the dense `FalconH1MLP`.
/// The µP multipliers (`embedding_multiplier`, `ssm_*`, `attention_*`, `key_multiplier`,
/// `mlp_multipliers`, `lm_head_multiplier`) scale tensors in passing: no parameters, and their
/// `[S, D]` temporaries are not modelled; `mup_vector` is a non-persistent buffer.
pub(super) fn falcon_h1(c: &Cfg, d: &Defaults, h: u64, n: u64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    let hd = match c.opt_int("head_dim")? {
        Some(hd) => hd,
        None if h.is_multiple_of(heads) => h / heads,
        None => return Err(Error::Import(format!("hidden_size ({h}) must be divisible by num_attention_heads ({heads})"))),
    };
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        dropout: c.prob("attention_dropout", 0.0)?,
        ..attention(h, heads, kv, hd, c.flag("attention_bias", false)?)
    });
    let inner = match c.opt_int("mamba_d_ssm")? {
        Some(0) => return Err(Error::Import("field `mamba_d_ssm` must be at least 1".into())),
        Some(i) => i,
        // `mamba_d_ssm: null` falls back to `mamba_expand × hidden_size`
        None if c.map.contains_key("mamba_d_ssm") => h.saturating_mul(c.size("mamba_expand", 2)?),
        None => 1024,
    };
    c.ignore(&["mamba_expand"]);
    let mamba = mamba2_mixer(c, h, inner, Some(c.flag("projectors_bias", false)?), c.flag("mamba_rms_norm", false)?)?;
    c.flag("mamba_norm_before_gate", true)?;
    c.ignore(&[
        "time_step_limit", "num_logits_to_keep", "lm_head_multiplier", "embedding_multiplier", "mlp_multipliers", "key_multiplier",
        "attention_out_multiplier", "attention_in_multiplier", "ssm_multipliers", "ssm_in_multiplier", "ssm_out_multiplier",
        "use_mamba_kernels",
    ]);
    let mlp = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", d.intermediate)?, bias: c.flag("mlp_bias", false)?, gelu_new_dropout: None });
    let both = Layer::Parallel { branches: vec![vec![mamba], vec![attn]], join: crate::spec::Join::Add };
    Ok((0..n).map(|_| (both.clone(), mlp.clone())).collect())
}

/// The `mamba_*` fields of Bamba's and Falcon-H1's configs as their Mamba-2 mixer of `inner`
/// channels: `mamba_d_head` `"auto"` is `inner // mamba_n_heads`, and heads × head size must be
/// `inner` (`validate_architecture` of both config classes).
fn mamba2_mixer(c: &Cfg, h: u64, inner: u64, out_bias: Option<bool>, gated_norm: bool) -> Result<Layer> {
    let heads = c.size("mamba_n_heads", 128)?;
    let head_dim = match c.get("mamba_d_head") {
        None => inner / heads,
        Some(Value::String(s)) if s == "auto" => inner / heads,
        Some(_) => c.size("mamba_d_head", 1)?,
    };
    if head_dim.saturating_mul(heads) != inner {
        return Err(Error::Import(format!("mamba_n_heads ({heads}) × mamba_d_head ({head_dim}) must equal the mixer's {inner} channels")));
    }
    Ok(Layer::Mamba2Mixer(crate::layer::ssm::Mamba2Mixer {
        hidden_size: h,
        num_heads: heads,
        head_dim,
        state_size: c.size("mamba_d_state", 256)?,
        n_groups: c.size("mamba_n_groups", 1)?,
        conv_kernel: c.size("mamba_d_conv", 4)?,
        chunk_size: c.size("mamba_chunk_size", 256)?,
        conv_bias: c.flag("mamba_conv_bias", true)?,
        bias: c.flag("mamba_proj_bias", false)?,
        out_bias,
        gated_norm,
    }))
}

/// MiniMax (`modeling_minimax.py`): Mixtral's layers with `MiniMaxLightningAttention` (block-wise
/// linear attention, a fixed state per sequence: `layer::lightning`) on `linear_attention`
/// layers and `MiniMaxAttention` (GQA + RoPE, bias-free, `sliding_window`) on `full_attention`
/// ones; `layer_types` defaults to full on even layers, linear on odd ones
/// (`MiniMaxConfig.__post_init__`). Every layer's feed-forward is `MiniMaxSparseMoeBlock`
/// (Mixtral's fp32-softmax router, `num_local_experts` experts of `intermediate_size`). The
/// residual weights (`*_alpha_factor`, `*_beta_factor`) scale by Python numbers: transient
/// `[S, D]` products that save nothing.
pub(super) fn minimax(c: &Cfg, d: &Defaults, h: u64, n: u64) -> Result<Vec<Block>> {
    use crate::layer::lightning::LightningAttention;
    let heads = c.size("num_attention_heads", d.heads)?;
    // `None` (a `null`) becomes `num_attention_heads` in `__post_init__`; absent, the class's 8
    let kv_default = if c.map.get("num_key_value_heads").is_some_and(Value::is_null) { heads } else { d.kv_heads };
    let kv = c.size("num_key_value_heads", kv_default)?;
    if !heads.is_multiple_of(kv) {
        return Err(Error::Import(format!("num_attention_heads ({heads}) must be divisible by num_key_value_heads ({kv})")));
    }
    // `getattr(config, "head_dim", None) or hidden_size // num_attention_heads`
    let hd = match c.opt_int("head_dim")? {
        Some(hd) if hd > 0 => hd,
        _ if h < heads => return Err(Error::Import(format!("hidden_size ({h}) is smaller than num_attention_heads ({heads}) (set `head_dim`)"))),
        _ => h / heads,
    };
    let window = c.opt_int("sliding_window")?;
    if window == Some(0) {
        return Err(Error::Import("field `sliding_window` must be at least 1".into()));
    }
    let types = layer_types(c, n, &["full_attention", "linear_attention"], |i| if i % 2 == 0 { "full_attention" } else { "linear_attention" })?;
    let full = Layer::MultiheadAttention(MultiheadAttention {
        dropout: c.prob("attention_dropout", 0.0)?,
        sliding_window: window,
        ..attention(h, heads, kv, hd, false)
    });
    let linear = Layer::LightningAttention(LightningAttention {
        hidden_size: h,
        num_heads: heads,
        head_dim: (Some(hd) != h.checked_div(heads).filter(|_| h.is_multiple_of(heads))).then_some(hd),
        block_size: c.size("block_size", 256)?,
    });
    for key in ["full_attn_alpha_factor", "full_attn_beta_factor", "linear_attn_alpha_factor", "linear_attn_beta_factor", "mlp_alpha_factor", "mlp_beta_factor"] {
        c.float(key, 1.0)?;
    }
    if c.float("router_jitter_noise", 0.0)? != 0.0 {
        return Err(Error::Import("field `router_jitter_noise`: the input jitter in training is not modelled (0 turns it off)".into()));
    }
    let experts = c.size("num_local_experts", c.opt_int("num_experts")?.unwrap_or(8))?;
    let top_k = c.size("num_experts_per_tok", 2)?;
    if top_k > experts {
        return Err(Error::Import(format!("field `num_experts_per_tok` ({top_k}) must be at most num_local_experts ({experts})")));
    }
    let sparse = Layer::SparseMoe(SparseMoe { router: Router::SoftmaxFp32, ..moe(h, experts, top_k, c.size("intermediate_size", d.intermediate)?) });
    Ok(types
        .iter()
        .map(|t| (if t == "linear_attention" { linear.clone() } else { full.clone() }, sparse.clone()))
        .collect())
}
