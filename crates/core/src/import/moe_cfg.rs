//! What the mixture-of-experts importers share (`hf_moe.rs`, `moe_families.rs`): a config read
//! field by field ([`Cfg`]), the config classes' defaults, one decoder layer's parts and the head
//! size rule. Below both.

use crate::error::{Error, Result};
use crate::spec::Layer;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The mixture-of-experts families' own fields with no effect on parameters or memory (router
/// loss switches and weights, read by the loss only); the generic ones every importer accepts are
/// [`super::generic::GENERIC_FIELDS`].
pub(super) const INERT: &[&str] = &["output_router_logits", "router_aux_loss_coef", "hidden_act", "rms_norm_eps", "attention_dropout", "tie_word_embeddings"];

/// The config class defaults transformers fills in for an absent field.
pub(super) struct Defaults {
    pub(super) hidden: u64,
    pub(super) vocab: u64,
    pub(super) layers: u64,
    pub(super) heads: u64,
    pub(super) kv_heads: u64,
    pub(super) intermediate: u64,
    pub(super) eps: f64,
    pub(super) max_pos: u64,
}

impl Defaults {
    pub(super) fn of(model_type: &str) -> Defaults {
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
            // GraniteMoeConfig()
            "granitemoe" => Defaults { hidden: 4096, vocab: 32000, layers: 32, heads: 32, kv_heads: 32, intermediate: 11008, eps: 1e-6, max_pos: 2048 },
            // PhimoeConfig()
            "phimoe" => Defaults { hidden: 4096, vocab: 32064, layers: 32, heads: 32, kv_heads: 8, intermediate: 6400, eps: 1e-5, max_pos: 131072 },
            // OlmoeConfig()
            "olmoe" => Defaults { hidden: 2048, vocab: 50304, layers: 16, heads: 16, kv_heads: 16, intermediate: 2048, eps: 1e-5, max_pos: 4096 },
            // Qwen3NextConfig()
            "qwen3_next" => Defaults { hidden: 2048, vocab: 151936, layers: 48, heads: 16, kv_heads: 2, intermediate: 5632, eps: 1e-6, max_pos: 32768 },
            // Llama4TextConfig()
            "llama4_text" => Defaults { hidden: 5120, vocab: 202048, layers: 48, heads: 40, kv_heads: 8, intermediate: 8192, eps: 1e-5, max_pos: 131072 },
            // JambaConfig()
            "jamba" => Defaults { hidden: 4096, vocab: 65536, layers: 32, heads: 32, kv_heads: 8, intermediate: 14336, eps: 1e-6, max_pos: 262144 },
            // BambaConfig()
            "bamba" => Defaults { hidden: 4096, vocab: 128000, layers: 32, heads: 32, kv_heads: 8, intermediate: 14336, eps: 1e-5, max_pos: 262144 },
            // FalconH1Config()
            "falcon_h1" => Defaults { hidden: 4096, vocab: 128000, layers: 32, heads: 32, kv_heads: 8, intermediate: 14336, eps: 1e-5, max_pos: 8192 },
            // MiniMaxConfig()
            "minimax" => Defaults { hidden: 4096, vocab: 32000, layers: 32, heads: 32, kv_heads: 8, intermediate: 14336, eps: 1e-5, max_pos: 131072 },
            // Ernie4_5_MoeConfig()
            "ernie4_5_moe" => Defaults { hidden: 2560, vocab: 103424, layers: 28, heads: 20, kv_heads: 4, intermediate: 12288, eps: 1e-5, max_pos: 131072 },
            // DeepseekV2Config()
            "deepseek_v2" => Defaults { hidden: 4096, vocab: 102400, layers: 32, heads: 32, kv_heads: 32, intermediate: 11008, eps: 1e-6, max_pos: 2048 },
            // DeepseekV3Config()
            _ => Defaults { hidden: 7168, vocab: 129280, layers: 61, heads: 128, kv_heads: 128, intermediate: 18432, eps: 1e-6, max_pos: 4096 },
        }
    }
}

/// One decoder layer as `(attention, feed-forward)`, each to be wrapped in `residual(norm, …)`.
pub(super) type Block = (Layer, Layer);

/// `head_dim` when it differs from `hidden_size / num_attention_heads` (the attention's own
/// default); an error when neither gives a size.
pub(super) fn head_dim(c: &Cfg, h: u64, heads: u64) -> Result<Option<u64>> {
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

/// Grouped-query causal attention with rotary over every head, biases by `bias` on all four
/// projections, `head_dim` kept only where it differs from `h / heads` (callers set what differs).
pub(super) fn gqa_attention(h: u64, heads: u64, kv: u64, hd: u64, bias: bool) -> crate::layer::attention::MultiheadAttention {
    crate::layer::attention::MultiheadAttention {
        embed_dim: h,
        num_heads: heads,
        num_kv_heads: (kv != heads).then_some(kv),
        dropout: 0.0,
        bias,
        causal: true,
        rotary: true,
        fused_qkv: false,
        head_dim: (Some(hd) != h.checked_div(heads).filter(|_| h.is_multiple_of(heads))).then_some(hd),
        out_bias: None,
        rotary_dim: None,
        qk_norm: None,
        sliding_window: None,
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
    }
}

/// A config object read field by field, remembering which fields were read.
pub(super) struct Cfg<'a> {
    pub(super) map: &'a Map<String, Value>,
    pub(super) seen: RefCell<BTreeSet<&'a str>>,
}

impl<'a> Cfg<'a> {
    /// The field (marked as read), or `None` when absent or `null` (the class default).
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.map.get_key_value(key)?;
        self.seen.borrow_mut().insert(k.as_str());
        Some(v).filter(|v| !v.is_null())
    }

    /// Marks fields as understood without reading them.
    pub(super) fn ignore(&self, keys: &[&str]) {
        for key in keys {
            self.get(key);
        }
    }

    pub(super) fn wrong(key: &str, want: &str, got: &Value) -> Error {
        let shown: String = got.to_string().chars().take(40).collect();
        Error::Import(format!("field `{key}` must be {want}, got {shown}"))
    }

    pub(super) fn opt_int(&self, key: &str) -> Result<Option<u64>> {
        self.get(key).map(|v| as_int(v).ok_or_else(|| Self::wrong(key, "a non-negative integer", v))).transpose()
    }

    pub(super) fn int(&self, key: &str, default: u64) -> Result<u64> {
        Ok(self.opt_int(key)?.unwrap_or(default))
    }

    pub(super) fn size(&self, key: &str, default: u64) -> Result<u64> {
        match self.int(key, default)? {
            0 => Err(Error::Import(format!("field `{key}` must be at least 1"))),
            v => Ok(v),
        }
    }

    pub(super) fn float(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).ok_or_else(|| Self::wrong(key, "a non-negative number", v)),
        }
    }

    pub(super) fn prob(&self, key: &str, default: f64) -> Result<f64> {
        let p = self.float(key, default)?;
        if p > 1.0 {
            return Err(Error::Import(format!("field `{key}` must be a probability between 0 and 1, got {p}")));
        }
        Ok(p)
    }

    pub(super) fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| Self::wrong(key, "true or false", v)),
        }
    }

    pub(super) fn str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key).map(|v| v.as_str().ok_or_else(|| Self::wrong(key, "a string", v))).transpose()
    }

    pub(super) fn int_list(&self, key: &str) -> Result<Vec<u64>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a.iter().map(|v| as_int(v).ok_or_else(|| Self::wrong(key, "a list of layer indices", v))).collect(),
            Some(v) => Err(Self::wrong(key, "a list of layer indices", v)),
        }
    }

    /// Refuses the first field that was neither read nor known to be inert (`null`s are
    /// defaults; generic fields: [`super::generic::is_inert`]).
    pub(super) fn finish(&self, model_type: &str) -> Result<()> {
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
pub(super) fn as_int(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19).map(|f| f as u64))
}
