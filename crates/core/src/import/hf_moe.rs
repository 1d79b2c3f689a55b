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
//! | `deepseek_v2` | as `deepseek_v3` | as `deepseek_v3` with `DeepseekV2TopkRouter` (softmax scores, no bias buffer: the `softmax` router) and V2's defaults |
//! | `olmoe` | RMSNorm, GQA + RoPE, biases by `attention_bias`, `q_norm`/`k_norm` over the whole projections (`qk_norm_full`) | [`SparseMoe`] of `intermediate_size` experts, `softmax` router, `norm_topk_prob` |
//! | `granitemoe` | as `mixtral`, biases by `attention_bias`; `embedding_multiplier` and `logits_scaling` as `scale` layers | [`SparseMoe`] with the `topk_softmax` router (no bias) |
//! | `phimoe` | LayerNorms with biases, GQA + RoPE, biases by `attention_bias`, `lm_head_bias` | [`SparseMoe`]; the sparsemixer router lowered as `softmax` (its top-2 masks are `[S, E]` temporaries) |
//! | `ernie4_5_moe` | RMSNorm, GQA + RoPE, every projection (and `lm_head`) biased by `use_bias` | dense MLP before `moe_layer_start_index` (and off `moe_layer_interval`), then [`SparseMoe`] with the `softmax` router, its frozen `e_score_correction_bias` parameter and `moe_num_shared_experts` biased shared experts |
//! | `minimax` | RMSNorm; [`crate::layer::lightning::LightningAttention`] on `linear_attention` layers, GQA + RoPE (`sliding_window`) on `full_attention` ones | [`SparseMoe`] as `mixtral` on every layer |
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
use super::moe_cfg::{head_dim, Block, Cfg, Defaults};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The `model_type`s this module imports.
pub const MODEL_TYPES: &[&str] = &["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "deepseek_v2", "glm4_moe", "gpt_oss", "olmoe", "granitemoe", "phimoe", "qwen3_next", "llama4_text", "jamba", "bamba", "falcon_h1", "ernie4_5_moe", "minimax"];

/// Decoder layers this importer builds at most (a spec holds 200,000 layers once expanded, and
/// each decoder layer is several).
const MAX_LAYERS: u64 = 20_000;

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
        "deepseek_v2" => "DeepseekV2",
        "olmoe" => "Olmoe",
        "granitemoe" => "GraniteMoe",
        "phimoe" => "Phimoe",
        "glm4_moe" => "Glm4Moe",
        "gpt_oss" => "GptOss",
        "qwen3_next" => "Qwen3Next",
        "llama4_text" => "Llama4",
        "jamba" => "Jamba",
        "bamba" => "Bamba",
        "falcon_h1" => "FalconH1",
        "ernie4_5_moe" => "Ernie4_5_Moe",
        "minimax" => "MiniMax",
        other => return Err(Error::Import(format!("`{other}` is not a mixture-of-experts model_type"))),
    };
    let llama4_base = model_type == "llama4_text" && arch == Some("Llama4TextModel");
    let (head, mut name) = pick_class(prefix, if llama4_base { Some("Llama4Model") } else { arch });
    if model_type == "llama4_text" {
        // Llama4Model is the image-text model; the text decoder's base class is Llama4TextModel
        name = name.replacen("Llama4Model", "Llama4TextModel", 1);
    }
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
        "deepseek_v3" => deepseek_v3(&c, h, n_layers, eps, false)?,
        "deepseek_v2" => deepseek_v3(&c, h, n_layers, eps, true)?,
        "glm4_moe" => super::moe_families::glm4_moe(&c, &d, h, n_layers)?,
        "gpt_oss" => super::moe_families::gpt_oss(&c, &d, h, n_layers)?,
        "qwen3_next" => super::moe_hybrid::qwen3_next(&c, &d, h, n_layers)?,
        "llama4_text" => super::moe_hybrid::llama4_text(&c, &d, h, n_layers)?,
        "jamba" => super::moe_hybrid::jamba(&c, &d, h, n_layers)?,
        "bamba" => super::moe_hybrid::bamba(&c, &d, h, n_layers)?,
        "falcon_h1" => super::moe_hybrid::falcon_h1(&c, &d, h, n_layers)?,
        "ernie4_5_moe" => super::moe_families::ernie4_5_moe(&c, &d, h, n_layers)?,
        "minimax" => super::moe_hybrid::minimax(&c, &d, h, n_layers)?,
        _ => gqa_moe(&c, model_type, &d, h, n_layers, eps)?,
    };
    let ernie = model_type == "ernie4_5_moe";
    // Ernie4_5_MoeConfig ties by default; its `lm_head` is biased by `use_bias`
    let tied = c.flag("tie_word_embeddings", ernie)?;
    // Granite-MoE: `inputs_embeds * embedding_multiplier`, `logits / logits_scaling` (new
    // tensors: `scale` layers); `residual_multiplier` scales each branch (a transient `[S, D]`
    // saving nothing, not written out) and `attention_multiplier` is the attention's scaling
    // PhiMoE's norms are `nn.LayerNorm`s with biases (eps `rms_norm_eps`); its `lm_head` may have a bias
    let phimoe = model_type == "phimoe";
    let head_bias = (phimoe && c.flag("lm_head_bias", false)?) || (ernie && c.flag("use_bias", false)?);
    let granite = if model_type == "granitemoe" {
        let m = |key: &str| -> Result<f64> {
            match c.get(key) {
                None => Ok(1.0),
                Some(v) => v.as_f64().filter(|f| f.is_finite() && *f != 0.0).ok_or_else(|| Cfg::wrong(key, "a non-zero number", v)),
            }
        };
        m("residual_multiplier")?;
        m("attention_multiplier")?;
        Some((m("embedding_multiplier")?, m("logits_scaling")?))
    } else {
        None
    };
    c.finish(model_type)?;
    let mut spec_layers = vec![Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: h, padding_idx: None, tied_weight: false })];
    spec_layers.extend(group(layers, h, eps, phimoe));
    let mut names = module_names(head, spec_layers.len() - 1);
    spec_layers.push(final_norm(h, eps, phimoe));
    if head {
        spec_layers.push(Layer::Linear(Linear { in_features: h, out_features: vocab, bias: head_bias, tied_weight: tied }));
    }
    if let Some((embedding, logits)) = granite {
        use crate::layer::activation::Scale;
        spec_layers.insert(1, Layer::Scale(Scale { factor: embedding, rebinds_embeds: true }));
        if head {
            spec_layers.push(Layer::Scale(Scale { factor: 1.0 / logits, rebinds_embeds: false }));
        }
        // the inserted scale shifts the layout the names were written for
        names = Default::default();
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![max_pos.min(MAX_DEFAULT_SEQ_LEN)], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers: spec_layers,
        loss: Loss::CrossEntropy,
        names,
        unquantised: None,
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

/// An RMSNorm, or with `layer_norm` a LayerNorm with bias (PhiMoE).
fn final_norm(h: u64, eps: f64, layer_norm: bool) -> Layer {
    if layer_norm {
        Layer::LayerNorm(crate::layer::norm::LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true })
    } else {
        Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false })
    }
}

/// Runs of equal layers become `repeat`s (one activation-checkpointing unit per repetition) of
/// `residual([rms_norm, attention]), residual([rms_norm, feed-forward])`.
fn group(layers: Vec<Block>, h: u64, eps: f64, layer_norm: bool) -> Vec<Layer> {
    let norm = || final_norm(h, eps, layer_norm);
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
    if model_type == "phimoe" {
        // sparsemixer's `jitter_eps` (`router_jitter_noise`) only sets its masks' threshold;
        // `input_jitter_noise` scales the input by fresh noise in training
        c.float("router_jitter_noise", 0.01)?;
        if c.float("input_jitter_noise", 0.0)? != 0.0 {
            return Err(Error::Import("field `input_jitter_noise`: input jitter in training is not modelled (0 turns it off)".into()));
        }
    }
    if matches!(model_type, "mixtral" | "granitemoe" | "phimoe") {
        if c.opt_int("sliding_window")?.is_some() {
            return Err(Error::Import("field `sliding_window`: sliding-window attention is not modelled (null for full attention)".into()));
        }
        if model_type != "phimoe" && c.float("router_jitter_noise", 0.0)? != 0.0 {
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
    let olmoe = model_type == "olmoe";
    if olmoe {
        // `clip_qkv`: in-place clamps of the projections, no memory
        c.float("clip_qkv", 0.0)?;
    }
    let (qkv_bias, out_bias, qk_norm) = match model_type {
        "mixtral" => (false, false, false),
        "qwen2_moe" => (c.flag("qkv_bias", true)?, false, false),
        "olmoe" | "granitemoe" | "phimoe" => {
            let b = c.flag("attention_bias", false)?;
            (b, b, false)
        }
        _ => {
            let b = c.flag("attention_bias", false)?;
            (b, b, true)
        }
    };
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        dropout: c.prob("attention_dropout", 0.0)?,
        out_bias: (out_bias != qkv_bias).then_some(out_bias),
        qk_norm: qk_norm.then_some(NormKind::RmsNorm),
        qk_norm_full: olmoe,
        ..super::moe_cfg::gqa_attention(h, heads, kv, head_dim.unwrap_or(h / heads), qkv_bias)
    });
    let (experts_key, experts_default) = match model_type {
        "mixtral" | "granitemoe" => ("num_local_experts", 8),
        "phimoe" => ("num_local_experts", 16),
        "qwen2_moe" => ("num_experts", 60),
        "olmoe" => ("num_experts", 64),
        _ => ("num_experts", 128),
    };
    // Qwen3MoeConfig 5.24 writes `num_local_experts`; published Qwen3 configs `num_experts`.
    let experts = match (c.opt_int(experts_key)?, c.opt_int("num_local_experts")?) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => experts_default,
    };
    let top_k = c.size("num_experts_per_tok", if matches!(model_type, "mixtral" | "granitemoe" | "phimoe") { 2 } else if model_type == "qwen2_moe" { 4 } else { 8 })?;
    let dense_i = c.size("intermediate_size", d.intermediate)?;
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: dense_i, bias: false, gelu_new_dropout: None });
    if matches!(model_type, "mixtral" | "granitemoe" | "phimoe") {
        let moe = SparseMoe {
            hidden_size: h,
            num_experts: experts,
            top_k,
            intermediate_size: dense_i,
            // GraniteMoeTopKRouter: top-k logits, softmax over them
            // PhiMoE's sparsemixer (top-2 by masked softmaxes, `PhimoeMultiplier`): as `softmax`
            router: match model_type {
                "granitemoe" => Router::TopkSoftmax,
                "phimoe" => Router::Softmax,
                _ => Router::SoftmaxFp32,
            },
            norm_topk_prob: true,
            n_group: 1,
            topk_group: 1,
            shared_intermediate_size: None,
            shared_expert_gate: false,
            expert_bias: false,
            router_bias: false,
            activation: ExpertActivation::Silu,
            shared_bias: false,
            router_stats: false,
        };
        return Ok((0..n_layers).map(|_| (attn.clone(), Layer::SparseMoe(moe.clone()))).collect());
    }
    let shared = if model_type == "qwen2_moe" { Some(c.size("shared_expert_intermediate_size", 5632)?) } else { None };
    let moe = SparseMoe {
        hidden_size: h,
        num_experts: experts,
        top_k,
        // OlmoeExperts are `intermediate_size` wide
        intermediate_size: if olmoe { dense_i } else { c.size("moe_intermediate_size", if model_type == "qwen2_moe" { 1408 } else { 768 })? },
        router: Router::Softmax,
        norm_topk_prob: c.flag("norm_topk_prob", false)?,
        n_group: 1,
        topk_group: 1,
        shared_intermediate_size: shared,
        shared_expert_gate: shared.is_some(),
        expert_bias: false,
        router_bias: false,
        activation: ExpertActivation::Silu,
        shared_bias: false,
        router_stats: false,
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

/// DeepSeek-V3: latent attention; dense SwiGLU first, grouped-sigmoid-routed MoE after. With `v2`
/// DeepSeek-V2 (`modeling_deepseek_v2.py`): the same attention and experts, `DeepseekV2TopkRouter`
/// (an fp32 `weight [E, D]`, softmax scores, `greedy` or `group_limited_greedy` top-k: no bias
/// buffer; lowered as the `softmax` router, the group selection's `[S, E]` temporaries aside) and
/// its class defaults (64 experts of 1407, two shared, no dense layers).
fn deepseek_v3(c: &Cfg, h: u64, n_layers: u64, eps: f64, v2: bool) -> Result<Vec<Block>> {
    let heads = c.size("num_attention_heads", if v2 { 32 } else { 128 })?;
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
    if v2 {
        // DeepseekV2TopkRouter reads `topk_method` only; `scoring_func` is the remote code's
        match c.str("topk_method")?.unwrap_or("greedy") {
            "greedy" | "group_limited_greedy" => {}
            other => return Err(Error::Import(format!("field `topk_method`: `{other}` is not what DeepseekV2 implements (greedy, group_limited_greedy)"))),
        }
        if let Some(v) = c.str("scoring_func")? {
            if v != "softmax" {
                return Err(Error::Import(format!("field `scoring_func`: `{v}` is not what DeepseekV2 implements (softmax)")));
            }
        }
        if c.flag("mlp_bias", false)? {
            return Err(Error::Import("field `mlp_bias`: biased dense and shared-expert MLPs are not modelled".into()));
        }
        c.ignore(&["aux_loss_alpha", "seq_aux", "head_dim", "rope_interleave"]);
    }
    for (key, want) in [("scoring_func", "sigmoid"), ("topk_method", "noaux_tc")].into_iter().filter(|_| !v2) {
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
        expand_latent: v2,
    });
    let moe_i = c.size("moe_intermediate_size", if v2 { 1407 } else { 2048 })?;
    let n_shared = c.int("n_shared_experts", if v2 { 2 } else { 1 })?;
    c.float("routed_scaling_factor", 2.5)?;
    let experts = c.size("n_routed_experts", if v2 { 64 } else { 256 })?;
    let top_k = match c.opt_int("num_experts_per_tok")? {
        Some(k) if k > 0 => k,
        // DeepseekV2Config's default is None, which its router cannot run (`topk(k=None)`)
        _ if v2 => return Err(Error::Import("field `num_experts_per_tok` must be set (DeepseekV2Config's default, null, routes no tokens)".into())),
        _ => 8,
    };
    let (n_group, topk_group) = if v2 {
        c.ignore(&["n_group", "topk_group"]);
        (1, 1)
    } else {
        (c.size("n_group", 8)?, c.size("topk_group", 4)?)
    };
    let moe = SparseMoe {
        hidden_size: h,
        num_experts: experts,
        top_k,
        intermediate_size: moe_i,
        router: if v2 { Router::Softmax } else { Router::GroupedSigmoid },
        norm_topk_prob: c.flag("norm_topk_prob", !v2)?,
        n_group,
        topk_group,
        shared_intermediate_size: (n_shared > 0).then(|| moe_i.saturating_mul(n_shared)),
        shared_expert_gate: false,
        expert_bias: false,
        router_bias: false,
        activation: ExpertActivation::Silu,
        shared_bias: false,
        router_stats: false,
    };
    let dense = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", if v2 { 11008 } else { 18432 })?, bias: false, gelu_new_dropout: None });
    let first_dense = c.int("first_k_dense_replace", if v2 { 0 } else { 3 })?;
    Ok((0..n_layers)
        .map(|i| (attn.clone(), if i < first_dense { dense.clone() } else { Layer::SparseMoe(moe.clone()) }))
        .collect())
}

