//! App-level hooks: the persisted reducer, keyboard shortcuts, and document attributes.

use crate::i18n::Lang;
use crate::dom;
use crate::import::checkpoint::{self, HubCheckpoint};
use crate::import::hub::token_for;
use crate::share_link::{self, Notice};
use crate::state::{Action, Model, Prefs, Saved, State, Theme};
use gloo::storage::{LocalStorage, Storage};
use vramcalc_core::hub::HubRef;
use yew::prelude::*;

/// LocalStorage key of the saved state (versioned inside, see [`crate::state::Saved`]).
pub const STORAGE_KEY: &str = "vramcalc.state";

/// The full app's state: from a shared link in the fragment if there is one, else from
/// LocalStorage; saved after every change — except that a link's state is not saved until the user
/// edits it, so opening a link never overwrites the saved work. The address bar follows the state
/// (`history.replaceState`, no new history entries).
pub struct AppState {
    pub state: UseReducerHandle<State>,
    /// Why the page shows something other than the saved work (until an edit or a dismissal).
    pub notice: Option<Notice>,
    pub dismiss: Callback<()>,
    /// The saved work as it was on load (for "back to my saved model").
    pub saved: Option<Saved>,
    /// The share link, encoded a moment after each change.
    pub link: Link,
}

/// What the full app starts from: decoded before the first render (a hub link fetches its
/// config first), so the first chart already shows the right model.
#[derive(Debug, Clone, PartialEq)]
pub struct Boot {
    pub start: share_link::Start,
    /// The saved work as it was on load.
    pub saved: Option<Saved>,
}

impl Boot {
    /// Reads LocalStorage and the address bar's fragment.
    pub async fn load() -> Boot {
        let saved = LocalStorage::get::<Saved>(STORAGE_KEY).ok();
        // A reload of the page's own copy of the saved work shows the saved work (the copy may
        // lag the last edit); any other fragment is a link to open.
        let hash = if saved.is_some() && dom::fragment_is_mirror() { String::new() } else { dom::location_hash() };
        Boot { start: share_link::start(&hash, saved.clone()).await, saved }
    }
}

#[hook]
pub fn use_app_state(boot: &Boot) -> AppState {
    let state = {
        let initial = boot.start.state.clone();
        use_reducer(move || initial)
    };
    let guard = use_mut_ref(|| boot.start.guard.clone());
    let notice = use_state(|| boot.start.notice.clone());
    // The user's work as last stored; `None` while an opened link is shown unedited.
    let stored = use_mut_ref(|| None::<Saved>);
    {
        let (guard, notice, stored) = (guard.clone(), notice.clone(), stored.clone());
        // Runs in the microtask right after the event that changed the state, so before any
        // later task (a reload, a closed tab) can begin.
        use_effect_with(state.saved(), move |saved| {
            let unchanged = guard.borrow().as_ref() == Some(saved);
            if !unchanged {
                // The first edit of a linked state makes it the user's work.
                if guard.borrow_mut().take().is_some() {
                    notice.set(None);
                }
                store(saved);
                *stored.borrow_mut() = Some(saved.clone());
            }
        });
    }
    // And once more when the page is hidden or left: the last chance the browser gives, should a
    // write above ever have failed (storage briefly full) or a render still be pending.
    use_effect_with((), move |_| {
        let listeners = web_sys::window().map(|w| {
            let flush = move |_: &web_sys::Event| {
                if let Some(saved) = stored.borrow().as_ref() {
                    store(saved);
                }
            };
            let doc = w.document();
            let on_hide = gloo::events::EventListener::new(&w, "pagehide", flush.clone());
            let on_hidden = doc.map(|d| {
                let d2 = d.clone();
                gloo::events::EventListener::new(&d, "visibilitychange", move |e| {
                    if d2.visibility_state() == web_sys::VisibilityState::Hidden {
                        flush(e);
                    }
                })
            });
            (on_hide, on_hidden)
        });
        move || drop(listeners)
    });
    // A model whose config came from the hub (loaded, linked or saved): read what its checkpoint
    // stores, to show beside the modelled weights (`crate::import::checkpoint`).
    {
        let d = state.dispatcher();
        use_effect_with(state.model.hub.clone(), move |hub| {
            if let Some((id, hub)) = hub.clone().and_then(|id| HubRef::parse(&id).ok().map(|h| (id, h))) {
                wasm_bindgen_futures::spawn_local(async move {
                    let stored = checkpoint::stored(&hub, &token_for("")).await;
                    d.dispatch(Action::HubCheckpoint(HubCheckpoint { hub: id, stored }));
                });
            }
        });
    }
    // Encoding runs after the estimate is drawn (a custom model's first link loads the codec
    // module); a model too large for a link keeps the last link in the address bar.
    let link = use_link(&state.model, state.prefs, LINK_DELAY_MS);
    {
        let guard = guard.clone();
        use_effect_with(link.fragment.clone(), move |f| {
            if let Some(f) = f {
                // Once the state is the saved work, the fragment is only its copy.
                dom::replace_fragment(f, guard.borrow().is_none());
            }
        });
    }
    // Another link pasted into the address bar of this tab: open it as a page load would.
    use_effect_with((), |_| {
        let listener = web_sys::window().map(|w| {
            gloo::events::EventListener::new(&w, "hashchange", |_| {
                if let Some(w) = web_sys::window() {
                    let _ = w.location().reload();
                }
            })
        });
        move || drop(listener)
    });
    let dismiss = { let notice = notice.clone(); Callback::from(move |_| notice.set(None)) };
    AppState { state, notice: (*notice).clone(), dismiss, saved: boot.saved.clone(), link }
}

/// Writes the user's work to LocalStorage. Storage can be full or disabled (private mode): the app
/// keeps working without it.
fn store(saved: &Saved) {
    let _ = LocalStorage::set(STORAGE_KEY, saved);
}

/// A share link and whether it is the current state's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Link {
    /// The newest encoded fragment (`None`: too large for a link, or none encoded yet).
    pub fragment: Option<String>,
    /// `fragment` is the link of the state shown now (not of one before the last edit).
    pub fresh: bool,
}

/// The share link of `model` and `prefs`, encoded `delay_ms` after they last changed.
#[hook]
pub fn use_link(model: &Model, prefs: Prefs, delay_ms: u32) -> Link {
    let deps = (model.clone(), prefs);
    let encoded = use_deferred_future(deps.clone(), delay_ms, |(m, p)| async move {
        let fragment = share_link::fragment(&m, &p).await;
        Some(((m, p), fragment))
    });
    match encoded.as_deref() {
        Some((of, fragment)) => Link { fragment: fragment.clone(), fresh: *of == deps },
        None => Link::default(),
    }
}

/// How long the address bar waits for edits to settle before it shows the new link (encoding
/// and `history.replaceState` cost several ms for a large model; a dragged slider pays them once).
pub const LINK_DELAY_MS: u32 = 250;

/// Ctrl/⌘+Z undoes, Ctrl/⌘+Shift+Z and Ctrl+Y redo — except while typing in a field, where the
/// browser's own text undo applies.
#[hook]
pub fn use_undo_shortcuts(dispatch: UseReducerDispatcher<State>) {
    use_effect_with((), move |_| {
        let listener = web_sys::window().and_then(|w| w.document()).map(|doc| {
            // Not passive: it prevents the browser's default for the keys it handles.
            let active = gloo::events::EventListenerOptions::enable_prevent_default();
            gloo::events::EventListener::new_with_options(&doc, "keydown", active, move |e| {
                let Some(e) = e.dyn_ref::<web_sys::KeyboardEvent>() else { return };
                if !(e.ctrl_key() || e.meta_key()) {
                    return;
                }
                // In a text field Ctrl+Z is the field's own undo; anywhere else (a checkbox, the
                // slider, a select, a button) it is the app's.
                let typing = e.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()).is_some_and(|el| {
                    el.tag_name() == "TEXTAREA"
                        || el.dyn_ref::<web_sys::HtmlInputElement>().is_some_and(|i| {
                            !matches!(i.type_().as_str(), "checkbox" | "radio" | "range" | "button" | "submit" | "reset" | "color")
                        })
                });
                if typing {
                    return;
                }
                match (e.key().to_ascii_lowercase().as_str(), e.shift_key()) {
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

mod report;
pub use report::{use_report, use_shared_spec};

/// Like `use_memo`, but computes after the render that changed `deps`, so slow secondary views
/// (what-ifs, the share link) never delay the main estimate's update; a delay above zero also lets
/// a burst of edits (a dragged slider) compute once, for the last. Shows the previous value until
/// the new one is ready (and keeps it when `f` gives `None`, e.g. for an invalid model); a newer
/// change cancels a pending computation. The synchronous case of [`use_deferred_future`].
#[hook]
pub fn use_deferred_memo<D, T, F>(deps: D, delay_ms: u32, f: F) -> Option<std::rc::Rc<T>>
where
    D: PartialEq + Clone + 'static,
    T: 'static,
    F: Fn(&D) -> Option<T> + 'static,
{
    use_deferred_future(deps, delay_ms, move |d| std::future::ready(f(&d)))
}

/// [`use_deferred_memo`] for an async computation: `f` starts right after the first render and
/// `delay_ms` after each later change; a result that arrives after a newer change is dropped.
#[hook]
pub fn use_deferred_future<D, T, F, Fut>(deps: D, delay_ms: u32, f: F) -> Option<std::rc::Rc<T>>
where
    D: PartialEq + Clone + 'static,
    T: 'static,
    F: Fn(D) -> Fut + 'static,
    Fut: std::future::Future<Output = Option<T>> + 'static,
{
    let value = use_state(|| None::<std::rc::Rc<T>>);
    let first = use_mut_ref(|| true);
    {
        let value = value.clone();
        use_effect_with(deps, move |deps| {
            let (deps, stale) = (deps.clone(), std::rc::Rc::new(std::cell::Cell::new(false)));
            let delay_ms = if first.replace(false) { 0 } else { delay_ms };
            let pending = {
                let stale = stale.clone();
                gloo::timers::callback::Timeout::new(delay_ms, move || {
                    wasm_bindgen_futures::spawn_local(async move {
                        if let Some(v) = f(deps).await {
                            if !stale.get() {
                                value.set(Some(std::rc::Rc::new(v)));
                            }
                        }
                    })
                })
            };
            move || {
                stale.set(true);
                drop(pending)
            }
        });
    }
    (*value).clone()
}

/// The last answer of `f(deps)`, an async computation (the app's worker), and whether it is the
/// current `deps`' ([`Answered::current`]): from the render in which `deps` change until their
/// answer arrives the view keeps the previous answer, marked as being recomputed, so typing does
/// not make the panel jump; an answer for older `deps` is dropped.
#[hook]
pub fn use_answer_of<D, T, F, Fut>(deps: D, f: F) -> Answered<T>
where
    D: PartialEq + Clone + 'static,
    T: 'static,
    F: Fn(D) -> Fut + 'static,
    Fut: std::future::Future<Output = T> + 'static,
{
    let value = use_state(|| None::<(D, std::rc::Rc<T>)>);
    {
        let value = value.clone();
        use_effect_with(deps.clone(), move |deps| {
            let (deps, stale) = (deps.clone(), std::rc::Rc::new(std::cell::Cell::new(false)));
            let live = stale.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let v = f(deps.clone()).await;
                if !live.get() {
                    value.set(Some((deps, std::rc::Rc::new(v))));
                }
            });
            move || stale.set(true)
        });
    }
    Answered { last: value.as_ref().map(|(_, v)| v.clone()), current: value.as_ref().is_some_and(|(d, _)| *d == deps) }
}

/// What [`use_answer_of`] has: the last answer (none before the first) and whether it answers
/// the current settings.
pub struct Answered<T> {
    pub last: Option<std::rc::Rc<T>>,
    pub current: bool,
}

/// Whether the window is phone-narrow (charts then use a narrower viewBox so their text stays
/// readable); follows resizes.
#[hook]
pub fn use_narrow() -> bool {
    fn narrow() -> bool {
        // The build-time prerender (src/bin/prerender.rs) has no window: it draws the wide page.
        if cfg!(not(target_arch = "wasm32")) {
            return false;
        }
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
