//! The report of the model shown: by the app's own core, synchronously, or, for what its build
//! leaves out, by the lazily loaded module ([`crate::lazy`]), numbered so that the newest request
//! wins.

use crate::analysis::{PreparedCache, Report};
use crate::lazy::{self, Requests};
use std::rc::Rc;
use vramcalc_core::spec::ModelSpec;
use serde_json::{Map, Value};
use vramcalc_core::{Error, TrainConfig};
use yew::prelude::*;

/// A model, its setup, its LLM settings (`Model::llm`) and the GPU's capacity.
pub type LazyRequest = (ModelSpec, TrainConfig, Map<String, Value>, u64);

/// What the lazy route has for the current request.
pub struct LazyReport {
    /// The answer to the request now asked for (`None` while it is computed, or off the route).
    pub answer: Option<Result<Rc<Report>, Error>>,
    /// A request waits for its answer: the app shows "computing…" over the previous figures.
    pub computing: bool,
}

/// `request`'s report by the full core; `None` takes the app off the lazy route (and makes any
/// answer still in flight stale).
#[hook]
pub fn use_lazy_report(request: Option<LazyRequest>) -> LazyReport {
    type Answered = Rc<(LazyRequest, Result<Rc<Report>, Error>)>;
    let answered = use_state(|| None::<Answered>);
    let requests = use_mut_ref(Requests::default);
    {
        let answered = answered.clone();
        use_effect_with(request.clone(), move |request| {
            let n = requests.borrow_mut().issue();
            if let Some(req) = request.clone() {
                wasm_bindgen_futures::spawn_local(async move {
                    let r = lazy::analyse(&req.0, &req.1, &req.2, req.3).await.map(Rc::new);
                    if requests.borrow().is_current(n) {
                        answered.set(Some(Rc::new((req, r))));
                    }
                });
            }
        });
    }
    match (&request, &*answered) {
        (Some(req), Some(a)) if a.0 == *req => LazyReport { answer: Some(a.1.clone()), computing: false },
        (Some(_), _) => LazyReport { answer: None, computing: true },
        (None, _) => LazyReport { answer: None, computing: false },
    }
}

/// The estimate with its batch analysis for `spec` under `config` on a GPU of `capacity` bytes:
/// computed at once by the app's core (resolved models kept per setup, so a batch change resolves
/// nothing), or taking the lazy route ([`use_lazy_report`]) where [`lazy::needs_full_core`].
#[hook]
pub fn use_report(spec: &ModelSpec, config: TrainConfig, llm: &Map<String, Value>, capacity: u64) -> LazyReport {
    let full = lazy::needs_full_core(spec, &config, llm);
    let cache = use_mut_ref(PreparedCache::default);
    let sync = use_memo((spec.clone(), config, capacity, full), move |(spec, config, cap, full)| {
        (!*full).then(|| cache.borrow_mut().analyse(spec, config, *cap).map(Rc::new))
    });
    let lazy = use_lazy_report(full.then(|| (spec.clone(), config, llm.clone(), capacity)));
    match &*sync {
        Some(r) => LazyReport { answer: Some(r.clone()), computing: false },
        None => lazy,
    }
}
