//! The report of the model shown, computed at once by the app's core (one core in the browser:
//! every layer kind, fine-tuning, generation and multi-GPU jobs), resolved models kept per setup
//! so a batch change resolves nothing.

use crate::analysis::{PreparedCache, Report};
use std::rc::Rc;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{Error, TrainConfig};
use yew::prelude::*;

/// The estimate with its batch analysis for `spec` under `config` and `dist` on a GPU of
/// `capacity` bytes.
#[hook]
pub fn use_report(spec: &ModelSpec, config: TrainConfig, dist: DistConfig, capacity: u64) -> Result<Rc<Report>, Error> {
    let cache = use_mut_ref(PreparedCache::default);
    let report = use_memo((spec.clone(), config, dist, capacity), move |(spec, config, dist, cap)| {
        cache.borrow_mut().analyse(spec, config, dist, *cap).map(Rc::new)
    });
    (*report).clone()
}
