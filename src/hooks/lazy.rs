//! The lazy route's hook: the report of a model the app's build of the core leaves out, computed
//! by the lazily loaded module ([`crate::lazy`]), numbered so that the newest request wins.

use crate::analysis::Report;
use crate::lazy::{self, Requests};
use std::rc::Rc;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{Error, TrainConfig};
use yew::prelude::*;

/// A model, its setup and the GPU's capacity.
pub type LazyRequest = (ModelSpec, TrainConfig, u64);

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
                    let r = lazy::analyse(&req.0, &req.1, req.2).await.map(Rc::new);
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
