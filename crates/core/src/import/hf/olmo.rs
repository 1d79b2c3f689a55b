//! `olmo2` and `exaone4` (below): OLMo 2 (`modeling_olmo2.py`, transformers 5.24), LLaMA's parts in another order — no
//! norm before attention or MLP, an RMSNorm on each one's output before its residual add
//! (`post_attention_layernorm`, `post_feedforward_layernorm`), and `q_norm`/`k_norm` over the
//! whole Q and K projections (`qk_norm_full`). Each layer is written as two `residual` blocks
//! (`[attention, rms_norm]`, `[gated_mlp, rms_norm]`) in one `repeat`.

use crate::error::{Error, Result};
use crate::import::decoder::{LLAMA_MODULES, MAX_DEFAULT_SEQ_LEN};
use crate::import::fields::{pick, Fields};
use crate::layer::attention::MultiheadAttention;
use crate::layer::embedding::Embedding;
use crate::layer::linear::{GatedMlp, Linear};
use crate::layer::norm::RmsNorm;
use crate::layer::transformer::FfnActivation;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};

/// `Olmo2Config` (transformers): defaults are OLMo-2's 7B shape.
pub(super) fn olmo2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["Olmo2ForCausalLM", "Olmo2Model"], "Olmo2Model");
    let h = c.size("hidden_size", 4096)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv = c.size("num_key_value_heads", heads)?;
    super::dense::divisible(h, heads)?;
    let n = super::dense::layer_count(c, "num_hidden_layers", 32)?;
        let vocab = c.size("vocab_size", 50304)?;
    let eps = c.float("rms_norm_eps", 1e-5)?;
    c.activation("hidden_act", FfnActivation::Silu)?;
    let bias = c.flag("attention_bias", false)?;
    let norm = || Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false });
    let attn = Layer::MultiheadAttention(MultiheadAttention {
        embed_dim: h,
        num_heads: heads,
        num_kv_heads: (kv != heads).then_some(kv),
        dropout: c.prob("attention_dropout", 0.0)?,
        bias,
        causal: true,
        rotary: true,
        fused_qkv: false,
        out_bias: None,
        qk_norm: None,
        head_dim: None,
        rotary_dim: None,
        sliding_window: None,
        logit_softcap: None,
        key_bias: None,
        position_bias: false,
        contiguous_heads: false,
        sinks: false,
        qk_norm_full: true,
        attention_chunk: None,
        output_gate: false,
        eager_only: false,
        rotary_local: false,
        windows: None,
    });
    let mlp = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", 11008)?, bias: false, gelu_new_dropout: None });
    let res = |l: Layer| Layer::Residual { body: vec![l, norm()], shortcut: None, inplace: false };
    let max_pos = c.size("max_position_embeddings", 2048)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("olmo2", &["pretraining_tp"])?;
    let lm = class == "Olmo2ForCausalLM";
    let mut layers = vec![
        Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: h, padding_idx: None, tied_weight: false }),
        Layer::Repeat { times: n, body: vec![res(attn), res(mlp)] },
        norm(),
    ];
    if lm {
        layers.push(Layer::Linear(Linear { in_features: h, out_features: vocab, bias: false, tied_weight: tied }));
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![max_pos.min(MAX_DEFAULT_SEQ_LEN)], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers,
        loss: Loss::CrossEntropy,
        names: LLAMA_MODULES.names(1..2, Some(2), lm.then_some(3)),
        unquantised: None,
    })
}

/// `Exaone4Config` (transformers 5.24, `modeling_exaone4.py`): OLMo 2's post-norm layout
/// (`post_attention_layernorm`, `post_feedforward_layernorm`, no norm before either), GQA with
/// per-head `q_norm`/`k_norm` (`head_dim` RMSNorms), no biases; `layer_types` (by default
/// `sliding_attention` but every `sliding_window_pattern`-th layer) with `sliding_window` on the
/// sliding layers and rotary only on them (on every layer when `sliding_window` is null).
pub(super) fn exaone4(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    use crate::layer::norm::NormKind;
    use serde_json::Value;
    let (class, name) = pick(arch, &["Exaone4ForCausalLM", "Exaone4Model"], "Exaone4Model");
    let h = c.size("hidden_size", 4096)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv = c.size("num_key_value_heads", 32)?;
    let hd = match c.opt_int("head_dim")? {
        Some(0) => return Err(Error::Import("field `head_dim` must be at least 1".into())),
        Some(hd) => hd,
        None if h.is_multiple_of(heads) => h / heads,
        None => return Err(Error::Import(format!("hidden_size ({h}) must be divisible by num_attention_heads ({heads})"))),
    };
    let n = super::dense::layer_count(c, "num_hidden_layers", 32)?;
        let vocab = c.size("vocab_size", 102400)?;
    let eps = c.float("rms_norm_eps", 1e-5)?;
    c.activation("hidden_act", FfnActivation::Silu)?;
    let window = if c.0.get("sliding_window").is_some_and(Value::is_null) { None } else { Some(c.size("sliding_window", 4096)?) };
    // the pattern only derives `layer_types` when they are absent
    let pattern_given = c.get("sliding_window_pattern").cloned();
    let sliding: Vec<bool> = match super::llama_variants::sliding_types(c, n)? {
        Some(s) => s,
        None => {
            // `(i + 1) % sliding_window_pattern`; a null window sets the pattern to 0, which
            // `Exaone4Config.__post_init__` cannot divide by
            let pattern = match (window, pattern_given.as_ref()) {
                (None, _) => return Err(Error::Import("field `sliding_window`: null needs `layer_types` (Exaone4Config divides by a pattern of 0)".into())),
                (_, None) => 4,
                (_, Some(v)) => crate::import::fields::as_int(v).filter(|&p| p > 0).ok_or_else(|| crate::import::fields::Fields::wrong("sliding_window_pattern", "a positive integer", v))?,
            };
            (0..n).map(|i| (i + 1) % pattern != 0).collect()
        }
    };
    let norm = || Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false });
    let dropout = c.prob("attention_dropout", 0.0)?;
    let attn = |slide: bool| {
        Layer::MultiheadAttention(MultiheadAttention {
            embed_dim: h,
            num_heads: heads,
            num_kv_heads: (kv != heads).then_some(kv),
            dropout,
            bias: false,
            causal: true,
            rotary: window.is_none() || slide,
            fused_qkv: false,
            out_bias: None,
            qk_norm: Some(NormKind::RmsNorm),
            head_dim: (hd.checked_mul(heads) != Some(h)).then_some(hd),
            rotary_dim: None,
            sliding_window: if slide { window } else { None },
            logit_softcap: None,
            key_bias: None,
            position_bias: false,
            contiguous_heads: false,
            sinks: false,
            qk_norm_full: false,
            attention_chunk: None,
            output_gate: false,
            eager_only: false,
            rotary_local: false,
            windows: None,
        })
    };
    let mlp = Layer::GatedMlp(GatedMlp { hidden_size: h, intermediate_size: c.size("intermediate_size", 16384)?, bias: false, gelu_new_dropout: None });
    let res = |l: Layer| Layer::Residual { body: vec![l, norm()], shortcut: None, inplace: false };
    let max_pos = c.size("max_position_embeddings", 2048)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("exaone4", &[])?;
    let lm = class == "Exaone4ForCausalLM";
    // runs of equal layers, one `repeat` each
    let mut runs: Vec<(u64, bool)> = Vec::new();
    for s in sliding {
        match runs.last_mut() {
            Some((k, last)) if *last == s => *k += 1,
            _ => runs.push((1, s)),
        }
    }
    let mut layers = vec![Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: h, padding_idx: None, tied_weight: false })];
    let first = layers.len();
    layers.extend(runs.into_iter().map(|(times, s)| Layer::Repeat { times, body: vec![res(attn(s)), res(mlp.clone())] }));
    let last = layers.len();
    layers.push(norm());
    if lm {
        layers.push(Layer::Linear(Linear { in_features: h, out_features: vocab, bias: false, tied_weight: tied }));
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![max_pos.min(MAX_DEFAULT_SEQ_LEN)], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers,
        loss: Loss::CrossEntropy,
        names: LLAMA_MODULES.names(first..last, Some(last), lm.then_some(last + 1)),
        unquantised: None,
    })
}
