//! The model's spec behind a shared pointer.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ops::Deref;
use std::rc::Rc;
use vramcalc_core::spec::ModelSpec;

/// A [`ModelSpec`] that copies of the state share until one of them edits it (issue 23: a
/// ResNet-152 batch change spent about a third of its time copying and comparing its 500-layer
/// spec, in the undo history, the saved work and the panels' props). Two copies of one spec
/// compare equal without reading its layers; specs built apart still compare by content.
/// Serialised as the spec itself, so saved work and links are unchanged.
#[derive(Debug, Clone)]
pub struct SpecRc(Rc<ModelSpec>);

impl SpecRc {
    pub fn new(spec: ModelSpec) -> SpecRc {
        SpecRc(Rc::new(spec))
    }

    /// The spec to edit: this copy's own (copied first if another copy shares it).
    pub fn make_mut(&mut self) -> &mut ModelSpec {
        Rc::make_mut(&mut self.0)
    }

    /// The shared pointer, for memos keyed by identity ([`crate::components::Shared`]).
    pub fn rc(&self) -> &Rc<ModelSpec> {
        &self.0
    }

    /// Whether `self` and `other` are the same copy (not merely equal).
    pub fn same(&self, other: &SpecRc) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl From<ModelSpec> for SpecRc {
    fn from(spec: ModelSpec) -> SpecRc {
        SpecRc::new(spec)
    }
}

impl Deref for SpecRc {
    type Target = ModelSpec;
    fn deref(&self) -> &ModelSpec {
        &self.0
    }
}

impl PartialEq for SpecRc {
    fn eq(&self, other: &SpecRc) -> bool {
        self.same(other) || *self.0 == *other.0
    }
}

impl Serialize for SpecRc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for SpecRc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SpecRc, D::Error> {
        ModelSpec::deserialize(d).map(SpecRc::new)
    }
}

#[cfg(test)]
mod tests {
    use super::SpecRc;

    #[test]
    fn copies_share_until_an_edit_and_compare_by_content() {
        let spec = crate::presets::preset("resnet18").unwrap();
        let a = SpecRc::new(spec.clone());
        let mut b = a.clone();
        assert!(a.same(&b) && a == b);
        b.make_mut().input.shape[1] = 128;
        assert!(!a.same(&b) && a != b, "an edit copies, leaving the other copy as it was");
        assert_eq!(*a, spec);
        assert_eq!(SpecRc::new(spec.clone()), a, "built apart, equal by content");
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, serde_json::to_string(&spec).unwrap(), "serialised as the spec itself");
        assert_eq!(serde_json::from_str::<SpecRc>(&json).unwrap(), a);
    }
}
