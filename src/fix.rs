//! The fix a shape error suggests, for the error banner's one-click repair: the core says
//! `layers[3] (linear): expected 25088 input features, got 1234`, so setting the layer's
//! `in_features` to 1234 makes it accept what it receives.

use crate::fields::{set_field, FieldValue};
use crate::tree::{self, NodePath};
use vramcalc_core::spec::{Layer, ModelSpec};
use vramcalc_core::Error;

/// A repair for `error` in `spec`: the row's path, the field, its new value and the edited layer.
#[derive(Debug, Clone)]
pub struct Fix {
    pub path: NodePath,
    pub field: &'static str,
    pub value: u64,
    pub layer: Layer,
}

/// The path (as the editor writes it) of the row a core error names.
pub fn error_path(error: &Error) -> Option<NodePath> {
    match error {
        Error::Layer { path, .. } => tree::normalize_core_path(path).parse().ok(),
        _ => None,
    }
}

pub fn suggest(spec: &ModelSpec, error: &Error) -> Option<Fix> {
    let Error::Layer { message, .. } = error else { return None };
    // "expected A input features, got B" → in_features = B; "… input channels, got B" →
    // in_channels; "expected A channels, got B" (batch norm) → num_features. Split on spaces
    // (a char pattern: no substring searcher in the bundle).
    let w: Vec<&str> = message.split(' ').collect();
    let (field, value) = w.windows(4).find_map(|w| {
        let field = match (w[0], w[1], w[2]) {
            ("input", "features,", "got") => "in_features",
            ("input", "channels,", "got") => "in_channels",
            (_, "channels,", "got") => "num_features",
            _ => return None,
        };
        Some((field, w[3].parse::<u64>().ok()?))
    })?;
    let path = error_path(error)?;
    let layer = set_field(tree::node(spec, &path)?, field, &FieldValue::Text(value.to_string())).ok()?;
    Some(Fix { path, field, value, layer })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::memory::Prepared;

    #[test]
    fn the_suggested_fix_repairs_the_model() {
        let mut spec = vramcalc_core::presets::build("vgg11").unwrap();
        let nth = |kind: &str, n: usize| -> NodePath {
            let i = spec.layers.iter().enumerate().filter(|(_, l)| l.kind() == kind).nth(n).unwrap().0;
            format!("layers[{i}]").parse().unwrap()
        };
        for (p, field, value) in [(nth("linear", 0), "in_features", "1234"), (nth("conv2d", 1), "in_channels", "7")] {
            let mut broken = spec.clone();
            let layer = set_field(tree::node(&broken, &p).unwrap(), field, &FieldValue::Text(value.into())).unwrap();
            tree::replace(&mut broken, &p, layer);
            let e = Prepared::new(&broken, &Default::default()).err().expect("the edit breaks the model");
            let fix = suggest(&broken, &e).unwrap_or_else(|| panic!("no fix for {e}"));
            assert_eq!((fix.field, &fix.path), (field, &error_path(&e).unwrap()));
            tree::replace(&mut broken, &fix.path, fix.layer);
            assert!(Prepared::new(&broken, &Default::default()).is_ok(), "{e}");
        }
        spec.input.shape = vec![];
        assert!(suggest(&spec, &Error::Input("x".into())).is_none());
    }
}
