//! Building a preset in the browser without the importer (issue 23, load times). The presets of
//! published Hugging Face configs are built at compile time by the core's importer (`build.rs`)
//! and read here as specs; the others by their constructors (`vramcalc_core::presets::build`).
//! The result equals `vramcalc_core::import::preset` (tested below), which the app and the embed
//! card's small bundle (`src/bin/card.rs`) then need not link: the importer is only for a user's
//! own config (hub id, paste), which the app's worker reads (`crate::worker`).

use vramcalc_core::error::Result;
use vramcalc_core::spec::ModelSpec;

include!(concat!(env!("OUT_DIR"), "/preset_specs.rs"));

/// Preset `id`'s spec: what `vramcalc_core::import::preset(id)` returns.
pub fn preset(id: &str) -> Result<ModelSpec> {
    match spec_json(id) {
        // build.rs wrote it from a ModelSpec: it reads back (the test below checks every one)
        Some(json) => serde_json::from_str(json).map_err(|e| vramcalc_core::error::Error::Parse(format!("preset {id}: {e}"))),
        None => vramcalc_core::presets::build(id),
    }
}

#[cfg(test)]
mod tests {
    use vramcalc_core::presets;

    /// Every preset reads back as the importer (or its constructor) builds it, and every
    /// published config has its spec.
    #[test]
    fn every_preset_equals_the_importers() {
        for p in presets::list() {
            assert_eq!(super::spec_json(p.id).is_some(), presets::hf_config(p.id).is_some(), "{}", p.id);
            assert_eq!(super::preset(p.id).unwrap(), vramcalc_core::import::preset(p.id).unwrap(), "{}", p.id);
        }
        assert!(super::preset("no-such-preset").is_err());
    }
}
