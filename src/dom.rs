//! Browser plumbing for sharing, embedding and exports: the address bar, the clipboard, file
//! downloads, standalone SVGs and the embed card's height messages. Every function is a no-op
//! (or returns `None`/`false`) where the browser lacks what it needs; none panics.

use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

fn window() -> Option<web_sys::Window> {
    web_sys::window()
}

fn document() -> Option<web_sys::Document> {
    window()?.document()
}

/// `location.hash` (`#v1.…`, or empty).
pub fn location_hash() -> String {
    window().and_then(|w| w.location().hash().ok()).unwrap_or_default()
}

/// `location.search` (`?embed&controls=batch`, or empty).
pub fn location_search() -> String {
    window().and_then(|w| w.location().search().ok()).unwrap_or_default()
}

/// The app's directory, without page, query or fragment (`https://host/vramcalc/`), also from
/// the embed page (`…/vramcalc/embed.html`).
pub fn app_base() -> String {
    let Some(l) = window().map(|w| w.location()) else { return String::new() };
    let path = l.pathname().unwrap_or_default();
    let dir = match path.rsplit_once('/') {
        Some((dir, page)) if page.ends_with(".html") => format!("{dir}/"),
        _ => path,
    };
    format!("{}{dir}", l.origin().unwrap_or_default())
}

/// The full app's link for a state.
pub fn app_link(fragment: &str) -> String {
    format!("{}#{fragment}", app_base())
}

/// Points the address bar at `#fragment` without adding a history entry. `mirror`: the fragment
/// shows the saved work (see [`fragment_is_mirror`]); otherwise it is a link the user opened.
pub fn replace_fragment(fragment: &str, mirror: bool) {
    let Some(w) = window() else { return };
    let Ok(h) = w.history() else { return };
    let want = format!("#{fragment}");
    let same_hash = w.location().hash().ok().as_deref() == Some(want.as_str());
    if same_hash && fragment_is_mirror() == mirror {
        return;
    }
    let state = if mirror {
        let marker = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&marker, &MIRROR_KEY.into(), &JsValue::TRUE);
        marker.into()
    } else {
        JsValue::NULL
    };
    let _ = h.replace_state_with_url(&state, "", Some(&want));
}

/// Whether the address bar's fragment was written by this page as a copy of the saved work.
/// The copy follows edits a moment later (the link is written after the update is drawn), so on
/// a reload the saved work, stored synchronously on every edit, is the newer of
/// the two. A link pasted or opened is a new history entry without the marker and wins.
pub fn fragment_is_mirror() -> bool {
    let Some(state) = window().and_then(|w| w.history().ok()).and_then(|h| h.state().ok()) else { return false };
    !state.is_null() && js_sys::Reflect::get(&state, &MIRROR_KEY.into()).is_ok_and(|v| v.is_truthy())
}

const MIRROR_KEY: &str = "vramcalcMirror";

/// Writes `text` to the clipboard; `done(true)` once written, `done(false)` where the browser
/// refuses or has no clipboard (the caller then offers the text to select).
pub fn copy_text(text: &str, done: impl FnOnce(bool) + 'static) {
    let Some(nav) = window().map(|w| w.navigator()) else { return done(false) };
    // `navigator.clipboard` is undefined outside secure contexts: calling it would throw.
    let has = js_sys::Reflect::get(&nav, &JsValue::from_str("clipboard")).is_ok_and(|c| !c.is_undefined() && !c.is_null());
    if !has {
        return done(false);
    }
    let promise = nav.clipboard().write_text(text);
    wasm_bindgen_futures::spawn_local(async move {
        done(wasm_bindgen_futures::JsFuture::from(promise).await.is_ok());
    });
}

/// The embed card's height in CSS px (the body's, which wraps the card).
fn content_height() -> Option<f64> {
    let body = document()?.body()?;
    Some(body.get_bounding_client_rect().height().ceil())
}

/// Sends `{type: "vramcalc:height", height}` to the parent page (any origin).
pub fn post_height() {
    let (Some(w), Some(height)) = (window(), content_height()) else { return };
    let Ok(Some(parent)) = w.parent() else { return };
    let msg = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&msg, &"type".into(), &"vramcalc:height".into());
    let _ = js_sys::Reflect::set(&msg, &"height".into(), &height.into());
    let _ = parent.post_message(&msg, "*");
}

/// Posts the height now and on every resize of the content (ResizeObserver). Keep the returned
/// observer alive; dropping it disconnects.
pub struct HeightReporter {
    observer: web_sys::ResizeObserver,
    _callback: Closure<dyn FnMut(JsValue)>,
}

impl HeightReporter {
    pub fn start() -> Option<HeightReporter> {
        let body = document()?.body()?;
        let callback = Closure::<dyn FnMut(JsValue)>::new(|_| post_height());
        let observer = web_sys::ResizeObserver::new(callback.as_ref().unchecked_ref()).ok()?;
        observer.observe(&body);
        post_height();
        Some(HeightReporter { observer, _callback: callback })
    }
}

impl Drop for HeightReporter {
    fn drop(&mut self) {
        self.observer.disconnect();
    }
}

/// The `height` of a `vramcalc:height` message, if `e` is one.
pub fn height_message(e: &web_sys::MessageEvent) -> Option<f64> {
    let data = e.data();
    let kind = js_sys::Reflect::get(&data, &"type".into()).ok()?.as_string()?;
    (kind == "vramcalc:height").then(|| js_sys::Reflect::get(&data, &"height".into()).ok()?.as_f64())?
}

/// Opens the blocks around the row at `path` and focuses its handle (a chart's or the peak's link
/// to its layer).
pub fn go_to_row(dispatch: &crate::components::Dispatch, path: String) {
    dispatch.dispatch(crate::state::Action::Reveal(path.clone()));
    focus_row_later(path);
}

/// Focuses the row handle at `path` once the next render has placed it.
pub fn focus_row_later(path: String) {
    gloo::timers::callback::Timeout::new(0, move || {
        let sel = format!("[data-path=\"{path}\"] .row-handle");
        if let Some(el) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.query_selector(&sel).ok().flatten())
            .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
        {
            let _ = el.focus();
        }
    })
    .forget();
}

/// How soon the work after a [`yield_to_page`] should run: `scheduler.postTask`'s priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// A figure the page is waiting for (the fewest GPUs of a multi-GPU job).
    UserVisible,
    /// A list beside the answer (the what-ifs): after any user-visible step that is queued.
    Background,
}

/// Resolves after the page has had its turn (a macrotask: input and rendering go first). Where
/// the browser has `scheduler.postTask` (Chromium, Firefox 142) the next step is queued at
/// `priority`, so the multi-GPU sizing's steps run before the what-ifs' while both are pending
/// (issue 23: the fewest GPUs is the answer a multi-GPU link waits for); elsewhere a `setTimeout`.
pub async fn yield_to_page(priority: Priority) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if !post_task(&resolve, priority) {
            if let Some(w) = window() {
                let _ = w.set_timeout_with_callback(&resolve);
            }
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// `scheduler.postTask(f, { priority })`; `false` where there is no `scheduler.postTask`.
fn post_task(f: &js_sys::Function, priority: Priority) -> bool {
    let Some(w) = window() else { return false };
    let Some(scheduler) = js_sys::Reflect::get(&w, &JsValue::from_str("scheduler")).ok().filter(|s| s.is_object()) else { return false };
    let Some(post) = js_sys::Reflect::get(&scheduler, &JsValue::from_str("postTask")).ok().and_then(|p| p.dyn_into::<js_sys::Function>().ok()) else {
        return false;
    };
    let options = js_sys::Object::new();
    let name = match priority {
        Priority::UserVisible => "user-visible",
        Priority::Background => "background",
    };
    let _ = js_sys::Reflect::set(&options, &JsValue::from_str("priority"), &JsValue::from_str(name));
    post.call2(&scheduler, f, &options).is_ok()
}
