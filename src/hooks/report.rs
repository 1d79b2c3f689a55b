//! The report of the model shown, computed at once by the app's core (one core in the browser:
//! every layer kind, fine-tuning, generation and multi-GPU jobs), resolved models kept per setup
//! so a batch change resolves nothing.

use crate::analysis::{PreparedCache, Report};
use crate::components::Shared;
use crate::state::SpecRc;
use std::rc::Rc;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{Error, TrainConfig};
use yew::prelude::*;

/// The estimate with its batch analysis for `spec` under `config` and `dist` on a GPU of
/// `capacity` bytes.
#[hook]
pub fn use_report(spec: Shared<ModelSpec>, config: TrainConfig, dist: DistConfig, capacity: u64) -> Result<Rc<Report>, Error> {
    let cache = use_mut_ref(PreparedCache::default);
    let report = use_memo((spec, config, dist, capacity), move |(spec, config, dist, cap)| {
        cache.borrow_mut().analyse(spec, config, dist, *cap).map(Rc::new)
    });
    (*report).clone()
}

/// The page's spec as one pointer that changes only when the spec does: the memos and deferred
/// computations that depend on it compare pointers instead of a spec of hundreds of layers.
/// The state's copies share one spec until an edit ([`SpecRc`]); a spec rebuilt equal (the
/// same preset loaded again) keeps the pointer handed out before, so nothing recomputes.
#[hook]
pub fn use_shared_spec(spec: &SpecRc) -> Shared<ModelSpec> {
    // the copy last seen, and the pointer handed out for it
    let kept = use_mut_ref(|| (spec.clone(), spec.rc().clone()));
    let mut kept = kept.borrow_mut();
    if !kept.0.same(spec) {
        if kept.0 != *spec {
            kept.1 = spec.rc().clone();
        }
        kept.0 = spec.clone();
    }
    Shared(kept.1.clone())
}
