//! App-level hooks: the persisted reducer, keyboard shortcuts, and document attributes.

use crate::i18n::Lang;
use crate::state::{Action, Saved, State, Theme};
use gloo::storage::{LocalStorage, Storage};
use yew::prelude::*;

/// LocalStorage key of the saved state (versioned inside, see [`crate::state::Saved`]).
pub const STORAGE_KEY: &str = "vramcalc.state";

/// The app state, restored from LocalStorage on load and saved after every change.
#[hook]
pub fn use_app_state() -> UseReducerHandle<State> {
    let state = use_reducer(|| State::from_saved(LocalStorage::get::<Saved>(STORAGE_KEY).ok()));
    let saved = state.saved();
    use_effect_with(saved, |saved| {
        // Storage can be full or disabled (private mode): the app keeps working without it.
        let _ = LocalStorage::set(STORAGE_KEY, saved);
    });
    state
}

/// Ctrl/⌘+Z undoes, Ctrl/⌘+Shift+Z and Ctrl+Y redo — except while typing in a field, where the
/// browser's own text undo applies.
#[hook]
pub fn use_undo_shortcuts(dispatch: UseReducerDispatcher<State>) {
    use_effect_with((), move |_| {
        let listener = web_sys::window().and_then(|w| w.document()).map(|doc| {
            gloo::events::EventListener::new(&doc, "keydown", move |e| {
                let Some(e) = e.dyn_ref::<web_sys::KeyboardEvent>() else { return };
                if !(e.ctrl_key() || e.meta_key()) {
                    return;
                }
                let typing = e
                    .target()
                    .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                    .map(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"))
                    .unwrap_or(false);
                if typing {
                    return;
                }
                match (e.key().to_lowercase().as_str(), e.shift_key()) {
                    ("z", false) => {
                        e.prevent_default();
                        dispatch.dispatch(Action::Undo);
                    }
                    ("z", true) | ("y", _) => {
                        e.prevent_default();
                        dispatch.dispatch(Action::Redo);
                    }
                    _ => {}
                }
            })
        });
        move || drop(listener)
    });
}

/// Mirrors theme and language onto `<html>` (`data-theme`, `lang`) for CSS and screen readers.
#[hook]
pub fn use_document_attributes(theme: Theme, lang: Lang) {
    use_effect_with((theme, lang), |(theme, lang)| {
        if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
            let _ = root.set_attribute("data-theme", theme.name());
            let _ = root.set_attribute("lang", if *lang == Lang::Zh { "zh-CN" } else { "en" });
        }
    });
}

use wasm_bindgen::JsCast;

/// Like `use_memo`, but computes after the render that changed `deps` (in a zero-delay timeout),
/// so slow secondary views (what-ifs resolve the model once per trick) never delay the main
/// estimate's update. Shows the previous value until the new one is ready (and keeps it when `f`
/// gives `None`, e.g. for an invalid model); a newer change cancels a pending computation.
#[hook]
pub fn use_deferred_memo<D, T>(deps: D, f: fn(&D) -> Option<T>) -> Option<std::rc::Rc<T>>
where
    D: PartialEq + Clone + 'static,
    T: 'static,
{
    let value = use_state(|| None::<std::rc::Rc<T>>);
    {
        let value = value.clone();
        use_effect_with(deps, move |deps| {
            let deps = deps.clone();
            let pending = gloo::timers::callback::Timeout::new(0, move || {
                if let Some(v) = f(&deps) {
                    value.set(Some(std::rc::Rc::new(v)));
                }
            });
            move || drop(pending)
        });
    }
    (*value).clone()
}

/// Whether the window is phone-narrow (charts then use a narrower viewBox so their text stays
/// readable); follows resizes.
#[hook]
pub fn use_narrow() -> bool {
    fn narrow() -> bool {
        web_sys::window()
            .and_then(|w| w.inner_width().ok())
            .and_then(|v| v.as_f64())
            .is_some_and(|w| w < NARROW_PX)
    }
    let state = use_state(narrow);
    {
        let state = state.clone();
        use_effect_with((), move |_| {
            let listener = web_sys::window().map(|w| {
                gloo::events::EventListener::new(&w, "resize", move |_| {
                    let n = narrow();
                    if n != *state {
                        state.set(n);
                    }
                })
            });
            move || drop(listener)
        });
    }
    *state
}

/// Below this width (CSS px) charts are drawn for a phone.
pub const NARROW_PX: f64 = 600.0;
