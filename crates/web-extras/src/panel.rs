//! What the panels this module draws into the app's page share: the document, replacing a host's
//! content without losing the focus, and telling the app about a change (a bubbling custom event
//! on the host whose `detail` is JSON text).

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

pub fn document() -> Option<web_sys::Document> {
    web_sys::window()?.document()
}

/// The page's element `id`.
pub fn element(id: &str) -> Result<web_sys::Element, String> {
    document().and_then(|d| d.get_element_by_id(id)).ok_or_else(|| format!("no element `{id}`"))
}

/// Replaces the host's content with `html` (when it differs), focusing the control that had the
/// focus again.
pub fn draw(host: &web_sys::Element, html: &str) {
    if host.inner_html() == html {
        return;
    }
    let focused = document().and_then(|d| d.active_element()).map(|e| e.id()).filter(|id| !id.is_empty());
    host.set_inner_html(html);
    if let Some(el) = focused.and_then(|id| document()?.get_element_by_id(&id)).and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok()) {
        let _ = el.focus();
    }
}

/// Dispatches the bubbling event `name` with `detail` (JSON text) on `host`, for the app.
pub fn emit(host: &web_sys::Element, name: &str, detail: &str) {
    let init = web_sys::CustomEventInit::new();
    init.set_bubbles(true);
    init.set_detail(&JsValue::from_str(detail));
    if let Ok(event) = web_sys::CustomEvent::new_with_event_init_dict(name, &init) {
        let _ = host.dispatch_event(&event);
    }
}

/// Listens for `event` on `host` with `f` for as long as the page lives (once per host and event).
pub fn listen(host: &web_sys::Element, event: &str, f: fn(web_sys::Event)) {
    let key = format!("data-listens-{event}");
    if host.has_attribute(&key) {
        return;
    }
    let callback = Closure::<dyn Fn(web_sys::Event)>::new(f);
    if host.add_event_listener_with_callback(event, callback.as_ref().unchecked_ref()).is_ok() {
        let _ = host.set_attribute(&key, "");
        // The host lives as long as the page: so does its listener.
        callback.forget();
    }
}

/// The target element of `e`, and its attribute `name`.
pub fn target_with(e: &web_sys::Event, name: &str) -> Option<(web_sys::Element, String)> {
    let el = e.target()?.dyn_into::<web_sys::Element>().ok()?;
    let value = el.get_attribute(name)?;
    Some((el, value))
}

/// A form control's current value (`value` of an input, select or textarea).
pub fn value_of(el: &JsValue) -> String {
    js_sys::Reflect::get(el, &"value".into()).ok().and_then(|v| v.as_string()).unwrap_or_default()
}
