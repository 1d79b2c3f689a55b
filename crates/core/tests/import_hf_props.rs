//! Random valid `config.json`s of every dense Hugging Face `model_type` (issue 12), the
//! encoder–decoders (`t5`, `whisper`) and `clip`: importing
//! never panics, and the parameter count equals a closed form written here per family from its
//! `modeling_<type>.py` (transformers 5), independently of the importer.

use proptest::prelude::*;
use serde_json::{json, Value};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::{Prepared, TrainConfig};

/// One random configuration: sizes and switches, interpreted per family.
#[derive(Debug, Clone)]
struct Cfg {
    family: &'static str,
    vocab: u64,
    heads: u64,
    /// K/V heads = heads / kv_div
    kv_div: u64,
    head_dim: u64,
    /// hidden = heads × head_dim × hidden_mult (families with an explicit head_dim may differ)
    hidden_mult: u64,
    inter: u64,
    layers: u64,
    tied: bool,
    bias: bool,
    flag: bool,
    base_model: bool,
    labels: u64,
    positions: u64,
}

const FAMILIES: &[&str] = &[
    "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi", "phi3", "gpt_neox", "falcon", "opt", "starcoder2",
    "roberta", "distilbert",
];

fn cfg() -> impl Strategy<Value = Cfg> {
    (
        prop::sample::select(FAMILIES.to_vec()),
        (8u64..2000, prop::sample::select(vec![1u64, 2, 4, 8]), prop::sample::select(vec![1u64, 2, 4]), prop::sample::select(vec![2u64, 4, 8, 16, 32])),
        // positions: the test runs at sequence length 4, and RoBERTa reserves two learned positions
        // for its padding offset, so at least 6 (fewer is a correct refusal, not a test case)
        (1u64..3, 1u64..300, 1u64..4, 1u64..6, 6u64..600),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(|(family, (vocab, heads, kv_div, head_dim), (hidden_mult, inter, layers, labels, positions), (tied, bias, flag, base_model))| Cfg {
            family,
            vocab,
            heads,
            kv_div: kv_div.min(heads),
            head_dim,
            hidden_mult,
            inter,
            layers,
            tied,
            bias,
            flag,
            base_model,
            labels,
            positions,
        })
}

impl Cfg {
    fn explicit_head_dim(&self) -> bool {
        matches!(self.family, "mistral" | "qwen3" | "gemma" | "gemma2" | "gemma3_text")
    }
    fn hidden(&self) -> u64 {
        self.heads * self.head_dim * if self.explicit_head_dim() { self.hidden_mult } else { 1 }
    }
    fn kv(&self) -> u64 {
        self.heads / self.kv_div
    }

    /// The config as a user would paste it.
    fn json(&self) -> Value {
        let (v, h, i, l) = (self.vocab, self.hidden(), self.inter, self.layers);
        let stem = match self.family {
            "mistral" => "Mistral", "qwen2" => "Qwen2", "qwen3" => "Qwen3", "gemma" => "Gemma", "gemma2" => "Gemma2",
            "gemma3_text" => "Gemma3", "phi" => "Phi", "phi3" => "Phi3", "gpt_neox" => "GPTNeoX", "falcon" => "Falcon",
            "opt" => "OPT", "starcoder2" => "Starcoder2", "roberta" => "Roberta", _ => "DistilBert",
        };
        let encoder = matches!(self.family, "roberta" | "distilbert");
        let arch = match (encoder, self.base_model) {
            (_, true) if self.family == "gemma3_text" => "Gemma3TextModel".to_string(),
            (_, true) => format!("{stem}Model"),
            (true, false) => format!("{stem}ForSequenceClassification"),
            (false, false) => format!("{stem}ForCausalLM"),
        };
        let mut c = json!({"model_type": self.family, "architectures": [arch], "vocab_size": v, "tie_word_embeddings": self.tied});
        let mut set = |k: &str, x: Value| c[k] = x;
        match self.family {
            "roberta" => {
                for (k, x) in [("hidden_size", h), ("num_attention_heads", self.heads), ("intermediate_size", i), ("num_hidden_layers", l),
                    ("max_position_embeddings", self.positions), ("num_labels", self.labels), ("type_vocab_size", self.kv_div)] {
                    set(k, json!(x));
                }
            }
            "distilbert" => {
                for (k, x) in [("dim", h), ("n_heads", self.heads), ("hidden_dim", i), ("n_layers", l), ("max_position_embeddings", self.positions),
                    ("num_labels", self.labels)] {
                    set(k, json!(x));
                }
            }
            _ => {
                for (k, x) in [("hidden_size", h), ("num_attention_heads", self.heads), ("num_hidden_layers", l)] {
                    set(k, json!(x));
                }
                match self.family {
                    "opt" => {
                        set("ffn_dim", json!(i));
                        set("enable_bias", json!(self.bias));
                        set("do_layer_norm_before", json!(self.flag));
                        set("max_position_embeddings", json!(self.positions));
                        set("word_embed_proj_dim", json!(if self.hidden_mult == 2 { h / 2 } else { h }));
                    }
                    "falcon" => {
                        set("ffn_hidden_size", json!(i));
                        set("bias", json!(self.bias));
                        set("num_kv_heads", json!(self.kv()));
                        // new architecture (grouped K/V, two norms) or multi-query, parallel or not
                        set("new_decoder_architecture", json!(self.flag));
                        set("parallel_attn", json!(self.flag || self.hidden_mult == 1));
                    }
                    "gpt_neox" => {
                        set("intermediate_size", json!(i));
                        set("attention_bias", json!(self.bias));
                        set("use_parallel_residual", json!(self.flag));
                        set("rotary_pct", json!(if self.head_dim >= 8 { 0.25 } else { 1.0 }));
                    }
                    "phi" => {
                        set("intermediate_size", json!(i));
                        set("num_key_value_heads", json!(self.kv()));
                        set("qk_layernorm", json!(self.flag));
                        set("partial_rotary_factor", json!(if self.head_dim >= 4 { 0.5 } else { 1.0 }));
                    }
                    _ => {
                        set("intermediate_size", json!(i));
                        set("num_key_value_heads", json!(self.kv()));
                        if self.explicit_head_dim() {
                            set("head_dim", json!(self.head_dim));
                        }
                        match self.family {
                            "qwen3" | "gemma" | "gemma2" | "gemma3_text" => set("attention_bias", json!(self.bias)),
                            "starcoder2" => set("use_bias", json!(self.bias)),
                            "qwen2" => set("use_sliding_window", json!(self.flag)),
                            "mistral" | "phi3" => set("sliding_window", json!(if self.flag { json!(64) } else { Value::Null })),
                            _ => {}
                        }
                    }
                }
            }
        }
        c
    }

    /// `sum(p.numel() for p in model.parameters())`, from each family's modeling code.
    fn params(&self) -> u64 {
        let (v, h, i, l, hd) = (self.vocab, self.hidden(), self.inter, self.layers, self.head_dim);
        let (nh, kv) = (self.heads, self.kv());
        let b = |on: bool, n: u64| if on { n } else { 0 };
        let lm = !self.base_model;
        // an lm_head of `inp × v`, tied or not, with an optional bias
        let head = |inp: u64, bias: bool| if lm { b(!self.tied, inp * v) + b(bias, v) } else { 0 };
        let ln = 2 * h;
        match self.family {
            "mistral" | "qwen2" | "qwen3" | "gemma" | "gemma2" | "gemma3_text" | "phi3" => {
                let (q, kvd) = (nh * hd, kv * hd);
                let attn_bias = match self.family {
                    "qwen2" => q + 2 * kvd,
                    "qwen3" | "gemma" | "gemma2" | "gemma3_text" => b(self.bias, q + 2 * kvd + h),
                    _ => 0,
                };
                let norms = match self.family {
                    "gemma2" => 4 * h,
                    "gemma3_text" => 4 * h + 2 * hd,
                    "qwen3" => 2 * h + 2 * hd,
                    _ => 2 * h,
                };
                let layer = h * q + 2 * h * kvd + q * h + attn_bias + 3 * h * i + norms;
                v * h + l * layer + h + head(h, false)
            }
            "phi" => {
                let layer = 4 * (h * h + h) - 2 * (h * h + h) + 2 * (h * kv * hd + kv * hd) + (h * i + i) + (i * h + h) + ln + b(self.flag, 4 * hd);
                v * h + l * layer + ln + head(h, true)
            }
            "gpt_neox" => {
                let layer = 4 * h * h + b(self.bias, 4 * h) + 2 * h * i + i + h + 2 * ln;
                v * h + l * layer + ln + head(h, false)
            }
            "falcon" => {
                let (kv, norms) = match (self.flag, self.hidden_mult == 1) {
                    (true, _) => (kv, 2 * ln),
                    (false, true) => (1, ln),
                    (false, false) => (1, 2 * ln),
                };
                let qkv = (nh + 2 * kv) * hd;
                let layer = h * qkv + b(self.bias, qkv) + h * h + b(self.bias, h) + 2 * h * i + b(self.bias, i + h) + norms;
                v * h + l * layer + ln + head(h, false)
            }
            "opt" => {
                let p = if self.hidden_mult == 2 { h / 2 } else { h };
                let proj = if p != h { 2 * p * h } else { 0 };
                let layer = 4 * h * h + b(self.bias, 4 * h) + 2 * h * i + b(self.bias, i + h) + 2 * ln;
                v * p + (self.positions + 2) * h + proj + l * layer + b(self.flag, ln) + head(p, false)
            }
            "starcoder2" => {
                let layer = 2 * h * h + 2 * h * kv * hd + b(self.bias, 2 * h + 2 * kv * hd) + 2 * h * i + b(self.bias, i + h) + 2 * ln;
                v * h + l * layer + ln + head(h, false)
            }
            _ => {
                let layer = 4 * (h * h + h) + 2 * h * i + i + h + 2 * ln;
                let emb = if self.family == "roberta" { v * h + self.positions * h + self.kv_div * h + ln } else { v * h + self.positions * h + ln };
                let top = match (self.base_model, self.family) {
                    (true, "roberta") => h * h + h,
                    (true, _) => 0,
                    (false, _) => h * h + h + h * self.labels + self.labels,
                };
                emb + l * layer + top
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_configs_have_closed_form_counts(c in cfg()) {
        let text = c.json().to_string();
        let spec = from_config_json(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let p = Prepared::new(&spec, &TrainConfig { batch: 1, seq_len: Some(4), ..TrainConfig::default() })
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(p.estimate().params, c.params(), "{}", text);
    }
}

/// A field value from tiny to absurd, of any JSON type.
fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(vec![0u64, 1, 2, 3, 4, 7, 8, 16, 64, 100, 1000, 1 << 20, 1 << 40, u64::MAX]).prop_map(|n| json!(n)),
        1 => prop::sample::select(vec![-1.0f64, 0.0, 0.25, 0.5, 1.0, 1.5, 1e300]).prop_map(|f| json!(f)),
        1 => any::<bool>().prop_map(|b| json!(b)),
        1 => Just(Value::Null),
        1 => prop::sample::select(vec!["silu", "gelu", "mish", "sliding_attention", ""]).prop_map(|s| json!(s)),
        1 => Just(json!(["sliding_attention", "full_attention"])),
        1 => Just(json!({"partial_rotary_factor": 0.5})),
        1 => Just(json!({"hidden_size": 0, "image_size": 1, "patch_size": 4, "num_hidden_layers": 1})),
    ]
}

const ODD_KEYS: &[&str] = &[
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "sliding_window", "layer_types", "use_sliding_window", "max_window_layers", "attention_bias",
    "tie_word_embeddings", "hidden_act", "hidden_activation", "rope_parameters", "partial_rotary_factor", "rotary_pct",
    "qk_layernorm", "use_parallel_residual", "new_decoder_architecture", "multi_query", "parallel_attn", "num_kv_heads",
    "num_ln_in_parallel_attn", "ffn_hidden_size", "bias", "word_embed_proj_dim", "do_layer_norm_before", "ffn_dim",
    "max_position_embeddings", "final_logit_softcapping", "attn_logit_softcapping", "dim", "n_heads", "n_layers",
    "hidden_dim", "num_labels", "type_vocab_size", "dropout", "attention_dropout", "resid_pdrop", "use_bias",
    "d_model", "d_kv", "d_ff", "num_heads", "num_layers", "num_decoder_layers", "feed_forward_proj",
    "relative_attention_num_buckets", "dropout_rate", "encoder_layers", "decoder_layers", "encoder_attention_heads",
    "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_source_positions", "max_target_positions",
    "num_mel_bins", "activation_function", "scale_embedding", "projection_dim", "text_config", "vision_config",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any mix of the families' fields with odd values: an error or a model, never a panic.
    #[test]
    fn odd_configs_never_panic(
        family in prop::sample::select([FAMILIES, &["t5", "whisper", "clip"]].concat()),
        fields in prop::collection::vec((prop::sample::select(ODD_KEYS.to_vec()), odd_value()), 0..8),
        head in any::<bool>(),
    ) {
        let mut c = json!({"model_type": family});
        if head {
            c["architectures"] = json!(["X"]);
        }
        for (k, v) in fields {
            c[k] = v;
        }
        if let Ok(spec) = from_config_json(&c.to_string()) {
            let _ = Prepared::new(&spec, &TrainConfig { batch: 1, seq_len: Some(4), ..TrainConfig::default() }).map(|p| p.estimate());
        }
    }
}

/// A random encoder–decoder config: `t5` (ReLU, GELU or gated-GELU, tied or not, any `d_kv`,
/// decoder depth and buckets; conditional generation, bare or encoder-only) or `whisper`
/// (mel bins, source and target positions, heads per stack, FFN widths).
#[derive(Debug, Clone)]
struct Seq2seq {
    whisper: bool,
    vocab: u64,
    d_unit: u64,
    heads: (u64, u64),
    dkv: u64,
    ff: (u64, u64),
    layers: (u64, u64),
    buckets: u64,
    positions: (u64, u64),
    mels: u64,
    act: &'static str,
    tied: bool,
    class: usize,
}

fn seq2seq() -> impl Strategy<Value = Seq2seq> {
    (
        (any::<bool>(), 8u64..3000, 1u64..40, prop::sample::select(vec![1u64, 2, 4, 8]), prop::sample::select(vec![1u64, 2, 4])),
        (prop::sample::select(vec![4u64, 8, 16, 64]), 1u64..300, 1u64..300, 1u64..4, 1u64..4),
        (prop::sample::select(vec![8u64, 32, 64]), 2u64..1500, 2u64..448, prop::sample::select(vec![80u64, 128])),
        (prop::sample::select(vec!["relu", "gelu", "gated-gelu"]), any::<bool>(), 0usize..3),
    )
        .prop_map(|((whisper, vocab, d_unit, h1, h2), (dkv, f1, f2, l1, l2), (buckets, s, t, mels), (act, tied, class))| Seq2seq {
            whisper,
            vocab,
            d_unit,
            heads: (h1, (h1 / h2).max(1)),
            dkv,
            ff: (f1, f2),
            layers: (l1, l2),
            buckets,
            positions: (s, t),
            mels,
            act,
            tied,
            class,
        })
}

impl Seq2seq {
    fn d(&self) -> u64 {
        self.heads.0 * self.d_unit
    }

    fn arch(&self) -> &'static str {
        match (self.whisper, self.class) {
            (true, 0) => "WhisperForConditionalGeneration",
            (true, _) => "WhisperModel",
            (false, 0) => "T5ForConditionalGeneration",
            (false, 1) => "T5Model",
            (false, _) => "T5EncoderModel",
        }
    }

    fn json(&self) -> Value {
        let d = self.d();
        if self.whisper {
            json!({"model_type": "whisper", "architectures": [self.arch()], "vocab_size": self.vocab, "d_model": d,
                "encoder_attention_heads": self.heads.0, "decoder_attention_heads": self.heads.1, "encoder_ffn_dim": self.ff.0,
                "decoder_ffn_dim": self.ff.1, "encoder_layers": self.layers.0, "decoder_layers": self.layers.1,
                "max_source_positions": self.positions.0, "max_target_positions": self.positions.1, "num_mel_bins": self.mels})
        } else {
            json!({"model_type": "t5", "architectures": [self.arch()], "vocab_size": self.vocab, "d_model": d, "num_heads": self.heads.0,
                "d_kv": self.dkv, "d_ff": self.ff.0, "num_layers": self.layers.0, "num_decoder_layers": self.layers.1,
                "relative_attention_num_buckets": self.buckets, "feed_forward_proj": self.act, "tie_word_embeddings": self.tied})
        }
    }

    /// `sum(p.numel() for p in model.parameters())` from `modeling_t5.py` / `modeling_whisper.py`.
    fn params(&self) -> u64 {
        let (d, v) = (self.d(), self.vocab);
        if self.whisper {
            let (ln, attn) = (2 * d, 4 * d * d + 3 * d);
            let ffn = |f: u64| 2 * d * f + f + d;
            let front = self.mels * d * 3 + d + d * d * 3 + d + self.positions.0 * d;
            let enc = front + self.layers.0 * (attn + 2 * ln + ffn(self.ff.0)) + ln;
            // `proj_out` is tied to the decoder's token embedding
            let dec = v * d + self.positions.1 * d + self.layers.1 * (2 * attn + 3 * ln + ffn(self.ff.1)) + ln;
            enc + dec
        } else {
            let inner = self.heads.0 * self.dkv;
            let ffn = if self.act == "gated-gelu" { 3 * d * self.ff.0 } else { 2 * d * self.ff.0 };
            let bias = self.buckets * self.heads.0;
            let enc = bias + self.layers.0 * (4 * d * inner + ffn + 2 * d) + d;
            let dec = bias + self.layers.1 * (8 * d * inner + ffn + 3 * d) + d;
            // the LM head is always `shared` in transformers 5.24
            v * d + enc + if self.class < 2 { dec } else { 0 }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_encoder_decoders_have_closed_form_counts(c in seq2seq()) {
        let text = c.json().to_string();
        let spec = from_config_json(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(spec.name.as_deref(), Some(c.arch()));
        let p = Prepared::new(&spec, &TrainConfig { batch: 1, seq_len: Some(4), ..TrainConfig::default() })
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(p.estimate().params, c.params(), "{}", text);
    }
}

/// One transformer layer of CLIP (`CLIPEncoderLayer`): biased Q/K/V/out, two LayerNorms, MLP.
fn clip_layer(h: u64, i: u64) -> u64 {
    4 * h * h + 4 * h + 4 * h + 2 * h * i + i + h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// CLIP's two towers (`modeling_clip.py`): vision `c·h·p²` patch conv, class token,
    /// `(g² + 1)` positions, pre/post LayerNorms and layers; text token and position embeddings,
    /// layers and final LayerNorm; two projections without bias and `logit_scale`.
    #[test]
    fn random_clip_configs_have_closed_form_counts(
        (hv, ht) in (prop::sample::select(vec![1u64, 2, 4]), prop::sample::select(vec![1u64, 2, 4])),
        unit in 1u64..40, (iv, it) in (1u64..300, 1u64..300), (lv, lt) in (1u64..4, 1u64..4),
        patch in prop::sample::select(vec![2u64, 4, 8, 16]), grid in 1u64..8, channels in prop::sample::select(vec![1u64, 3]),
        vocab in 8u64..3000, positions in 1u64..100, proj in 1u64..300, act in prop::sample::select(vec!["quick_gelu", "gelu"]),
    ) {
        let (dv, dt) = (hv * unit, ht * unit * 2);
        let c = json!({"model_type": "clip", "architectures": ["CLIPModel"], "projection_dim": proj,
            "vision_config": {"hidden_size": dv, "num_attention_heads": hv, "intermediate_size": iv, "num_hidden_layers": lv,
                "image_size": patch * grid, "patch_size": patch, "num_channels": channels, "hidden_act": act},
            "text_config": {"hidden_size": dt, "num_attention_heads": ht, "intermediate_size": it, "num_hidden_layers": lt,
                "vocab_size": vocab, "max_position_embeddings": positions, "hidden_act": act}});
        let text = c.to_string();
        let spec = from_config_json(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let p = Prepared::new(&spec, &TrainConfig { batch: 1, ..TrainConfig::default() })
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let vision = channels * dv * patch * patch + dv + (grid * grid + 1) * dv + 2 * dv + lv * clip_layer(dv, iv) + 2 * dv;
        let text_tower = vocab * dt + positions * dt + lt * clip_layer(dt, it) + 2 * dt;
        prop_assert_eq!(p.estimate().params, vision + text_tower + (dv + dt) * proj + 1, "{}", text);
    }
}
