//! The report of the model shown, computed at once by the app's core (one core in the browser:
//! every layer kind, fine-tuning, generation and multi-GPU jobs), resolved models kept per setup
//! so a batch change resolves nothing.

use crate::analysis::{PreparedCache, Report};
use crate::components::Shared;
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

/// The page's spec behind one shared pointer, copied only when it changes: the memos and
/// deferred computations that depend on it compare pointers instead of deep-comparing (and
/// first deep-copying) a spec of hundreds of layers on every render (issue 23: ResNet-152's
/// batch change spent about a third of its time in such copies and comparisons).
#[hook]
pub fn use_shared_spec(spec: &ModelSpec) -> Shared<ModelSpec> {
    let kept = use_mut_ref(|| Rc::new(spec.clone()));
    if *kept.borrow().as_ref() != *spec {
        *kept.borrow_mut() = Rc::new(spec.clone());
    }
    let shared = kept.borrow().clone();
    Shared(shared)
}
