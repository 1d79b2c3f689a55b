//! Small components with `#[derive(Properties, PartialEq)]` props. They read the language, unit
//! and dispatcher from [`Ctx`] and format what the core computed.
//!
//! One component (or plain view function) per file; a family of them is a folder whose `mod.rs`
//! re-exports its members, so `components::layers::LayerRow` names the same item as before.

pub mod charts;
pub mod downloads;
pub mod embed;

pub mod header;
pub mod import;
pub mod inputs;
pub mod layers;
pub mod llm;
pub mod llm_answers;
pub mod local;
pub mod model;
pub mod pipeline;
pub mod results;
pub mod reverse;
pub mod settings;
pub mod share;
pub mod table;
pub mod whatif;
pub mod workload;
pub mod workload_form;

use crate::i18n::{tr, Lang, Tr};
use crate::state::Action;
use std::rc::Rc;
use vramcalc_core::{format_bytes, ByteUnit};
use yew::prelude::*;

/// What every component needs besides its props.
#[derive(Clone, PartialEq)]
pub struct Ctx {
    pub dispatch: Dispatch,
    pub lang: Lang,
    pub unit: ByteUnit,
    /// Phone-narrow window: charts use a narrower viewBox.
    pub narrow: bool,
}

impl Ctx {
    pub fn tr(&self) -> &'static Tr {
        tr(self.lang)
    }
    /// The LLM setup's texts.
    pub fn llm(&self) -> &'static crate::i18n::llm::LlmTr {
        crate::i18n::llm_tr(self.lang)
    }
    /// The llama.cpp panel's and the workload switch's texts.
    pub fn local(&self) -> &'static crate::i18n::local::LocalTr {
        crate::i18n::local_tr(self.lang)
    }
    /// The image/video pipeline panel's texts.
    pub fn pipe(&self) -> &'static crate::i18n::pipeline::PipelineTr {
        crate::i18n::pipeline_tr(self.lang)
    }
    /// The modes' and the reverse views' texts.
    pub fn modes(&self) -> &'static crate::i18n::modes::ModesTr {
        crate::i18n::modes_tr(self.lang)
    }
    pub fn zh(&self) -> bool {
        self.lang == crate::i18n::Lang::Zh
    }
    /// ViewBox width of the charts.
    pub fn chart_width(&self) -> f64 {
        if self.narrow {
            360.0
        } else {
            640.0
        }
    }
    pub fn bytes(&self, b: u64) -> String {
        format_bytes(b, self.unit)
    }
}

/// Where the components send their [`Action`]s: the app's [`State`](crate::state::State) reducer,
/// or the embed card's own (`crate::state::card`), which changes only what the card's controls
/// set. A callback rather than `State`'s dispatcher, so the card's small bundle
/// (`src/bin/card.rs`) links none of `State::reduce` (undo, saved work, the llama.cpp and
/// pipeline panels: issue 23, load times).
#[derive(Clone, PartialEq)]
pub struct Dispatch(Callback<Action>);

impl Dispatch {
    pub fn dispatch(&self, action: Action) {
        self.0.emit(action);
    }
}

impl<R: Reducible<Action = Action> + 'static> From<UseReducerDispatcher<R>> for Dispatch {
    fn from(d: UseReducerDispatcher<R>) -> Self {
        Dispatch(Callback::from(move |a| d.dispatch(a)))
    }
}

/// [`Dispatch`] for a reducer hook's dispatcher, the same callback at every render (a new one
/// would change the context and redraw every component under it).
#[hook]
pub fn use_dispatch<R: Reducible<Action = Action> + 'static>(d: UseReducerDispatcher<R>) -> Dispatch {
    (*use_memo((), move |_| Dispatch::from(d))).clone()
}

/// The app context. `App` always provides it above every component that calls this.
#[hook]
pub fn use_ctx() -> Ctx {
    use_context::<Ctx>().expect("Ctx is provided by App around every component")
}

/// An `Rc` compared by identity: cheap props for large derived values (memo outputs).
#[derive(Debug)]
pub struct Shared<T>(pub Rc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}
impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}
impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// `12.3%`.
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "—".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}
