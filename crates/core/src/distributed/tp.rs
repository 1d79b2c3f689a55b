//! Tensor parallelism (Megatron-LM layout, `megatron/core/tensor_parallel/layers.py`): each rank
//! runs the model with its slice of the split layers, and the simulation of that model gives its
//! activations.
//!
//! - Attention: Q/K/V are column-parallel (`ColumnParallelLinear`): `nhead / t` query heads and
//!   `num_kv_heads / t` KV heads per rank, the head size unchanged; the output projection is
//!   row-parallel (`RowParallelLinear`): `nhead / t × head_dim` inputs, full `d_model` outputs,
//!   all-reduced in place.
//! - MLP: FC1 (gate and up) column-parallel, FC2 (down) row-parallel: `dim_feedforward / t`.
//! - Embedding and head vocab-parallel (`VocabParallelEmbedding`, the head a column-parallel
//!   linear with `vocab / t` outputs after padding the vocabulary to a multiple of 128·t, the loss `vocab_parallel_cross_entropy` on the local logits).
//! - Norms, residuals and their activations are replicated, unless `--sequence-parallel`
//!   (`DistConfig::sequence_parallel`) splits them along the sequence between the embedding and
//!   the head; the lowering does that (`layer/seq_parallel.rs`: Megatron's reduce-scatters,
//!   all-gathers and persistent gather buffer), on the model split here.

use crate::config::{Framework, Mode, TrainConfig};
use crate::error::{Error, Result};
use crate::spec::ModelSpec;
use serde_json::Value;

pub const BASIS: &str = "TP: each rank's split layers simulated op by op (Megatron-LM layout); per-layer activations equal Korthikanti et al. 2022";

/// With `--sequence-parallel`, in place of [`BASIS`].
pub const SP_BASIS: &str = "TP with sequence parallelism: each rank's split layers and sequence shards simulated op by op (Megatron-LM's reduce-scatters, all-gathers and persistent gather buffer); per-layer activations equal Korthikanti et al. 2022 with sequence parallelism";

/// Whether `--sequence-parallel` is modelled for tensor-parallel degree `t` and this setup.
/// Megatron turns it off, with a warning, at `t = 1` (`ColumnParallelLinear.__init__`); here that
/// is an error, so a figure never claims what it did not model.
pub fn check_sequence_parallel(t: u64, config: &TrainConfig) -> std::result::Result<(), String> {
    let ft = &config.finetune;
    let why = if t <= 1 {
        "needs tensor parallelism (--tp > 1, or --strategy tp on more than one GPU): it splits the sequence over the tensor-parallel ranks"
    } else if config.mode == Mode::Generate {
        "is modelled for --mode train and infer, not for generate's KV-cache steps"
    } else if config.framework != Framework::PytorchEager {
        "is Megatron-LM's (PyTorch); not modelled for --framework candle"
    } else if ft.has_adapters() {
        "with LoRA or QLoRA adapters is not modelled (the adapters would read the split input)"
    } else if ft.loss == crate::finetune::LossKernel::Chunked {
        "with --loss chunked is not modelled (the fused head would read the split input)"
    } else {
        return Ok(());
    };
    Err(format!("--sequence-parallel {why}"))
}

/// The model one tensor-parallel rank runs.
pub fn split(spec: &ModelSpec, t: u64) -> Result<ModelSpec> {
    // The spec's JSON text read back: the value `serde_json::to_value` gives (floats round-trip:
    // the core's serde_json has `float_roundtrip`), by the text serializer and reader every web
    // bundle has anyway (share links), so they leave out serde_json's value serializer of every
    // layer kind (issue 23, load times: 33 KB of function bodies).
    let err = |e: serde_json::Error| Error::Config(format!("tensor parallelism: {e}"));
    let mut v: Value = serde_json::from_str(&serde_json::to_string(spec).map_err(err)?).map_err(err)?;
    let vocab = v["input"]["vocab_size"].as_u64();
    if let Some(layers) = v.get_mut("layers").and_then(Value::as_array_mut) {
        let n = layers.len();
        for (i, l) in layers.iter_mut().enumerate() {
            split_layer(l, t, vocab, i + 1 == n, &format!("layers[{i}]"))?;
        }
    }
    let text = v.to_string();
    ModelSpec::from_json(&text).map_err(|e| Error::Config(format!("tensor parallelism: {e}")))
}

/// Megatron's `make_vocab_size_divisible_by` default.
pub const VOCAB_DIVISIBLE_BY: u64 = 128;

/// One rank's vocabulary: Megatron pads it to a multiple of `128 × t`
/// (`megatron/training/tokenizer`'s `_vocab_size_with_padding`), then splits it evenly.
pub fn vocab_shard(vocab: u64, t: u64) -> u64 {
    let multiple = VOCAB_DIVISIBLE_BY.saturating_mul(t);
    vocab.div_ceil(multiple).saturating_mul(multiple) / t.max(1)
}

fn div(l: &Value, key: &str, t: u64, path: &str) -> Result<Option<u64>> {
    let Some(x) = l.get(key).and_then(Value::as_u64) else { return Ok(None) };
    if x % t != 0 {
        return Err(Error::Config(format!("{path}: {key} = {x} does not split over --tp {t}")));
    }
    Ok(Some(x / t))
}

fn split_layer(l: &mut Value, t: u64, vocab: Option<u64>, last: bool, path: &str) -> Result<()> {
    let kind = l["kind"].as_str().unwrap_or_default().to_string();
    match kind.as_str() {
        "repeat" | "sequential" | "residual" => {
            if let Some(body) = l.get_mut("body").and_then(Value::as_array_mut) {
                for (j, b) in body.iter_mut().enumerate() {
                    split_layer(b, t, vocab, false, &format!("{path}.body[{j}]"))?;
                }
            }
        }
        k if k.starts_with("transformer_") => {
            let d_model = l["d_model"].as_u64().unwrap_or(0);
            let nhead = l["nhead"].as_u64().unwrap_or(1);
            if l.get("head_dim").and_then(Value::as_u64).is_none() {
                l["head_dim"] = Value::from(d_model / nhead.max(1));
            }
            let heads = div(l, "nhead", t, path)?;
            let kv = match l.get("num_kv_heads").and_then(Value::as_u64) {
                Some(kv) if kv % t == 0 => Some(kv / t),
                Some(kv) if t.is_multiple_of(kv) => Some(1), // Megatron replicates a KV head over t / kv ranks
                Some(kv) => return Err(Error::Config(format!("{path}: num_kv_heads = {kv} does not split over --tp {t}"))),
                None => None,
            };
            let ffn = div(l, "dim_feedforward", t, path)?;
            if let Some(h) = heads {
                l["nhead"] = Value::from(h);
            }
            if let Some(kv) = kv {
                l["num_kv_heads"] = Value::from(kv);
            }
            if let Some(f) = ffn {
                l["dim_feedforward"] = Value::from(f);
            }
        }
        "embedding" if vocab.is_some_and(|v| l["num_embeddings"].as_u64() == Some(v)) => {
            l["num_embeddings"] = Value::from(vocab_shard(vocab.unwrap_or(0), t));
        }
        "linear" if last && vocab.is_some_and(|v| l["out_features"].as_u64() == Some(v)) => {
            l["out_features"] = Value::from(vocab_shard(vocab.unwrap_or(0), t));
        }
        _ => {}
    }
    Ok(())
}
