//! Encoder families beside BERT: `roberta` (BERT's layers and embeddings, its own classifier
//! head) and `distilbert` (no token types, no pooler, no dropout after attention).

use crate::import::fields::{dropout, invalid, pick, Fields};
use crate::error::{Error, Result};
use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::layer::embedding::{Embedding, PositionalEmbedding};
use crate::layer::linear::Linear;
use crate::layer::norm::LayerNorm;
use crate::presets::{self, BertConfig};
use crate::spec::{Layer, ModelSpec};
use serde_json::json;

fn linear(i: u64, o: u64) -> Layer {
    Layer::Linear(Linear { in_features: i, out_features: o, bias: true, tied_weight: false })
}

fn select_first() -> Result<Layer> {
    serde_json::from_value(json!({"kind": "select_token", "index": 0})).map_err(|_| invalid("select_token"))
}

/// `RobertaConfig` (transformers): BERT's fields with roberta-base's vocabulary. `RobertaModel`
/// keeps BERT's pooler; `RobertaForSequenceClassification` has none (`add_pooling_layer=False`)
/// and classifies `[CLS]` with `dropout, dense, tanh, dropout, out_proj`.
pub(super) fn roberta(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    roberta_like(c, arch, "roberta", ["RobertaModel", "RobertaForSequenceClassification"], 50265)
}

/// `XLMRobertaConfig` (transformers 5.24, `modeling_xlm_roberta.py`): RoBERTa's model and head
/// (`XLMRobertaForSequenceClassification`'s encoder is also under `roberta.`) with BERT's
/// default vocabulary (30522; XLM-R checkpoints set 250002).
pub(super) fn xlm_roberta(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    roberta_like(c, arch, "xlm-roberta", ["XLMRobertaModel", "XLMRobertaForSequenceClassification"], 30522)
}

fn roberta_like(c: &Fields, arch: Option<&str>, model_type: &str, classes: [&'static str; 2], vocab: u64) -> Result<ModelSpec> {
    let seqcls = classes[1];
    let (class, name) = pick(arch, &classes, classes[0]);
    let cfg = bert_config(c, BertConfig { vocab_size: vocab, ..BertConfig::base() })?;
    let classifier = class == seqcls;
    if classifier && cfg.num_labels == 0 {
        return Err(Error::Import(format!("{seqcls} needs at least 1 label (`num_labels` / `id2label`)")));
    }
    let head_dropout = c.get("classifier_dropout").map(|_| c.prob("classifier_dropout", 0.0)).transpose()?;
    c.refuse_unknown(model_type, &["tie_word_embeddings"])?;
    let mut spec = presets::bert(&cfg, false).ok_or_else(|| invalid("RoBERTa"))?;
    if classifier {
        let (h, p) = (cfg.hidden_size, head_dropout.unwrap_or(cfg.hidden_dropout_prob));
        // drop the pooler (dense + tanh); keep `[CLS]`
        spec.layers.truncate(spec.layers.len() - 2);
        spec.layers.extend([dropout(p)?, linear(h, h), Layer::Tanh, dropout(p)?, linear(h, cfg.num_labels)]);
        // `modeling_roberta.py`: the encoder under `roberta.`, then `RobertaClassificationHead`
        // (its forward takes `[CLS]` and applies `torch.tanh`; one dropout module, used twice)
        let base = std::mem::take(&mut spec.names);
        for (i, n) in (0..6).filter_map(|i| Some((i, base.get(&format!("layers[{i}]"))?.as_str()?))) {
            crate::layer_names::name_top(&mut spec.names, i, &format!("roberta.{n}"));
        }
        crate::layer_names::name_module_list(&mut spec.names, 5, "roberta.encoder.layer");
        for (i, n) in [(6, "classifier"), (7, "classifier.dropout"), (8, "classifier.dense"), (10, "classifier.dropout"), (11, "classifier.out_proj")] {
            crate::layer_names::name_top(&mut spec.names, i, n);
        }
    }
    spec.name = Some(name);
    Ok(spec)
}

/// `DistilBertConfig` (transformers): defaults are distilbert-base's. Embeddings are words plus
/// positions (`position_ids` buffer), LayerNorm and dropout; post-norm layers with dropout only
/// after the feed-forward; `DistilBertForSequenceClassification` adds `pre_classifier`, ReLU,
/// dropout and `classifier` on `[CLS]`.
pub(super) fn distilbert(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) =
        pick(arch, &["DistilBertModel", "DistilBertForSequenceClassification"], "DistilBertModel");
    // transformers 5.24 only initialises the (trainable) position embedding with sinusoids when
    // set (`DistilBertPreTrainedModel._init_weights`: `init.copy_(…, create_sinusoidal_embeddings(…))`):
    // the same parameter either way (checked: `requires_grad` stays true).
    c.flag("sinusoidal_pos_embds", false)?;
    let dim = c.size("dim", 768)?;
    let vocab = c.size("vocab_size", 30522)?;
    let max_pos = c.size("max_position_embeddings", 512)?;
    let p = c.prob("dropout", 0.1)?;
    let layer = TransformerLayer {
        dropout: p,
        attention_dropout: Some(c.prob("attention_dropout", 0.1)?),
        attn_out_dropout: Some(0.0),
        activation: c.activation("activation", FfnActivation::Gelu)?,
        layer_norm_eps: 1e-12,
        ..presets::transformer_layer(dim, c.size("n_heads", 12)?, c.size("hidden_dim", 3072)?)
    };
    let mut layers = vec![
        Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: dim, padding_idx: None, tied_weight: false }),
        Layer::PositionalEmbedding(PositionalEmbedding {
            num_embeddings: max_pos,
            embedding_dim: dim,
            per_sample: false,
            index_buffer: max_pos,
            inplace: false,
            batched: false,
        }),
        Layer::LayerNorm(LayerNorm { normalized_shape: dim, eps: 1e-12, elementwise_affine: true, bias: true }),
        dropout(p)?,
        Layer::Repeat { times: c.size("n_layers", 6)?, body: vec![Layer::TransformerEncoderLayer(layer)] },
    ];
    let head_dropout = c.prob("seq_classif_dropout", 0.2)?;
    if class == "DistilBertForSequenceClassification" {
        let labels = c.num_labels()?;
        if labels == 0 {
            return Err(Error::Import("DistilBertForSequenceClassification needs at least 1 label (`num_labels` / `id2label`)".into()));
        }
        layers.extend([select_first()?, linear(dim, dim), Layer::Relu(Default::default()), dropout(head_dropout)?, linear(dim, labels)]);
    }
    c.refuse_unknown("distilbert", &["qa_dropout", "tie_word_embeddings"])?;
    let classifier = class == "DistilBertForSequenceClassification";
    let mut spec = presets::token_model(&name, BertConfig::base().seq_len.min(max_pos), vocab, layers);
    // `modeling_distilbert.py`: the encoder (under `distilbert.` in the classifier), then
    // `pre_classifier`, `dropout`, `classifier` (`[CLS]` and the ReLU are its forward's)
    let own = |n: &str| if classifier { format!("distilbert.{n}") } else { n.to_string() };
    for (i, part) in ["embeddings.word_embeddings", "embeddings.position_embeddings", "embeddings.LayerNorm", "embeddings.dropout"].into_iter().enumerate() {
        crate::layer_names::name_top(&mut spec.names, i, &own(part));
    }
    crate::layer_names::name_module_list(&mut spec.names, 4, &own("transformer.layer"));
    if classifier {
        for (i, part) in [(6, "pre_classifier"), (8, "dropout"), (9, "classifier")] {
            crate::layer_names::name_top(&mut spec.names, i, part);
        }
    }
    Ok(spec)
}

/// `ElectraConfig` (transformers 5.24, `modeling_electra.py`): defaults are ELECTRA-small's
/// discriminator. Embeddings of `embedding_size` (words, token types, positions, LayerNorm,
/// dropout), `embeddings_project` to `hidden_size` when the two differ, BERT's post-norm layers,
/// no pooler; `ElectraForSequenceClassification`'s `ElectraClassificationHead` on `[CLS]`:
/// dropout, `dense`, GELU, dropout, `out_proj` (the dropout `classifier_dropout` when set, else
/// `hidden_dropout_prob`).
pub(super) fn electra(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["ElectraModel", "ElectraForSequenceClassification"], "ElectraModel");
    let d = BertConfig { hidden_size: 256, num_attention_heads: 4, intermediate_size: 1024, ..BertConfig::base() };
    let cfg = bert_config(c, d)?;
    let e = c.size("embedding_size", 128)?;
    let h = cfg.hidden_size;
    let classifier = class == "ElectraForSequenceClassification";
    if classifier && cfg.num_labels == 0 {
        return Err(Error::Import("ElectraForSequenceClassification needs at least 1 label (`num_labels` / `id2label`)".into()));
    }
    let head_dropout = c.get("classifier_dropout").map(|_| c.prob("classifier_dropout", 0.0)).transpose()?;
    // the pre-training heads' fields (`ElectraSequenceSummary` is used by the multiple-choice class only)
    c.refuse_unknown("electra", &["tie_word_embeddings", "summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout"])?;
    let mut spec = presets::bert(&BertConfig { hidden_size: e, ..cfg.clone() }, false).ok_or_else(|| invalid("ELECTRA"))?;
    let mut layers: Vec<Layer> = spec.layers.drain(..5).collect();
    if e != h {
        layers.push(linear(e, h));
    }
    layers.push(Layer::Repeat {
        times: cfg.num_hidden_layers,
        body: vec![Layer::TransformerEncoderLayer(TransformerLayer {
            dropout: cfg.hidden_dropout_prob,
            attention_dropout: Some(cfg.attention_probs_dropout_prob),
            activation: cfg.hidden_act,
            layer_norm_eps: cfg.layer_norm_eps,
            ..presets::transformer_layer(h, cfg.num_attention_heads, cfg.intermediate_size)
        })],
    });
    if classifier {
        let p = head_dropout.unwrap_or(cfg.hidden_dropout_prob);
        layers.extend([select_first()?, dropout(p)?, linear(h, h), Layer::Gelu(Default::default()), dropout(p)?, linear(h, cfg.num_labels)]);
    }
    Ok(presets::token_model(&name, cfg.seq_len, cfg.vocab_size, layers))
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
pub(super) fn bert(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
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
