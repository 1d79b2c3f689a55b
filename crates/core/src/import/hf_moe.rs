//! Hugging Face `config.json` → spec for the mixture-of-experts decoders: `mixtral`, `qwen2_moe`,
//! `qwen3_moe` and `deepseek_v3`, built as transformers 5.24 instantiates their `…ForCausalLM`
//! (or `…Model`) class, so `params` is PyTorch's `sum(p.numel() for p in model.parameters())`.
//!
//! | `model_type` | layer | feed-forward |
//! |---|---|---|
//! | `mixtral` | RMSNorm, GQA + RoPE | [`SparseMoe`], `softmax_fp32` router, no shared expert |
//! | `qwen2_moe` | RMSNorm, GQA + RoPE, q/k/v biases (`qkv_bias`), no `o_proj` bias | [`SparseMoe`] + shared expert and `shared_expert_gate`; dense `intermediate_size` MLP on `mlp_only_layers` and off `decoder_sparse_step` |
//! | `qwen3_moe` | as `qwen2_moe` plus per-head RMSNorm on q and k (`q_norm`, `k_norm`), `attention_bias` | [`SparseMoe`], no shared expert |
//! | `deepseek_v3` | [`MultiHeadLatentAttention`] | dense SwiGLU on the first `first_k_dense_replace` layers, then [`SparseMoe`] with the `grouped_sigmoid` router and `n_shared_experts` |
//! | `gpt_oss` | RMSNorm, GQA + RoPE with q/k/v/o biases (`attention_bias`), `head_dim` 64, attention sinks, `layer_types` alternating `sliding_attention` (window `sliding_window`) and `full_attention` | [`SparseMoe`] with the `topk_softmax` router (a biased linear), biased experts and the clamped SwiGLU (`swiglu_limit`, `swiglu_alpha`) |
//! | `glm4_moe` | RMSNorm, GQA + partial RoPE (`partial_rotary_factor`, default 0.5), q/k/v biases (`attention_bias`), no `o_proj` bias, per-head `q_norm`/`k_norm` with `use_qk_norm`, `head_dim` of its own | as `deepseek_v3` (`Glm4MoeTopkRouter` is DeepSeek-V3's; `Glm4MoeMoE` always adds `n_shared_experts` shared experts) |
//!
//! `head_dim` may differ from `hidden_size / num_attention_heads` (Qwen3-MoE's 128 at 2048 × 32,
//! GLM-4.5's 128 at 4096 × 96): every `…Attention` reads `getattr(config, "head_dim", hidden_size // num_attention_heads)`.
//!
//! DeepSeek-V3's multi-token-prediction layers (`num_nextn_predict_layers`) are not built by
//! transformers (`DeepseekV3Model` has `num_hidden_layers` layers; the checkpoint's layer 61 is
//! ignored on load), so they are not here either.
//!
//! Every field is checked: a field this importer does not know, with a non-null value, is an
//! [`Error::Import`] naming it, and so is a `quantization_config` whose method
//! [`crate::formats::hf`] does not model (a known one selects the estimate's weight format). Routing assumption: see
//! [`crate::layer::moe`] — with transformers' dropless `grouped_mm` dispatch the routed
//! activations are `tokens · top_k` rows whatever the balance, so uniform and skewed routing give
//! the same figure.

use super::decoder::{LLAMA_MODULES, MAX_DEFAULT_SEQ_LEN};
use crate::error::{Error, Result};
use crate::layer::attention::MultiheadAttention;
use crate::layer::norm::NormKind;
use crate::layer::embedding::Embedding;
use crate::layer::linear::{GatedMlp, Linear};
use crate::layer::mla::MultiHeadLatentAttention;
use crate::layer::moe::{ExpertActivation, Router, SparseMoe};
use crate::layer::norm::RmsNorm;
use crate::layer_names::{set, LayerNames};
use crate::path::{LayerPath, Slot};
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The `model_type`s this module imports.
pub const MODEL_TYPES: &[&str] = &["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "glm4_moe", "gpt_oss"];

/// Decoder layers this importer builds at most (a spec holds 200,000 layers once expanded, and
/// each decoder layer is several).
const MAX_LAYERS: u64 = 20_000;

/// The mixture-of-experts families' own fields with no effect on parameters or memory (router
/// loss switches and weights, read by the loss only); the generic ones every importer accepts are
/// [`super::generic::GENERIC_FIELDS`].
const INERT: &[&str] = &["output_router_logits", "router_aux_loss_coef", "hidden_act", "rms_norm_eps", "attention_dropout", "tie_word_embeddings"];

/// Builds the spec of a `model_type` in [`MODEL_TYPES`].
pub fn from_config(obj: &Map<String, Value>, model_type: &str, arch: Option<&str>) -> Result<ModelSpec> {
    // a known format is read by `formats::hf` (the estimate's `--weights`); others are refused
    if let Some(q) = obj.get("quantization_config").filter(|v| !v.is_null()) {
        crate::formats::hf::from_quantization_config(q)?;
    }
    let c = Cfg { map: obj, seen: RefCell::new(BTreeSet::new()) };
    c.ignore(&["quantization_config"]);
    let prefix = match model_type {
        "mixtral" => "Mixtral",
        "qwen2_moe" => "Qwen2Moe",
        "qwen3_moe" => "Qwen3Moe",
        "deepseek_v3" => "DeepseekV3",
        "glm4_moe" => "Glm4Moe",
        "gpt_oss" => "GptOss",
        other => return Err(Error::Import(format!("`{other}` is not a mixture-of-experts model_type"))),
    };
    let (head, name) = pick_class(prefix, arch);
    let d = Defaults::of(model_type);
    let h = c.size("hidden_size", d.hidden)?;
    let vocab = c.size("vocab_size", d.vocab)?;
    let n_layers = c.size("num_hidden_layers", d.layers)?;
    if n_layers > MAX_LAYERS {
        return Err(Error::Import(format!("field `num_hidden_layers` ({n_layers}) is more than a spec can hold ({MAX_LAYERS})")));
    }
    let eps = c.float("rms_norm_eps", d.eps)?;
    let max_pos = c.size("max_position_embeddings", d.max_pos)?;
    match c.str("hidden_act")?.unwrap_or("silu") {
        "silu" | "swish" => {}
        other => return Err(Error::Import(format!("field `hidden_act`: `{other}` is not supported (silu)"))),
    }
    let layers: Vec<(Layer, Layer)> = match model_type {
        "deepseek_v3" => deepseek_v3(&c, h, n_layers, eps)?,
        "glm4_moe" => glm4_moe(&c, &d, h, n_layers)?,
        "gpt_oss" => gpt_oss(&c, &d, h, n_layers)?,
        _ => gqa_moe(&c, model_type, &d, h, n_layers, eps)?,
    };
    let tied = c.flag("tie_word_embeddings", false)?;
    c.finish(model_type)?;
    let mut spec_layers = vec![Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: h, padding_idx: None, tied_weight: false })];
    spec_layers.extend(group(layers, h, eps));
    let names = module_names(head, spec_layers.len() - 1);
    spec_layers.push(Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false }));
    if head {
        spec_layers.push(Layer::Linear(Linear { in_features: h, out_features: vocab, bias: false, tied_weight: tied }));
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![max_pos.min(MAX_DEFAULT_SEQ_LEN)], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers: spec_layers,
        loss: Loss::CrossEntropy,
        names,
    })
}

/// The transformers module names (LLaMA's, `super::hf::DecoderModules`), with each decoder
/// layer's parts: `group` writes it as two residuals that are the layer's `forward`, not modules.
fn module_names(head: bool, runs: usize) -> LayerNames {
    let mut names = LLAMA_MODULES.names(1..runs + 1, Some(runs + 1), head.then_some(runs + 2));
    for i in 1..=runs {
        let block = LayerPath::top(i);
        for (slot, parts) in [(0, ["input_layernorm", "self_attn"]), (1, ["post_attention_layernorm", "mlp"])] {
            let residual = block.child(Slot::Body, slot);
            set(&mut names, &residual, "");
            for (j, part) in parts.into_iter().enumerate() {
                set(&mut names, &residual.child(Slot::Body, j), part);
            }
        }
    }
    names
}

/// `…ForCausalLM` (with `lm_head`) or `…Model`; another class falls back to the base model.
fn pick_class(prefix: &str, arch: Option<&str>) -> (bool, String) {
    let (lm, base) = (format!("{prefix}ForCausalLM"), format!("{prefix}Model"));
    match arch {
        Some(a) if a == lm => (true, lm),
        Some(a) if a == base => (false, base),
        Some(a) => (false, format!("{base} (imported from a {a} config; its task head is not modelled)")),
        None => (false, base),
    }
}

/// The config class defaults transformers fills in for an absent field.
struct Defaults {
    hidden: u64,
    vocab: u64,
    layers: u64,
    heads: u64,
    kv_heads: u64,
    intermediate: u64,
    eps: f64,
    max_pos: u64,
}

impl Defaults {
    fn of(model_type: &str) -> Defaults {
        match model_type {
            // MixtralConfig()
            "mixtral" => Defaults { hidden: 4096, vocab: 32000, layers: 32, heads: 32, kv_heads: 8, intermediate: 14336, eps: 1e-5, max_pos: 131072 },
            // Qwen2MoeConfig()
            "qwen2_moe" => Defaults { hidden: 2048, vocab: 151936, layers: 24, heads: 16, kv_heads: 16, intermediate: 5632, eps: 1e-6, max_pos: 32768 },
            // Qwen3MoeConfig()
            "qwen3_moe" => Defaults { hidden: 2048, vocab: 151936, layers: 24, heads: 32, kv_heads: 4, intermediate: 6144, eps: 1e-6, max_pos: 32768 },
            // Glm4MoeConfig()
            "glm4_moe" => Defaults { hidden: 4096, vocab: 151552, layers: 46, heads: 96, kv_heads: 8, intermediate: 10944, eps: 1e-5, max_pos: 131072 },
            // GptOssConfig()
            "gpt_oss" => Defaults { hidden: 2880, vocab: 201088, layers: 36, heads: 64, kv_heads: 8, intermediate: 2880, eps: 1e-5, max_pos: 131072 },
            // DeepseekV3Config()
            _ => Defaults { hidden: 7168, vocab: 129280, layers: 61, heads: 128, kv_heads: 128, intermediate: 18432, eps: 1e-6, max_pos: 4096 },
        }
    }
}

/// One decoder layer as `(attention, feed-forward)`, each to be wrapped in `residual(norm, …)`.
type Block = (Layer, Layer);

/// Runs of equal layers become `repeat`s (one activation-checkpointing unit per repetition) of
/// `residual([rms_norm, attention]), residual([rms_norm, feed-forward])`.
fn group(layers: Vec<Block>, h: u64, eps: f64) -> Vec<Layer> {
    let norm = || Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false });
    let res = |l: Layer| Layer::Residual { body: vec![norm(), l], shortcut: None, inplace: false };
    let mut out: Vec<(u64, Block)> = Vec::new();
    for block in layers {
        match out.last_mut() {
            Some((n, last)) if *last == block => *n += 1,
            _ => out.push((1, block)),
        }
    }
    out.into_iter().map(|(times, (a, f))| Layer::Repeat { times, body: vec![res(a), res(f)] }).collect()
}

/// Mixtral, Qwen2-MoE and Qwen3-MoE: grouped-query attention and a softmax-routed MoE.
fn gqa_moe(c: &Cfg, model_type: &str, d: &Defaults, h: u64, n_layers: u64, _eps: f64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", d.heads)?;
    let kv = c.size("num_key_value_heads", d.kv_heads)?;
    let head_dim = head_dim(c, h, heads)?;
    if c.flag("use_sliding_window", false)? {
        return Err(Error::Import("field `use_sliding_window`: sliding-window attention is not modelled".into()));
    }
    c.ignore(&["max_window_layers"]);
    if model_type == "mixtral" {
        if c.opt_int("sliding_window")?.is_some() {
            return Err(Error::Import("field `sliding_window`: sliding-window attention is not modelled (null for full attention)".into()));
        }
        if c.float("router_jitter_noise", 0.0)? != 0.0 {
            return Err(Error::Import("field `router_jitter_noise`: router jitter in training is not modelled (0 turns it off)".into()));
        }
    } else {
        c.ignore(&["sliding_window"]);
        if let Some(Value::Array(types)) = c.get("layer_types") {
            if let Some(t) = types.iter().find(|t| t.as_str() != Some("full_attention")) {
                return Err(Error::Import(format!("field `layer_types`: `{t}` layers are not modelled (full_attention)")));
            }
        }
    }
    let (qkv_bias, out_bias, qk_norm) = match model_type {
        "mixtral" => (false, false, false),
        "qwen2_moe" => (c.flag("qkv_bias", true)?, false, false),
        _ => {
            let b = c.flag("attention_bias", false)?;
            (b, b, true)
        }
    };
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        embed_dim: h,
        num_heads: heads,
        num_kv_heads: (kv != heads).then_some(kv),
        dropout: c.prob("attention_dropout", 0.0)?,
        bias: qkv_bias,
        causal: true,
        rotary: true,
        fused_qkv: false,
        out_bias: (out_bias != qkv_bias).then_some(out_bias),
        qk_norm: qk_norm.then_some(NormKind::RmsNorm),
        head_dim,
        rotary_dim: None,
        sliding_window: None,
        logit_softcap: None,
        key_bias: None,
        position_bias: false,
        contiguous_heads: false,
        sinks: false,
    });
    let (experts_key, experts_default) = match model_type {
        "mixtral" => ("num_local_experts", 8),
        "qwen2_moe" => ("num_experts", 60),
        _ => ("num_experts", 128),
    };
    // Qwen3MoeConfig 5.24 writes `num_local_experts`; published Qwen3 configs `num_experts`.
    let experts = match (c.opt_int(experts_key)?, c.opt_int("num_local_experts")?) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => experts_default,
    };
    let top_k = c.size("num_experts_per_tok", if model_type == "mixtral" { 2 } else if model_type == "qwen2_moe" { 4 } else { 8 })?;
    let dense_i = c.size("intermediate_size", d.intermediate)?;
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: dense_i, bias: false, gelu_new_dropout: None });
    if model_type == "mixtral" {
        let moe = SparseMoe {
            hidden_size: h,
            num_experts: experts,
            top_k,
            intermediate_size: dense_i,
            router: Router::SoftmaxFp32,
            norm_topk_prob: true,
            n_group: 1,
            topk_group: 1,
            shared_intermediate_size: None,
            shared_expert_gate: false,
            expert_bias: false,
            activation: ExpertActivation::Silu,
        };
        return Ok((0..n_layers).map(|_| (attn.clone(), Layer::SparseMoe(moe.clone()))).collect());
    }
    let shared = if model_type == "qwen2_moe" { Some(c.size("shared_expert_intermediate_size", 5632)?) } else { None };
    let moe = SparseMoe {
        hidden_size: h,
        num_experts: experts,
        top_k,
        intermediate_size: c.size("moe_intermediate_size", if model_type == "qwen2_moe" { 1408 } else { 768 })?,
        router: Router::Softmax,
        norm_topk_prob: c.flag("norm_topk_prob", false)?,
        n_group: 1,
        topk_group: 1,
        shared_intermediate_size: shared,
        shared_expert_gate: shared.is_some(),
        expert_bias: false,
        activation: ExpertActivation::Silu,
    };
    // Qwen2MoeDecoderLayer: a sparse block where `layer_idx not in mlp_only_layers and
    // num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0`, else the dense MLP.
    let step = c.int("decoder_sparse_step", 1)?;
    let mlp_only = c.int_list("mlp_only_layers")?;
    Ok((0..n_layers)
        .map(|i| {
            let sparse = !mlp_only.contains(&i) && experts > 0 && step > 0 && (i + 1) % step == 0;
            (attn.clone(), if sparse { Layer::SparseMoe(moe.clone()) } else { dense.clone() })
        })
        .collect())
}

/// `head_dim` when it differs from `hidden_size / num_attention_heads` (the attention's own
/// default); an error when neither gives a size.
fn head_dim(c: &Cfg, h: u64, heads: u64) -> Result<Option<u64>> {
    match c.opt_int("head_dim")? {
        Some(0) => Err(Error::Import("field `head_dim` must be at least 1".into())),
        Some(hd) if h.is_multiple_of(heads) && hd == h / heads => Ok(None),
        Some(hd) => Ok(Some(hd)),
        // Python's `hidden_size // num_attention_heads` (GLM-4.5's class default: 4096 // 96 = 42)
        None if h < heads => Err(Error::Import(format!("hidden_size ({h}) is smaller than num_attention_heads ({heads}) (set `head_dim`)"))),
        None if !h.is_multiple_of(heads) => Ok(Some(h / heads)),
        None => Ok(None),
    }
}

/// GLM-4.5 (`modeling_glm4_moe.py`): `Glm4MoeAttention` (GQA, q/k/v biases, partial rotary,
/// optional per-head q/k RMSNorm), dense `Glm4MoeMLP` on the first `first_k_dense_replace`
/// layers, then `Glm4MoeMoE`: DeepSeek-V3's grouped-sigmoid router (fp32 `weight [E, D]`, the
/// `e_score_correction_bias` buffer), `n_routed_experts` experts and the shared experts.
fn glm4_moe(c: &Cfg, d: &Defaults, h: u64, n_layers: u64) -> Result<Vec<Block>> {
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
        embed_dim: h,
        num_heads: heads,
        num_kv_heads: (kv != heads).then_some(kv),
        dropout: c.prob("attention_dropout", 0.0)?,
        bias,
        causal: true,
        rotary: true,
        fused_qkv: false,
        out_bias: bias.then_some(false),
        qk_norm: c.flag("use_qk_norm", false)?.then_some(NormKind::RmsNorm),
        head_dim: hd,
        rotary_dim: (rd < head).then_some(rd),
        sliding_window: None,
        logit_softcap: None,
        key_bias: None,
        position_bias: false,
        contiguous_heads: false,
        sinks: false,
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
        activation: ExpertActivation::Silu,
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
fn gpt_oss(c: &Cfg, d: &Defaults, h: u64, n_layers: u64) -> Result<Vec<Block>> {
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
        activation: ExpertActivation::ClampedSwiglu,
    };
    Ok(windows.into_iter().map(|w| (attn(w), Layer::SparseMoe(moe.clone()))).collect())
}

/// DeepSeek-V3: latent attention; dense SwiGLU first, grouped-sigmoid-routed MoE after.
fn deepseek_v3(c: &Cfg, h: u64, n_layers: u64, eps: f64) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", 128)?;
    // DeepseekV3Attention has num_attention_heads K/V heads after kv_b_proj; `num_key_value_heads`
    // sizes nothing.
    c.ignore(&["num_key_value_heads", "pretraining_tp", "num_nextn_predict_layers", "ep_size"]);
    let rope = c.size("qk_rope_head_dim", 64)?;
    let nope = c.int("qk_nope_head_dim", 128)?;
    if let Some(qk) = c.opt_int("qk_head_dim")? {
        if qk != nope.saturating_add(rope) {
            return Err(Error::Import(format!("field `qk_head_dim` ({qk}) must be qk_nope_head_dim + qk_rope_head_dim ({})", nope.saturating_add(rope))));
        }
    }
    // DeepseekV3Config sets `head_dim = qk_rope_head_dim` (for the rotary embedding)
    if let Some(hd) = c.opt_int("head_dim")? {
        if hd != rope {
            return Err(Error::Import(format!("field `head_dim` ({hd}) must equal qk_rope_head_dim ({rope}) (the rotary dims)")));
        }
    }
    // `q_lora_rank: null` (DeepSeek-V2-Lite) means a plain q_proj; absent means the default 1536.
    let q_lora_rank = match c.map.get("q_lora_rank") {
        Some(Value::Null) => {
            c.ignore(&["q_lora_rank"]);
            None
        }
        _ => Some(c.size("q_lora_rank", 1536)?),
    };
    for (key, want) in [("scoring_func", "sigmoid"), ("topk_method", "noaux_tc")] {
        if let Some(v) = c.str(key)? {
            if v != want {
                return Err(Error::Import(format!("field `{key}`: `{v}` is not what DeepseekV3 implements ({want})")));
            }
        }
    }
    if c.int("moe_layer_freq", 1)? != 1 {
        return Err(Error::Import("field `moe_layer_freq`: only 1 (every layer after the dense ones) is what DeepseekV3 builds".into()));
    }
    let attn = Layer::MultiHeadLatentAttention(MultiHeadLatentAttention {
        hidden_size: h,
        num_heads: heads,
        q_lora_rank,
        kv_lora_rank: c.size("kv_lora_rank", 512)?,
        qk_rope_head_dim: rope,
        qk_nope_head_dim: nope,
        v_head_dim: c.size("v_head_dim", 128)?,
        bias: c.flag("attention_bias", false)?,
        rope_interleave: c.flag("rope_interleave", true)?,
        dropout: c.prob("attention_dropout", 0.0)?,
        eps,
    });
    let moe_i = c.size("moe_intermediate_size", 2048)?;
    let n_shared = c.int("n_shared_experts", 1)?;
    c.float("routed_scaling_factor", 2.5)?;
    let moe = SparseMoe {
        hidden_size: h,
        num_experts: c.size("n_routed_experts", 256)?,
        top_k: c.size("num_experts_per_tok", 8)?,
        intermediate_size: moe_i,
        router: Router::GroupedSigmoid,
        norm_topk_prob: c.flag("norm_topk_prob", true)?,
        n_group: c.size("n_group", 8)?,
        topk_group: c.size("topk_group", 4)?,
        shared_intermediate_size: (n_shared > 0).then(|| moe_i.saturating_mul(n_shared)),
        shared_expert_gate: false,
        expert_bias: false,
        activation: ExpertActivation::Silu,
    };
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", 18432)?, bias: false, gelu_new_dropout: None });
    let first_dense = c.int("first_k_dense_replace", 3)?;
    Ok((0..n_layers)
        .map(|i| (attn.clone(), if i < first_dense { dense.clone() } else { Layer::SparseMoe(moe.clone()) }))
        .collect())
}

/// A config object read field by field, remembering which fields were read.
struct Cfg<'a> {
    map: &'a Map<String, Value>,
    seen: RefCell<BTreeSet<&'a str>>,
}

impl<'a> Cfg<'a> {
    /// The field (marked as read), or `None` when absent or `null` (the class default).
    fn get(&self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.map.get_key_value(key)?;
        self.seen.borrow_mut().insert(k.as_str());
        Some(v).filter(|v| !v.is_null())
    }

    /// Marks fields as understood without reading them.
    fn ignore(&self, keys: &[&str]) {
        for key in keys {
            self.get(key);
        }
    }

    fn wrong(key: &str, want: &str, got: &Value) -> Error {
        let shown: String = got.to_string().chars().take(40).collect();
        Error::Import(format!("field `{key}` must be {want}, got {shown}"))
    }

    fn opt_int(&self, key: &str) -> Result<Option<u64>> {
        self.get(key).map(|v| as_int(v).ok_or_else(|| Self::wrong(key, "a non-negative integer", v))).transpose()
    }

    fn int(&self, key: &str, default: u64) -> Result<u64> {
        Ok(self.opt_int(key)?.unwrap_or(default))
    }

    fn size(&self, key: &str, default: u64) -> Result<u64> {
        match self.int(key, default)? {
            0 => Err(Error::Import(format!("field `{key}` must be at least 1"))),
            v => Ok(v),
        }
    }

    fn float(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).ok_or_else(|| Self::wrong(key, "a non-negative number", v)),
        }
    }

    fn prob(&self, key: &str, default: f64) -> Result<f64> {
        let p = self.float(key, default)?;
        if p > 1.0 {
            return Err(Error::Import(format!("field `{key}` must be a probability between 0 and 1, got {p}")));
        }
        Ok(p)
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| Self::wrong(key, "true or false", v)),
        }
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key).map(|v| v.as_str().ok_or_else(|| Self::wrong(key, "a string", v))).transpose()
    }

    fn int_list(&self, key: &str) -> Result<Vec<u64>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a.iter().map(|v| as_int(v).ok_or_else(|| Self::wrong(key, "a list of layer indices", v))).collect(),
            Some(v) => Err(Self::wrong(key, "a list of layer indices", v)),
        }
    }

    /// Refuses the first field that was neither read nor known to be inert (`null`s are
    /// defaults; generic fields: [`super::generic::is_inert`]).
    fn finish(&self, model_type: &str) -> Result<()> {
        self.ignore(INERT);
        let seen = self.seen.borrow();
        for (k, v) in self.map.iter().filter(|(k, v)| !v.is_null() && !seen.contains(k.as_str())) {
            if !super::generic::is_inert(k, v, model_type)? {
                return Err(Error::Import(format!(
                    "field `{k}` is not understood by the {model_type} importer (rather than guess what it changes, the config is refused)"
                )));
            }
        }
        Ok(())
    }
}

/// A JSON number that is a non-negative integer (`768` or `768.0`).
fn as_int(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19).map(|f| f as u64))
}
