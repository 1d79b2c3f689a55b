//! The import panel's logic: the Hugging Face hub fetch (`hub`), the checkpoint's stored size
//! (`checkpoint`) and the paste box's reader (`paste`), and the action each answer is for the app's state. `components::import` draws it.

pub mod checkpoint;
pub mod hub;
pub mod paste;

use crate::state::Action;
use paste::Pasted;
use vramcalc_core::hub::HubRef;
use vramcalc_core::spec::ModelSpec;

/// The app's action for a paste box's model: a config runs as an import (its length, its note).
pub fn pasted_action(p: Pasted) -> Action {
    match p {
        Pasted::Hf(spec, context, dtype) => Action::ImportHf(spec, context, None, dtype),
        Pasted::Spec(spec) => Action::LoadSpec(spec),
    }
}

/// The app's action for a model loaded from the hub: its link names it (`id@revision`); the
/// config's dtype sets the starting precision.
pub fn hub_action(hub: &HubRef, spec: ModelSpec, context: Option<u64>, dtype: Option<String>) -> Action {
    Action::ImportHf(spec, context, Some(hub.to_string()), dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;

    #[test]
    fn what_the_panel_reads_becomes_actions() {
        let spec = vramcalc_core::presets::build("vgg11").unwrap();
        assert!(matches!(pasted_action(block_on(paste::read(&spec.to_json_pretty())).unwrap()), Action::LoadSpec(s) if s == spec));
        let bert = include_str!("../../tests/data/bert-base-uncased.config.json");
        assert!(matches!(pasted_action(block_on(paste::read(bert)).unwrap()), Action::ImportHf(_, Some(512), None, _)));
        let hub = HubRef::parse("Qwen/Qwen2.5-0.5B@v2").unwrap();
        assert!(matches!(hub_action(&hub, spec, Some(512), None), Action::ImportHf(_, Some(512), Some(h), None) if h == "Qwen/Qwen2.5-0.5B@v2"));
    }
}
