//! The paste box: a vramcalc JSON spec or a Hugging Face `config.json` (recognised by its
//! `model_type`). Errors name the problem; the current model stays until a paste succeeds.

use vramcalc_core::spec::ModelSpec;

/// What the pasted text was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pasted {
    Spec,
    /// With the context length the config gives (`max_position_embeddings`, GPT-2's `n_positions`).
    HfConfig { context: Option<u64> },
}

/// Parses pasted text into a spec, and checks it resolves (so shape errors show at the paste box).
/// A Hugging Face config goes to the importer in the lazily loaded module ([`crate::extras`]).
pub async fn parse(text: &str) -> Result<(ModelSpec, Pasted), String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("nothing to read: paste a vramcalc spec or a Hugging Face config.json".into());
    }
    let value: serde_json::Value = serde_json::from_str(t).map_err(|e| format!("not valid JSON: {e}"))?;
    let is_hf = value.get("model_type").is_some() && value.get("layers").is_none();
    let (spec, kind) = if is_hf {
        let context = ["max_position_embeddings", "n_positions", "n_ctx"].iter().find_map(|k| value.get(*k)?.as_u64());
        (crate::extras::import_hf(t).await?, Pasted::HfConfig { context })
    } else {
        (ModelSpec::from_json(t).map_err(|e| e.to_string())?, Pasted::Spec)
    };
    vramcalc_core::memory::Prepared::new(&spec, &Default::default()).map_err(|e| e.to_string())?;
    Ok((spec, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extras::block_on;

    fn parse(text: &str) -> Result<(ModelSpec, Pasted), String> {
        block_on(super::parse(text))
    }

    #[test]
    fn reads_a_spec_and_reports_errors() {
        let spec = vramcalc_core::presets::build("vgg11").unwrap();
        let (back, kind) = parse(&spec.to_json_pretty()).unwrap();
        assert_eq!((back, kind), (spec, Pasted::Spec));
        assert!(parse("").is_err());
        assert!(parse("{not json").unwrap_err().contains("JSON"));
        let e = parse(r#"{"input":{"shape":[10]},"layers":[{"kind":"linear","in_features":3,"out_features":2}]}"#).unwrap_err();
        assert!(e.contains("layers[0]"), "{e}");
    }

    #[test]
    fn reads_a_bert_config() {
        let text = include_str!("../tests/data/bert-base-uncased.config.json");
        let (spec, kind) = parse(text).unwrap();
        assert_eq!(kind, Pasted::HfConfig { context: Some(512) });
        assert!(!spec.layers.is_empty());
    }
}
