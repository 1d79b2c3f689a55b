//! The paste box's reader, on first use: a vramcalc JSON spec or a Hugging Face `config.json`
//! (recognised by its `model_type`), checked with the full core, so a pasted MoE model is read
//! like any other. Errors name the problem.

use serde_json::Value;
use vramcalc_core::spec::ModelSpec;

/// Pasted text → what it was read as (`spec` or `hf`), a newline, and the spec's JSON; the error
/// says what is wrong and where.
pub fn read_paste(text: &str) -> Result<String, String> {
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
