//! LLaMA's variants with one mechanism of their own: `smollm3` (no-RoPE layers) and `granite`
//! (embedding, residual, attention and logit multipliers), built on [`super::dense::Decoder`].

use super::dense::{divisible, head_for, layer_count, Decoder, IGNORED_LLAMA_LIKE};
use crate::error::{Error, Result};
use crate::import::decoder::{LLAMA_MODULES, MAX_DEFAULT_SEQ_LEN};
use crate::import::fields::{pick, Fields};
use crate::layer::activation::Scale;
use crate::layer::norm::{NormKind, RmsNorm};
use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::presets;
use crate::spec::{Layer, ModelSpec};
use serde_json::Value;

/// A list of per-layer values (`no_rope_layers`, `layer_types`) of exactly `n` entries, or `None`.
fn per_layer<'a>(c: &'a Fields, key: &str, n: u64) -> Result<Option<&'a Vec<Value>>> {
    match c.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) if a.len() as u64 == n => Ok(Some(a)),
        Some(Value::Array(a)) => Err(Error::Import(format!("field `{key}` has {} entries for {n} layers", a.len()))),
        Some(v) => Err(Fields::wrong(key, "a list with one entry per layer", v)),
    }
}

/// `layer_types` (exactly `n`) as flags, `true` for `sliding_attention` and `false` for
/// `full_attention`, any other type refused by name; `None` when absent.
pub(super) fn sliding_types(c: &Fields, n: u64) -> Result<Option<Vec<bool>>> {
    per_layer(c, "layer_types", n)?
        .map(|a| {
            a.iter()
                .map(|t| match t.as_str() {
                    Some("sliding_attention") => Ok(true),
                    Some("full_attention") => Ok(false),
                    _ => Err(Error::Import(format!("field `layer_types`: `{t}` layers are not modelled (full_attention, sliding_attention)"))),
                })
                .collect()
        })
        .transpose()
}

/// `SmolLM3Config` (transformers 5.24, `modeling_smollm3.py`): LLaMA's layers with rotary on the
/// layers `no_rope_layers` marks 1 (by default all but every `no_rope_layer_interval`-th), biases
/// by `attention_bias` / `mlp_bias`, a sliding window on `sliding_attention` layers when
/// `use_sliding_window`, the head tied by default.
pub(super) fn smollm3(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["SmolLM3ForCausalLM", "SmolLM3Model"], "SmolLM3Model");
    let h = c.size("hidden_size", 2048)?;
    let heads = c.size("num_attention_heads", 16)?;
    let kv = c.size("num_key_value_heads", 4)?;
    divisible(h, heads)?;
    let n = layer_count(c, "num_hidden_layers", 36)?;
        let vocab = c.size("vocab_size", 128256)?;
    let eps = c.float("rms_norm_eps", 1e-6)?;
    let interval = c.size("no_rope_layer_interval", 4)?;
    let rope: Vec<bool> = match per_layer(c, "no_rope_layers", n)? {
        Some(a) => a.iter().map(|v| v.as_u64().map(|r| r != 0).or(v.as_bool()).ok_or_else(|| Fields::wrong("no_rope_layers", "a list of 0/1", v))).collect::<Result<_>>()?,
        None => (0..n).map(|i| (i + 1) % interval != 0).collect(),
    };
    let use_sw = c.flag("use_sliding_window", false)?;
    let window = c.opt_int("sliding_window")?;
    let sliding: Vec<bool> = match sliding_types(c, n)? {
        Some(s) => s,
        None => rope.iter().map(|r| use_sw && window.is_some() && !r).collect(),
    };
    c.activation("hidden_act", FfnActivation::Silu)?;
    let (attn_bias, mlp_bias) = (c.flag("attention_bias", false)?, c.flag("mlp_bias", false)?);
    let layer = llama_layer(c, (h, heads, kv), eps, (attn_bias, mlp_bias), c.size("intermediate_size", 11008)?)?;
    let layers = rope
        .iter()
        .zip(&sliding)
        .map(|(&r, &s)| TransformerLayer { rotary: r, sliding_window: if use_sw && s { window } else { None }, ..layer.clone() })
        .collect();
    let max_pos = c.size("max_position_embeddings", 32768)?;
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown("smollm3", IGNORED_LLAMA_LIKE)?;
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![],
        layers,
        final_norm: Some(Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false })),
        after_norm: vec![],
        head: head_for(class, "SmolLM3ForCausalLM", h, vocab, tied, false),
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}

/// `GraniteConfig` (transformers 5.24, `modeling_granite.py`): LLaMA's layers (biases by
/// `attention_bias` / `mlp_bias`), `inputs_embeds * embedding_multiplier` and
/// `logits / logits_scaling` (each a new tensor: a `scale` layer), `attention_multiplier` as the
/// attention's scaling (no memory) and `residual + h * residual_multiplier` on both residuals —
/// that product, a transient `[S, D]` saving nothing, is the one part not written out (a layer
/// here adds the branch directly).
pub(super) fn granite(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["GraniteForCausalLM", "GraniteModel"], "GraniteModel");
    let h = c.size("hidden_size", 4096)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv = c.size("num_key_value_heads", heads)?;
    divisible(h, heads)?;
    let n = layer_count(c, "num_hidden_layers", 32)?;
        let vocab = c.size("vocab_size", 32000)?;
    let eps = c.float("rms_norm_eps", 1e-6)?;
    c.activation("hidden_act", FfnActivation::Silu)?;
    let (attn_bias, mlp_bias) = (c.flag("attention_bias", false)?, c.flag("mlp_bias", false)?);
    let multiplier = |key: &str| -> Result<f64> {
        match c.get(key) {
            None => Ok(1.0),
            Some(v) => v.as_f64().filter(|f| f.is_finite() && *f != 0.0).ok_or_else(|| Fields::wrong(key, "a non-zero number", v)),
        }
    };
    let embedding = multiplier("embedding_multiplier")?;
    let logits = multiplier("logits_scaling")?;
    multiplier("residual_multiplier")?;
    multiplier("attention_multiplier")?;
    let layer = TransformerLayer {
        rotary: true,
        ..llama_layer(c, (h, heads, kv), eps, (attn_bias, mlp_bias), c.size("intermediate_size", 11008)?)?
    };
    let max_pos = c.size("max_position_embeddings", 2048)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("granite", IGNORED_LLAMA_LIKE)?;
    let head = head_for(class, "GraniteForCausalLM", h, vocab, tied, false);
    let after_head = if head.is_some() { vec![Layer::Scale(Scale { factor: 1.0 / logits, rebinds_embeds: false })] } else { vec![] };
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![Layer::Scale(Scale { factor: embedding, rebinds_embeds: true })],
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false })),
        after_norm: vec![],
        head,
        after_head,
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}

/// `Glm4Config` (transformers 5.24, `modeling_glm4.py`): GLM-4's dense decoder — GQA with q/k/v
/// biases (`attention_bias`, no `o_proj` bias), its own `head_dim`, partial rotary
/// (`partial_rotary_factor`, default 0.5), four RMSNorms a layer (`post_self_attn_layernorm`,
/// `post_mlp_layernorm` on the outputs: `post_norms`) and a fused `gate_up_proj` (the parameters of
/// a gated MLP without biases; its whole output held to the down projection: `fused_gate_up`).
pub(super) fn glm4(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["Glm4ForCausalLM", "Glm4Model"], "Glm4Model");
    let h = c.size("hidden_size", 4096)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv = c.size("num_key_value_heads", 2)?;
    let hd = c.size("head_dim", 128)?;
    let n = layer_count(c, "num_hidden_layers", 40)?;
        let vocab = c.size("vocab_size", 151552)?;
    let eps = c.float("rms_norm_eps", 1.5625e-7)?;
    c.activation("hidden_act", FfnActivation::Silu)?;
    let (rotary, rotary_dim) = super::dense::rotary_dim(c, "partial_rotary_factor", 0.5, hd)?;
    let bias = c.flag("attention_bias", true)?;
    let layer = TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: FfnActivation::Silu,
        layer_norm_eps: eps,
        norm_first: true,
        bias,
        out_bias: bias.then_some(false),
        mlp_bias: bias.then_some(false),
        norm: NormKind::RmsNorm,
        gated_mlp: true,
        num_kv_heads: (kv != heads).then_some(kv),
        head_dim: (!h.is_multiple_of(heads) || hd != h / heads).then_some(hd),
        rotary,
        rotary_dim,
        post_norms: true,
        fused_gate_up: true,
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", 13696)?)
    };
    let max_pos = c.size("max_position_embeddings", 131072)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("glm4", IGNORED_LLAMA_LIKE)?;
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![],
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false })),
        after_norm: vec![],
        head: head_for(class, "Glm4ForCausalLM", h, vocab, tied, false),
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}

/// `StableLmConfig` (transformers 5.24, `modeling_stablelm.py`): LayerNorms with biases, partial
/// rotary (`partial_rotary_factor`, default 0.25), q/k/v biases by `use_qkv_bias` (no `o_proj`
/// bias), the gated SiLU MLP without biases, `hidden_dropout` on the MLP's output only, and with
/// `use_parallel_residual` one `input_layernorm` feeding attention and MLP. Per-head q/k
/// LayerNorms (`qk_layernorm`: a LayerNorm per head, `num_heads × head_dim` weights) are refused.
pub(super) fn stablelm(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["StableLmForCausalLM", "StableLmModel"], "StableLmModel");
    let h = c.size("hidden_size", 2560)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv = c.size("num_key_value_heads", 32)?;
    divisible(h, heads)?;
    let n = layer_count(c, "num_hidden_layers", 32)?;
        if c.flag("qk_layernorm", false)? {
        return Err(Error::Import("field `qk_layernorm`: StableLM's per-head q/k LayerNorms (one per head) are not modelled".into()));
    }
    let vocab = c.size("vocab_size", 50304)?;
    let eps = c.float("layer_norm_eps", 1e-5)?;
    c.activation("hidden_act", FfnActivation::Silu)?;
    let (rotary, rotary_dim) = super::dense::rotary_dim(c, "partial_rotary_factor", 0.25, h / heads)?;
    let qkv_bias = c.flag("use_qkv_bias", false)?;
    let parallel = c.flag("use_parallel_residual", false)?;
    let layer = TransformerLayer {
        dropout: c.prob("hidden_dropout", 0.0)?,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        attn_out_dropout: Some(0.0),
        activation: FfnActivation::Silu,
        layer_norm_eps: eps,
        norm_first: true,
        bias: qkv_bias,
        out_bias: qkv_bias.then_some(false),
        mlp_bias: qkv_bias.then_some(false),
        norm_bias: (!qkv_bias).then_some(true),
        norm: NormKind::LayerNorm,
        gated_mlp: true,
        num_kv_heads: (kv != heads).then_some(kv),
        rotary,
        rotary_dim,
        parallel: parallel.then_some(crate::layer::transformer::ParallelNorms::Shared),
        attn_out_kept: !parallel,
        norm_out_kept: !parallel,
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", 6912)?)
    };
    let max_pos = c.size("max_position_embeddings", 4096)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("stablelm", IGNORED_LLAMA_LIKE)?;
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![],
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::LayerNorm(crate::layer::norm::LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true })),
        after_norm: vec![],
        head: head_for(class, "StableLmForCausalLM", h, vocab, tied, false),
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}

/// GPT-J's module names (`modeling_gptj.py`: `transformer.wte`, `transformer.h`, `transformer.ln_f`).
const GPTJ_MODULES: crate::import::decoder::DecoderModules =
    crate::import::decoder::DecoderModules { embed: "transformer.wte", layers: "transformer.h", norm: "transformer.ln_f", head: "lm_head" };

/// `GPTJConfig` (transformers 5.24, `modeling_gptj.py`): one biased `ln_1` feeding attention and
/// MLP in parallel, unbiased q/k/v/out projections, rotary on the first `rotary_dim` features of
/// each head (all when null), the `fc_in`/`fc_out` MLP with biases and `activation_function`,
/// `resid_pdrop` on both outputs, `embd_pdrop` after the embedding, `ln_f`, and an `lm_head` with a
/// bias (its weight tied only with `tie_word_embeddings`).
pub(super) fn gptj(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["GPTJForCausalLM", "GPTJModel"], "GPTJModel");
    let h = c.size("n_embd", 4096)?;
    let heads = c.size("n_head", 16)?;
    divisible(h, heads)?;
    let n = layer_count(c, "n_layer", 28)?;
    let hd = h / heads;
    let rotary_dim = match c.opt_int("rotary_dim")? {
        None => None,
        Some(r) if r == 0 || r > hd || !r.is_multiple_of(2) => {
            return Err(Error::Import(format!("field `rotary_dim` ({r}) must be even and at most the head size ({hd})")))
        }
        Some(r) => (r < hd).then_some(r),
    };
    let vocab = c.size("vocab_size", 50400)?;
    let eps = c.float("layer_norm_epsilon", 1e-5)?;
    let inner = match c.opt_int("n_inner")? {
        Some(0) => return Err(Error::Import("field `n_inner` must be at least 1".into())),
        Some(i) => i,
        None => h.saturating_mul(4),
    };
    let max_pos = c.size("n_positions", 2048)?;
    let layer = TransformerLayer {
        dropout: c.prob("resid_pdrop", 0.0)?,
        attention_dropout: Some(c.prob("attn_pdrop", 0.0)?),
        activation: c.activation("activation_function", FfnActivation::GeluNew)?,
        layer_norm_eps: eps,
        norm_first: true,
        bias: false,
        mlp_bias: Some(true),
        norm_bias: Some(true),
        norm: NormKind::LayerNorm,
        rotary: true,
        rotary_dim,
        parallel: Some(crate::layer::transformer::ParallelNorms::Shared),
        rotary_buffer: Some(max_pos.saturating_mul(rotary_dim.unwrap_or(hd))),
        ..presets::transformer_layer(h, heads, inner)
    };
    let embd = c.prob("embd_pdrop", 0.0)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("gptj", &[])?;
    let after_embed = if embd > 0.0 { vec![crate::import::fields::dropout(embd)?] } else { vec![] };
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed,
        layers: vec![layer; n as usize],
        final_norm: Some(Layer::LayerNorm(crate::layer::norm::LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true })),
        after_norm: vec![],
        head: head_for(class, "GPTJForCausalLM", h, vocab, tied, true),
        after_head: vec![],
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: GPTJ_MODULES,
    }
    .build())
}

/// `CohereConfig` (transformers 5.24, `modeling_cohere.py`, Command-R): one `input_layernorm`
/// (`CohereLayerNorm`: a LayerNorm without bias, written in fp32 ops) feeding attention and MLP in
/// parallel, biases by `attention_bias`, the gated SiLU MLP without biases, the head tied by
/// default and `logits * logit_scale` (a `scale` layer). The layers' norms are
/// [`NormKind::CohereLayerNorm`] op by op; the final `norm` is written as a biasless `layer_norm`
/// (the same parameters; two `[S, D]` fp32 copies fewer kept for backward: traced -1.9 % eager,
/// -2.2 % SDPA on a 3-layer config). `use_qk_norm` (per-head LayerNorms of `[heads, head_dim]`
/// weights) is refused.
pub(super) fn cohere(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    cohere_family(c, arch, false)
}

/// `Cohere2Config` (transformers 5.24, `modeling_cohere2.py`): Cohere's layers, `layer_types`
/// (by default three `sliding_attention` layers to one `full_attention`, `sliding_window_pattern`
/// 4) with `sliding_window` on the sliding ones; rotary only there (`Cohere2Attention` applies
/// it when the layer has a window), none on the full layers.
pub(super) fn cohere2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    cohere_family(c, arch, true)
}

fn cohere_family(c: &Fields, arch: Option<&str>, v2: bool) -> Result<ModelSpec> {
    let (lm, base, model_type) = if v2 { ("Cohere2ForCausalLM", "Cohere2Model", "cohere2") } else { ("CohereForCausalLM", "CohereModel", "cohere") };
    let (class, name) = pick(arch, &[lm, base], base);
    let h = c.size("hidden_size", 8192)?;
    let heads = c.size("num_attention_heads", 64)?;
    let kv = c.size("num_key_value_heads", heads)?;
    divisible(h, heads)?;
    let n = layer_count(c, "num_hidden_layers", 40)?;
        if c.flag("use_qk_norm", false)? {
        return Err(Error::Import("field `use_qk_norm`: Cohere's per-head q/k LayerNorms are not modelled".into()));
    }
    let vocab = c.size("vocab_size", 256000)?;
    let eps = c.float("layer_norm_eps", 1e-5)?;
    c.activation("hidden_act", FfnActivation::Silu)?;
    let bias = c.flag("attention_bias", false)?;
    let scale = match c.get("logit_scale") {
        None => 0.0625,
        Some(v) => v.as_f64().filter(|f| f.is_finite()).ok_or_else(|| Fields::wrong("logit_scale", "a number", v))?,
    };
    let layer = TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: FfnActivation::Silu,
        layer_norm_eps: eps,
        norm_first: true,
        bias,
        mlp_bias: bias.then_some(false),
        norm: NormKind::CohereLayerNorm,
        gated_mlp: true,
        num_kv_heads: (kv != heads).then_some(kv),
        rotary: true,
        // `getattr(config, "head_dim", hidden_size // num_attention_heads)` (Cohere2Config writes it)
        head_dim: c.opt_int("head_dim")?.filter(|&hd| hd != h / heads),
        parallel: Some(crate::layer::transformer::ParallelNorms::Shared),
        ..presets::transformer_layer(h, heads, c.size("intermediate_size", 22528)?)
    };
    let layers = if v2 {
        let window = c.opt_int("sliding_window")?.or(if c.0.contains_key("sliding_window") { None } else { Some(4096) });
        if window == Some(0) {
            return Err(Error::Import("field `sliding_window` must be at least 1".into()));
        }
        let pattern = c.size("sliding_window_pattern", 4)?;
        let sliding: Vec<bool> = match sliding_types(c, n)? {
            Some(s) => s,
            None => (0..n).map(|i| (i + 1) % pattern != 0).collect(),
        };
        // a `sliding_attention` layer without a window attends fully, and so gets no rotary either
        sliding.into_iter().map(|s| { let w = if s { window } else { None }; TransformerLayer { sliding_window: w, rotary: w.is_some(), ..layer.clone() } }).collect()
    } else {
        vec![layer; n as usize]
    };
    let max_pos = c.size("max_position_embeddings", 8192)?;
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown(model_type, IGNORED_LLAMA_LIKE)?;
    let head = head_for(class, lm, h, vocab, tied, false);
    let after_head = if head.is_some() { vec![Layer::Scale(Scale { factor: scale, rebinds_embeds: false })] } else { vec![] };
    Ok(Decoder {
        name,
        vocab,
        embed_dim: h,
        after_embed: vec![],
        layers,
        final_norm: Some(Layer::LayerNorm(crate::layer::norm::LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: false })),
        after_norm: vec![],
        head,
        after_head,
        seq_len: max_pos.min(MAX_DEFAULT_SEQ_LEN),
        modules: LLAMA_MODULES,
    }
    .build())
}

/// The LLaMA decoder layer (`LlamaDecoderLayer`: RMSNorm before attention and MLP, gated SiLU
/// MLP, `attention_bias` / `mlp_bias`, grouped K/V) that the LLaMA variants change field by field.
/// Rotary and the head size are the caller's.
pub(super) fn llama_layer(c: &Fields, (h, heads, kv): (u64, u64, u64), eps: f64, (attn_bias, mlp_bias): (bool, bool), intermediate: u64) -> Result<TransformerLayer> {
    Ok(TransformerLayer {
        dropout: 0.0,
        attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
        activation: FfnActivation::Silu,
        layer_norm_eps: eps,
        norm_first: true,
        bias: attn_bias,
        mlp_bias: (mlp_bias != attn_bias).then_some(mlp_bias),
        norm: NormKind::RmsNorm,
        gated_mlp: true,
        num_kv_heads: (kv != heads).then_some(kv),
        ..presets::transformer_layer(h, heads, intermediate)
    })
}
