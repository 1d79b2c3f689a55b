//! The paste box: a vramcalc JSON spec or a Hugging Face `config.json` (recognised by its
//! `model_type`), read by the lazily loaded module. Errors name the problem; the current model
//! stays until a paste succeeds.

use vramcalc_core::spec::ModelSpec;

/// What the pasted text was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pasted {
    Spec,
    /// With the context length the config gives (`max_position_embeddings`, GPT-2's `n_positions`).
    HfConfig { context: Option<u64> },
}

/// Parses pasted text into a spec, and checks it resolves (so shape errors show at the paste box).
/// Read and checked by the lazily loaded module ([`crate::extras`]) with the full core, so a
/// mixture-of-experts model pastes like any other.
pub async fn parse(text: &str) -> Result<(ModelSpec, Pasted), String> {
    let answer = crate::extras::read_paste(text).await?;
    let (kind, json) = answer.split_once('\n').unwrap_or_default();
    let kind = if kind == "hf" {
        // The context the config gives, for the import's note (serde_json's `Value` is in the bundle already).
        let value = serde_json::from_str::<serde_json::Value>(text).unwrap_or_default();
        Pasted::HfConfig { context: ["max_position_embeddings", "n_positions", "n_ctx"].iter().find_map(|k| value.get(*k)?.as_u64()) }
    } else {
        Pasted::Spec
    };
    Ok((ModelSpec::from_json(json).map_err(|e| e.to_string())?, kind))
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

    /// The app's own core leaves MoE out; the paste box reads with the full core.
    #[test]
    fn reads_a_moe_spec() {
        let text = r#"{"input":{"shape":[16,64]},"layers":[{"kind":"sparse_moe","hidden_size":64,"num_experts":4,"top_k":2,"intermediate_size":128}]}"#;
        let (spec, kind) = parse(text).unwrap();
        assert_eq!((kind, spec.layers[0].kind()), (Pasted::Spec, "sparse_moe"));
    }
}
