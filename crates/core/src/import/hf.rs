//! Hugging Face `config.json` → spec, for the BERT, GPT-2, LLaMA and ViT families.
//!
//! The class named first in `architectures` is built when it is supported; otherwise (or when
//! `architectures` is absent) the family's base model (`BertModel`, `GPT2Model`, `LlamaModel`,
//! `ViTModel`), and the spec's `name` says so. Every field a config omits (or sets to `null`) takes
//! the default of transformers' config class (`BertConfig`, `GPT2Config`, `LlamaConfig`,
//! `ViTConfig`), as `from_pretrained` would. A field of the wrong type, an unsupported
//! `model_type`, or a setting the spec cannot express exactly is an [`Error::Import`] naming it.
//!
//! | family | built as |
//! |---|---|
//! | `bert` | [`presets::bert`] from a [`BertConfig`] (post-norm, pooler; classifier head for `BertForSequenceClassification`) |
//! | `gpt2` | [`presets::gpt2`] (pre-norm causal layers, fused `c_attn`, tied `lm_head`) |
//! | `llama` | RMSNorm, SwiGLU `gated_mlp`, rotary, grouped-query `num_kv_heads`, untied `lm_head` unless `tie_word_embeddings` |
//! | `vit` | patch conv (k = s = `patch_size`), flatten + transpose, `cls_token`, positions, pre-norm layers, final LayerNorm, `[CLS]` head |
//!
//! Other families have their own files: `hf/dense.rs` (decoders), `hf/encoders.rs` (RoBERTa,
//! DistilBERT), `hf/seq2seq.rs` (T5, Whisper), `hf/clip.rs` (CLIP), and `hf_moe.rs`.
//!
//! Sequence length of token models: BERT 128 (as the preset), decoders their context length
//! capped at [`MAX_DEFAULT_SEQ_LEN`]; the estimate's `seq_len` overrides it.

use crate::error::{Error, Result};
use crate::layer::attention::{FfnActivation, NormKind, TransformerLayer};
use crate::layer::embedding::{ClsToken, Embedding, PositionalEmbedding};
use crate::layer::linear::Linear;
use crate::layer::norm::{LayerNorm, RmsNorm};
use crate::presets::{self, BertConfig, Gpt2Config};
use crate::layer::args::Pair;
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::{json, Map, Value};

mod dense;
mod clip;
mod encoders;
mod seq2seq;

pub use seq2seq::{T5_SOURCE_LEN, T5_TARGET_LEN};

/// `PretrainedConfig` fields (and generation, tokenizer and hub bookkeeping) that change neither
/// parameters nor training memory; accepted by every family that refuses unknown fields.
const GENERIC_FIELDS: &[&str] = &[
    "_name_or_path", "_commit_hash", "_attn_implementation", "_attn_implementation_autoset", "architectures",
    "model_type", "transformers_version", "torch_dtype", "dtype", "use_bfloat16", "torchscript", "return_dict",
    "output_hidden_states", "output_attentions", "output_scores", "return_dict_in_generate", "use_cache",
    "initializer_range", "init_std", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "cls_token_id",
    "decoder_start_token_id", "forced_bos_token_id", "forced_eos_token_id", "id2label", "label2id", "num_labels",
    "problem_type", "finetuning_task", "tokenizer_class", "prefix", "task_specific_params", "auto_map",
    "custom_pipelines", "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "chunk_size_feed_forward", "pruned_heads", "tf_legacy_loss", "is_encoder_decoder", "is_decoder",
    "add_cross_attention", "tie_encoder_decoder", "cross_attention_hidden_size", "gradient_checkpointing",
    "rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings", "use_return_dict",
];

/// Default sequence length of imported decoders: their context, at most this.
pub const MAX_DEFAULT_SEQ_LEN: u64 = 4096;

/// The `model_type`s this importer understands.
pub const MODEL_TYPES: &[&str] = &[
    "bert", "clip", "distilbert", "falcon", "gemma", "gemma2", "gemma3_text", "gpt2", "gpt_neox", "llama", "mistral", "opt", "phi",
    "phi3", "qwen2", "qwen3", "roberta", "starcoder2", "t5", "vit", "whisper",
];

/// Reads a pasted `config.json` and builds the spec of the model it describes.
pub fn from_config_json(text: &str) -> Result<ModelSpec> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Import(format!("not valid JSON: {e}")))?;
    let obj = value.as_object().ok_or_else(|| Error::Import("expected a JSON object (`{...}`)".into()))?;
    from_config(obj)
}

/// [`from_config_json`] for an already parsed object.
pub fn from_config(obj: &Map<String, Value>) -> Result<ModelSpec> {
    let c = Fields::new(obj);
    let arch = c.architecture()?;
    let model_type = match c.str("model_type")? {
        Some(t) => t.to_string(),
        None => family_of(arch.unwrap_or(""))
            .ok_or_else(|| Error::Import("missing field `model_type` (and no known class in `architectures`)".into()))?
            .to_string(),
    };
    match model_type.as_str() {
        "bert" => bert(&c, arch),
        "gpt2" => gpt2(&c, arch),
        "llama" => llama(&c, arch),
        "vit" => vit(&c, arch),
        moe if super::hf_moe::MODEL_TYPES.contains(&moe) => super::hf_moe::from_config(obj, moe, arch),
        "mistral" | "qwen2" | "qwen3" | "gemma" | "gemma2" | "gemma3_text" | "phi3" => dense::llama_like(&c, arch, &model_type),
        "phi" => dense::phi(&c, arch),
        "gpt_neox" => dense::gpt_neox(&c, arch),
        "falcon" => dense::falcon(&c, arch),
        "opt" => dense::opt(&c, arch),
        "starcoder2" => dense::starcoder2(&c, arch),
        "roberta" => encoders::roberta(&c, arch),
        "distilbert" => encoders::distilbert(&c, arch),
        "t5" => seq2seq::t5(&c, arch),
        "clip" => clip::clip(&c, arch),
        "whisper" => seq2seq::whisper(&c, arch),
        other => Err(Error::Import(format!(
            "unsupported model_type `{other}` (supported: {}, {})",
            MODEL_TYPES.join(", "),
            super::hf_moe::MODEL_TYPES.join(", ")
        ))),
    }
}

fn family_of(arch: &str) -> Option<&'static str> {
    [
        ("Bert", "bert"), ("GPT2", "gpt2"), ("Llama", "llama"), ("ViT", "vit"), ("Mistral", "mistral"), ("Qwen2", "qwen2"),
        ("Qwen3", "qwen3"), ("Gemma3", "gemma3_text"), ("Gemma2", "gemma2"), ("Gemma", "gemma"), ("Phi3", "phi3"),
        ("Phi", "phi"), ("GPTNeoX", "gpt_neox"), ("Falcon", "falcon"), ("OPT", "opt"), ("Starcoder2", "starcoder2"),
        ("Roberta", "roberta"), ("DistilBert", "distilbert"), ("T5", "t5"), ("Whisper", "whisper"), ("CLIP", "clip"),
    ]
        .into_iter()
        .find(|(stem, _)| class_stem(arch) == *stem)
        .map(|(_, t)| t)
}

/// `LlamaForCausalLM` → `Llama`, `GPT2LMHeadModel` → `GPT2`, `BertModel` → `Bert`.
fn class_stem(arch: &str) -> &str {
    match arch.find("For") {
        Some(i) if i > 0 => &arch[..i],
        _ => arch.strip_suffix("LMHeadModel").or_else(|| arch.strip_suffix("Model")).unwrap_or(arch),
    }
}

/// Picks the class to build: `arch` when it is one of `supported`, else `base` with a note.
fn pick(arch: Option<&str>, supported: &[&'static str], base: &'static str) -> (&'static str, String) {
    match arch {
        Some(a) => match supported.iter().find(|s| **s == a) {
            Some(s) => (s, s.to_string()),
            None => (base, format!("{base} (imported from a {a} config; its task head is not modelled)")),
        },
        None => (base, base.to_string()),
    }
}

/// Typed access to a config object with transformers' defaults; remembers which fields were read
/// so that [`Fields::refuse_unknown`] can name the ones nothing understood.
struct Fields<'a>(&'a Map<String, Value>, std::cell::RefCell<std::collections::BTreeSet<String>>);

impl<'a> Fields<'a> {
    fn new(obj: &'a Map<String, Value>) -> Self {
        Fields(obj, Default::default())
    }

    /// The field, or `None` when absent or `null` (transformers then uses its default).
    fn get(&self, key: &str) -> Option<&Value> {
        self.1.borrow_mut().insert(key.to_string());
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// An error for the first field that was neither read nor is in [`GENERIC_FIELDS`] or the
    /// family's `ignored` list (known fields that change neither parameters nor memory); and for
    /// a `quantization_config` whose method [`crate::formats::hf`] does not model.
    fn refuse_unknown(&self, model_type: &str, ignored: &[&str]) -> Result<()> {
        if let Some(q) = self.0.get("quantization_config").filter(|v| !v.is_null()) {
            // a known format selects the estimate's weights (`formats::hf`); others are refused
            crate::formats::hf::from_quantization_config(q)?;
        }
        let seen = self.1.borrow();
        for key in self.0.keys() {
            if !seen.contains(key) && key != "quantization_config" && !GENERIC_FIELDS.contains(&key.as_str()) && !ignored.contains(&key.as_str()) {
                return Err(Error::Import(format!(
                    "field `{key}` is not understood by the `{model_type}` importer (it would change the model in a way not modelled, or is unknown); remove it if it does not matter"
                )));
            }
        }
        Ok(())
    }

    fn wrong(key: &str, want: &str, got: &Value) -> Error {
        let mut shown = got.to_string();
        if shown.len() > 40 {
            shown = format!("{}…", shown.chars().take(40).collect::<String>());
        }
        Error::Import(format!("field `{key}` must be {want}, got {shown}"))
    }

    fn int(&self, key: &str, default: u64) -> Result<u64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => as_int(v).ok_or_else(|| Self::wrong(key, "a non-negative integer", v)),
        }
    }

    fn opt_int(&self, key: &str) -> Result<Option<u64>> {
        self.get(key).map(|v| as_int(v).ok_or_else(|| Self::wrong(key, "a non-negative integer", v))).transpose()
    }

    /// A positive size: `0` is rejected here rather than deep inside a layer.
    fn size(&self, key: &str, default: u64) -> Result<u64> {
        let v = self.int(key, default)?;
        if v == 0 {
            return Err(Error::Import(format!("field `{key}` must be at least 1")));
        }
        Ok(v)
    }

    fn prob(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(p) if (0.0..=1.0).contains(&p) => Ok(p),
                _ => Err(Self::wrong(key, "a probability between 0 and 1", v)),
            },
        }
    }

    fn float(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).ok_or_else(|| Self::wrong(key, "a non-negative number", v)),
        }
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| Self::wrong(key, "true or false", v)),
        }
    }

    fn str(&self, key: &str) -> Result<Option<&str>> {
        self.get(key).map(|v| v.as_str().ok_or_else(|| Self::wrong(key, "a string", v))).transpose()
    }

    /// An integer or a `[h, w]` pair (`image_size`, `patch_size`).
    fn pair(&self, key: &str, default: u64) -> Result<[u64; 2]> {
        let v = match self.get(key) {
            None => return Ok([default, default]),
            Some(v) => v,
        };
        let pair = match v {
            Value::Array(a) if a.len() == 2 => as_int(&a[0]).zip(as_int(&a[1])).map(|(h, w)| [h, w]),
            _ => as_int(v).map(|s| [s, s]),
        };
        match pair {
            Some(p) if p[0] > 0 && p[1] > 0 => Ok(p),
            _ => Err(Self::wrong(key, "a positive integer or a [height, width] pair", v)),
        }
    }

    /// The first class in `architectures`.
    fn architecture(&self) -> Result<Option<&str>> {
        match self.get("architectures") {
            None => Ok(None),
            Some(Value::Array(a)) if a.is_empty() => Ok(None),
            Some(Value::Array(a)) => a[0].as_str().map(Some).ok_or_else(|| Self::wrong("architectures", "a list of class names", &a[0])),
            Some(v) => Err(Self::wrong("architectures", "a list of class names", v)),
        }
    }

    /// `num_labels` if given, else the size of `id2label`, else transformers' default of 2.
    fn num_labels(&self) -> Result<u64> {
        if let Some(n) = self.opt_int("num_labels")? {
            return Ok(n);
        }
        match self.get("id2label") {
            None => Ok(2),
            Some(Value::Object(m)) => Ok(m.len() as u64),
            Some(v) => Err(Self::wrong("id2label", "an object", v)),
        }
    }

    /// `hidden_act` / `activation_function` as a feed-forward activation.
    fn activation(&self, key: &str, default: FfnActivation) -> Result<FfnActivation> {
        let Some(name) = self.str(key)? else { return Ok(default) };
        Ok(match name {
            "relu" => FfnActivation::Relu,
            "gelu" | "gelu_python" => FfnActivation::Gelu,
            "gelu_new" | "gelu_fast" => FfnActivation::GeluNew,
            "gelu_pytorch_tanh" => FfnActivation::GeluTanh,
            "silu" | "swish" => FfnActivation::Silu,
            "quick_gelu" => FfnActivation::QuickGelu,
            other => {
                return Err(Error::Import(format!(
                    "field `{key}`: activation `{other}` is not supported (relu, gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, silu, quick_gelu)"
                )))
            }
        })
    }
}

/// A JSON number that is a non-negative integer (`768` or `768.0`).
fn as_int(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19).map(|f| f as u64))
}

fn invalid(what: &str) -> Error {
    Error::Import(format!("{what}: the config's values do not make a valid model"))
}

fn dropout(p: f64) -> Result<Layer> {
    serde_json::from_value(json!({"kind": "dropout", "p": p})).map_err(|_| invalid("dropout"))
}

/// The fields BERT and RoBERTa share, with `d`'s values as defaults.
fn bert_config(c: &Fields, d: BertConfig) -> Result<BertConfig> {
    match c.str("position_embedding_type")? {
        None | Some("absolute") => {}
        Some(other) => {
            return Err(Error::Import(format!(
                "field `position_embedding_type`: `{other}` is not supported (only \"absolute\")"
            )))
        }
    }
    let max_pos = c.size("max_position_embeddings", d.max_position_embeddings)?;
    let cfg = BertConfig {
        vocab_size: c.size("vocab_size", d.vocab_size)?,
        hidden_size: c.size("hidden_size", d.hidden_size)?,
        num_hidden_layers: c.size("num_hidden_layers", d.num_hidden_layers)?,
        num_attention_heads: c.size("num_attention_heads", d.num_attention_heads)?,
        intermediate_size: c.size("intermediate_size", d.intermediate_size)?,
        max_position_embeddings: max_pos,
        type_vocab_size: c.size("type_vocab_size", d.type_vocab_size)?,
        hidden_dropout_prob: c.prob("hidden_dropout_prob", d.hidden_dropout_prob)?,
        attention_probs_dropout_prob: c.prob("attention_probs_dropout_prob", d.attention_probs_dropout_prob)?,
        layer_norm_eps: c.float("layer_norm_eps", d.layer_norm_eps)?,
        hidden_act: c.activation("hidden_act", d.hidden_act)?,
        num_labels: c.num_labels()?,
        seq_len: d.seq_len.min(max_pos),
    };
    Ok(cfg)
}

/// `BertConfig` (transformers): defaults are BERT-base's.
fn bert(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["BertModel", "BertForSequenceClassification"], "BertModel");
    let cfg = bert_config(c, BertConfig::base())?;
    let classifier = class == "BertForSequenceClassification";
    if classifier && cfg.num_labels == 0 {
        return Err(Error::Import("BertForSequenceClassification needs at least 1 label (`num_labels` / `id2label`)".into()));
    }
    let mut spec = presets::bert(&cfg, classifier).ok_or_else(|| invalid("BERT"))?;
    if classifier {
        // `classifier_dropout` replaces `hidden_dropout_prob` before the classifier when set.
        if let Some(p) = c.get("classifier_dropout").map(|_| c.prob("classifier_dropout", 0.0)).transpose()? {
            let n = spec.layers.len();
            spec.layers[n - 2] = dropout(p)?;
        }
    }
    spec.name = Some(name);
    Ok(spec)
}

/// `GPT2Config` (transformers): defaults are GPT-2 small's.
fn gpt2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["GPT2LMHeadModel", "GPT2Model"], "GPT2Model");
    let d = Gpt2Config::default();
    let n_positions = c.size("n_positions", d.n_positions)?;
    let n_inner = c.opt_int("n_inner")?;
    if n_inner == Some(0) {
        return Err(Error::Import("field `n_inner` must be at least 1".into()));
    }
    let cfg = Gpt2Config {
        vocab_size: c.size("vocab_size", d.vocab_size)?,
        n_positions,
        n_embd: c.size("n_embd", d.n_embd)?,
        n_layer: c.size("n_layer", d.n_layer)?,
        n_head: c.size("n_head", d.n_head)?,
        n_inner,
        activation_function: c.activation("activation_function", d.activation_function)?,
        resid_pdrop: c.prob("resid_pdrop", d.resid_pdrop)?,
        embd_pdrop: c.prob("embd_pdrop", d.embd_pdrop)?,
        attn_pdrop: c.prob("attn_pdrop", d.attn_pdrop)?,
        layer_norm_epsilon: c.float("layer_norm_epsilon", d.layer_norm_epsilon)?,
        tie_word_embeddings: c.flag("tie_word_embeddings", d.tie_word_embeddings)?,
        seq_len: n_positions.min(MAX_DEFAULT_SEQ_LEN),
    };
    let mut spec = presets::gpt2(&cfg, class == "GPT2LMHeadModel").ok_or_else(|| invalid("GPT-2"))?;
    spec.name = Some(name);
    Ok(spec)
}

/// `modeling_vit.py`'s module names of the `vit` layout above (`n` layers): the patch
/// projection, `embeddings` (its forward prepends `[CLS]`; the positions are its parameter),
/// `encoder.layer.<i>`, `layernorm`, then the classifier or the pooler. The flatten and
/// transpose after the projection and the classifier's `[:, 0]` are no modules.
fn vit_names(classifier: bool, n: usize) -> crate::layer_names::LayerNames {
    use crate::layer_names::{name_module_list, name_top};
    let own = |n: &str| if classifier { format!("vit.{n}") } else { n.to_string() };
    let mut names = Default::default();
    for (i, part) in [(0, "embeddings.patch_embeddings.projection"), (3, "embeddings"), (4, "embeddings.position_embeddings"), (5, "embeddings.dropout"), (7, "layernorm")] {
        name_top(&mut names, i, &own(part));
    }
    name_module_list(&mut names, 6, &own("encoder.layer"));
    if classifier {
        if n > 9 {
            name_top(&mut names, 9, "classifier");
        }
    } else {
        for (i, part) in [(8, "pooler"), (9, "pooler.dense"), (10, "pooler.activation")] {
            name_top(&mut names, i, part);
        }
    }
    names
}

/// The transformers module names of a decoder's embedding, layers, final norm and head (of the
/// `…ForCausalLM` class; a base model's are the same without the first part).
#[derive(Clone, Copy)]
pub(crate) struct DecoderModules {
    pub embed: &'static str,
    pub layers: &'static str,
    pub norm: &'static str,
    pub head: &'static str,
}

/// LLaMA's and the families built like it (`modeling_llama.py`: `model.embed_tokens`, …).
pub(crate) const LLAMA_MODULES: DecoderModules =
    DecoderModules { embed: "model.embed_tokens", layers: "model.layers", norm: "model.norm", head: "lm_head" };

impl DecoderModules {
    /// Names a decoder laid out as its embedding at 0, its layers' `ModuleList` in the `repeat`s
    /// at `runs` (each repetition one layer), its final norm at `norm` and its head at `head`.
    /// Without a head it is the base model, the causal LM's inner module: its names lose the first
    /// part (`model.`).
    pub(crate) fn names(self, runs: std::ops::Range<usize>, norm: Option<usize>, head: Option<usize>) -> crate::layer_names::LayerNames {
        use crate::layer_names::{name_module_list, name_top};
        let own = |n: &'static str| if head.is_some() { n } else { n.split_once('.').map_or(n, |(_, rest)| rest) };
        let mut names = Default::default();
        name_top(&mut names, 0, own(self.embed));
        for i in runs {
            name_module_list(&mut names, i, own(self.layers));
        }
        if let Some(i) = norm {
            name_top(&mut names, i, own(self.norm));
        }
        if let Some(i) = head {
            name_top(&mut names, i, self.head);
        }
        names
    }
}

/// `LlamaConfig` (transformers): defaults are LLaMA-7B's.
fn llama(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["LlamaForCausalLM", "LlamaModel"], "LlamaModel");
    let h = c.size("hidden_size", 4096)?;
    let heads = c.size("num_attention_heads", 32)?;
    let kv_heads = c.size("num_key_value_heads", heads)?;
    if let Some(hd) = c.opt_int("head_dim")? {
        if hd.checked_mul(heads) != Some(h) {
            return Err(Error::Import(format!(
                "field `head_dim` ({hd}) × num_attention_heads ({heads}) must equal hidden_size ({h}): other head sizes are not supported"
            )));
        }
    }
    let attention_bias = c.flag("attention_bias", false)?;
    let mlp_bias = c.flag("mlp_bias", false)?;
    if attention_bias != mlp_bias {
        return Err(Error::Import(format!(
            "`attention_bias` ({attention_bias}) and `mlp_bias` ({mlp_bias}) differ: a transformer layer here has one bias switch"
        )));
    }
    let vocab = c.size("vocab_size", 32000)?;
    let eps = c.float("rms_norm_eps", 1e-6)?;
    let max_pos = c.size("max_position_embeddings", 2048)?;
    // The gated MLP's memory does not depend on which activation gates it.
    c.activation("hidden_act", FfnActivation::Silu)?;
    let mut layers = vec![
        Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: h, padding_idx: None, tied_weight: false }),
        Layer::Repeat {
            times: c.size("num_hidden_layers", 32)?,
            body: vec![Layer::TransformerDecoderLayer(TransformerLayer {
                dropout: 0.0,
                attention_dropout: Some(c.prob("attention_dropout", 0.0)?),
                activation: FfnActivation::Silu,
                layer_norm_eps: eps,
                norm_first: true,
                bias: attention_bias,
                norm: NormKind::RmsNorm,
                gated_mlp: true,
                num_kv_heads: (kv_heads != heads).then_some(kv_heads),
                rotary: true,
                ..presets::transformer_layer(h, heads, c.size("intermediate_size", 11008)?)
            })],
        },
        Layer::RmsNorm(RmsNorm { normalized_shape: h, eps, t5: false }),
    ];
    if class == "LlamaForCausalLM" {
        let tied = c.flag("tie_word_embeddings", false)?;
        layers.push(Layer::Linear(Linear { in_features: h, out_features: vocab, bias: false, tied_weight: tied }));
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![max_pos.min(MAX_DEFAULT_SEQ_LEN)], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers,
        loss: if class == "LlamaForCausalLM" { Loss::CausalLm } else { Loss::CrossEntropy },
        names: LLAMA_MODULES.names(1..2, Some(2), (class == "LlamaForCausalLM").then_some(3)),
    })
}

/// `ViTConfig` (transformers): defaults are ViT-B/16 at 224×224.
fn vit(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["ViTForImageClassification", "ViTModel"], "ViTModel");
    if !c.flag("qkv_bias", true)? {
        return Err(Error::Import("field `qkv_bias`: false is not supported (Q/K/V and output projections share one bias switch)".into()));
    }
    let h = c.size("hidden_size", 768)?;
    let eps = c.float("layer_norm_eps", 1e-12)?;
    let hidden_dropout = c.prob("hidden_dropout_prob", 0.0)?;
    let channels = c.size("num_channels", 3)?;
    let image = c.pair("image_size", 224)?;
    let patch = c.pair("patch_size", 16)?;
    if image[0] < patch[0] || image[1] < patch[1] {
        return Err(Error::Import(format!("`image_size` {image:?} is smaller than `patch_size` {patch:?}")));
    }
    let patches = (image[0] / patch[0]).saturating_mul(image[1] / patch[1]);
    let conv = serde_json::from_value(json!({
        "kind": "conv2d", "in_channels": channels, "out_channels": h,
        "kernel_size": Pair(patch), "stride": Pair(patch),
    }))
    .map_err(|_| invalid("patch embedding"))?;
    let mut layers = vec![
        conv,
        serde_json::from_value(json!({"kind": "flatten", "start_dim": 2})).map_err(|_| invalid("flatten"))?,
        serde_json::from_value(json!({"kind": "transpose", "dim0": 1, "dim1": 2})).map_err(|_| invalid("transpose"))?,
        Layer::ClsToken(ClsToken { embedding_dim: h }),
        Layer::PositionalEmbedding(PositionalEmbedding {
            num_embeddings: patches.saturating_add(1),
            embedding_dim: h,
            per_sample: false,
            index_buffer: 0,
            inplace: false,
        }),
        dropout(hidden_dropout)?,
        Layer::Repeat {
            times: c.size("num_hidden_layers", 12)?,
            body: vec![Layer::TransformerEncoderLayer(TransformerLayer {
                dropout: hidden_dropout,
                attention_dropout: Some(c.prob("attention_probs_dropout_prob", 0.0)?),
                activation: c.activation("hidden_act", FfnActivation::Gelu)?,
                layer_norm_eps: eps,
                norm_first: true,
                ..presets::transformer_layer(h, c.size("num_attention_heads", 12)?, c.size("intermediate_size", 3072)?)
            })],
        },
        Layer::LayerNorm(LayerNorm { normalized_shape: h, eps, elementwise_affine: true, bias: true }),
        serde_json::from_value(json!({"kind": "select_token", "index": 0})).map_err(|_| invalid("select_token"))?,
    ];
    if class == "ViTForImageClassification" {
        // `add_pooling_layer=False`; the classifier is `nn.Identity` with 0 labels.
        let labels = c.num_labels()?;
        if labels > 0 {
            layers.push(Layer::Linear(Linear { in_features: h, out_features: labels, bias: true, tied_weight: false }));
        }
    } else {
        let out = c.size("pooler_output_size", h)?;
        layers.push(Layer::Linear(Linear { in_features: h, out_features: out, bias: true, tied_weight: false }));
        layers.push(match c.str("pooler_act")?.unwrap_or("tanh") {
            "tanh" => Layer::Tanh,
            other => return Err(Error::Import(format!("field `pooler_act`: `{other}` is not supported (tanh)"))),
        });
    }
    Ok(ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        names: vit_names(class == "ViTForImageClassification", layers.len()),
        input: InputSpec { shape: vec![channels, image[0], image[1]], dtype: InputDType::Float32, vocab_size: None },
        layers,
        loss: Loss::CrossEntropy,
    })
}
