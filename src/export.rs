//! Downloads' file names. The CSV and JSON themselves are written by the lazily loaded module
//! (`crates/web-extras/src/export.rs`); `crate::dom` turns text into files and also makes each
//! chart a standalone SVG.

use vramcalc_core::spec::ModelSpec;

/// A file-name-safe stem: `vgg16`, `my-cnn`.
pub fn file_stem(spec: &ModelSpec) -> String {
    let stem: String = spec.display_name()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '-' })
        .take(60)
        .collect();
    if stem.trim_matches('-').is_empty() {
        "model".into()
    } else {
        stem
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::presets;

    #[test]
    fn file_names() {
        let mut spec = presets::build("gpt2").unwrap();
        assert_eq!(file_stem(&spec), "GPT2LMHeadModel");
        spec.name = Some("my net/v2 ✓".into());
        assert_eq!(file_stem(&spec), "my-net-v2--");
        spec.name = None;
        assert_eq!(file_stem(&spec), "custom-model");
    }
}
