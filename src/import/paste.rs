//! The paste box's reader: a vramcalc JSON spec or a Hugging Face `config.json` (recognised by
//! its `model_type`), checked with the core, so a pasted MoE model is read like any other. Errors
//! name the problem. The reading runs in the app's worker ([`read`] asks it: the importer is not
//! in the app's bundle); [`read_now`] is the worker's side.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use vramcalc_core::spec::ModelSpec;

/// The context a Hugging Face `config.json` gives (`max_position_embeddings`, GPT-2's
/// `n_positions`), for the app's note on what the import assumed.
pub fn context_of(config_json: &str) -> Option<u64> {
    let value = serde_json::from_str::<Value>(config_json).ok()?;
    ["max_position_embeddings", "n_positions", "n_ctx"].iter().find_map(|k| value.get(*k)?.as_u64())
}

/// The checkpoint's dtype a Hugging Face `config.json` names (`torch_dtype`, or `dtype` as
/// transformers ≥ 4.56 writes it), as the CLI's `--hf-config` reads it (`crates/cli/src/args.rs`,
/// `ModelArgs::torch_dtype`).
pub fn dtype_of(config_json: &str) -> Option<String> {
    let value = serde_json::from_str::<Value>(config_json).ok()?;
    ["torch_dtype", "dtype"].iter().find_map(|k| value.get(*k)?.as_str().map(str::to_string))
}

/// What the paste box read: a Hugging Face config (with the context and the dtype it gives) or
/// a spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Pasted {
    Hf(ModelSpec, Option<u64>, Option<String>),
    Spec(ModelSpec),
}

/// Pasted text → what it was read as, by the worker; the error says what is wrong and where
/// (or that the worker failed).
pub async fn read(text: &str) -> Result<Pasted, String> {
    use crate::worker::{call, unexpected, Request, Response};
    match call(Request::ReadPaste { text: text.to_string() }).await? {
        Response::ReadPaste(r) => r,
        other => Err(unexpected("the paste", other)),
    }
}

/// [`read`] in place (the worker's side: it links the importer).
pub fn read_now(text: &str) -> Result<Pasted, String> {
    let answer = read_paste(text)?;
    let (kind, json) = answer.split_once('\n').unwrap_or_default();
    let spec = ModelSpec::from_json(json).map_err(|e| e.to_string())?;
    Ok(if kind == "hf" { Pasted::Hf(spec, context_of(text), dtype_of(text)) } else { Pasted::Spec(spec) })
}

/// Pasted text → what it was read as (`spec` or `hf`), a newline, and the spec's JSON; the error
/// says what is wrong and where.
fn read_paste(text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("nothing to read: paste a vramcalc spec or a Hugging Face config.json".into());
    }
    let value: Value = serde_json::from_str(t).map_err(|e| format!("not valid JSON: {e}"))?;
    let is_hf = value.get("model_type").is_some() && value.get("layers").is_none();
    let (spec, kind) = if is_hf {
        (vramcalc_core::import::hf::from_config_json(t).map_err(|e| e.to_string())?, "hf")
    } else {
        (ModelSpec::from_json(t).map_err(|e| e.to_string())?, "spec")
    };
    vramcalc_core::memory::Prepared::new(&spec, &Default::default()).map_err(|e| e.to_string())?;
    Ok(format!("{kind}\n{}", serde_json::to_string(&spec).map_err(|e| e.to_string())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<(String, ModelSpec), String> {
        let answer = read_paste(text)?;
        let (kind, json) = answer.split_once('\n').unwrap();
        Ok((kind.to_string(), ModelSpec::from_json(json).unwrap()))
    }

    #[test]
    fn reads_a_spec_and_reports_errors() {
        let spec = vramcalc_core::presets::build("vgg11").unwrap();
        assert_eq!(read(&spec.to_json_pretty()).unwrap(), ("spec".to_string(), spec));
        assert!(read("").is_err());
        assert!(read("{not json").unwrap_err().contains("JSON"));
        let e = read(r#"{"input":{"shape":[10]},"layers":[{"kind":"linear","in_features":3,"out_features":2}]}"#).unwrap_err();
        assert!(e.contains("layers[0]"), "{e}");
    }

    #[test]
    fn reads_a_bert_config_and_its_context() {
        let text = include_str!("../../tests/data/bert-base-uncased.config.json");
        let (kind, spec) = read(text).unwrap();
        assert_eq!((kind.as_str(), context_of(text)), ("hf", Some(512)));
        assert!(!spec.layers.is_empty());
    }

    /// A pasted MoE model is read like any other (one core in the browser).
    #[test]
    fn reads_a_moe_spec() {
        let text = r#"{"input":{"shape":[16,64]},"layers":[{"kind":"sparse_moe","hidden_size":64,"num_experts":4,"top_k":2,"intermediate_size":128}]}"#;
        let (kind, spec) = read(text).unwrap();
        assert_eq!((kind.as_str(), spec.layers[0].kind()), ("spec", "sparse_moe"));
    }
}
