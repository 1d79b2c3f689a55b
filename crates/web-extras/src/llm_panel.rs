//! The LLM panel's controls in the page: this module draws [`crate::llm_form`]'s HTML into the
//! app's host element and answers their `change` events itself, so none of it is in the app's
//! first-load bundle. A valid change reaches the app as a `vramcalc-llm` event on the host whose
//! `detail` is the new settings (JSON text); the app stores them (`Model::llm`) and asks for the
//! panel again. A rejected value is shown in the panel, naming the field, and changes nothing.

use crate::llm_form::{escape, llm_form};
use crate::panel::{draw, element, emit, listen, target_with, value_of};
use serde_json::Value;
use std::cell::{Cell, RefCell};

thread_local! {
    /// The host's id and the request the panel now shows (a change is applied to it).
    static SHOWN: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
    /// Panels drawn so far: a job's sizing stops when a newer panel is drawn.
    static DRAWN: Cell<u64> = const { Cell::new(0) };
}

/// Draws the panel of `request_json` (`llm_form`'s request, without `set`) into the element
/// `host_id`.
pub fn render(host_id: &str, request_json: &str) -> Result<(), String> {
    let answer: Value = serde_json::from_str(&llm_form(request_json)?).map_err(|e| e.to_string())?;
    let host = element(host_id)?;
    SHOWN.with(|s| *s.borrow_mut() = Some((host_id.to_string(), request_json.to_string())));
    draw(&host, answer["html"].as_str().unwrap_or_default());
    listen(&host, "change", on_change);
    listen(&host, "click", on_click);
    let drawn = DRAWN.with(|d| d.get() + 1);
    DRAWN.with(|d| d.set(drawn));
    if let Some(slot) = host.query_selector("[data-testid=gpu-answers]").ok().flatten() {
        let r = crate::llm_form::request(request_json)?;
        wasm_bindgen_futures::spawn_local(async move {
            let html = crate::llm_answers::gpus(&r.spec, &r.config, &r.dist, r.capacity, r.unit, r.zh, yield_to_page, || DRAWN.with(|d| d.get()) != drawn).await;
            if let Some(html) = html {
                slot.set_inner_html(&html);
            }
        });
    }
    Ok(())
}

/// Resolves after the page has had its turn (a macrotask: input and rendering go first).
async fn yield_to_page() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback(&resolve);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// A what-if's "Apply": its `data-apply` is the settings it gives.
fn on_click(e: web_sys::Event) {
    let Some((_, settings)) = target_with(&e, "data-apply") else { return };
    let Some((host_id, _)) = SHOWN.with(|s| s.borrow().clone()) else { return };
    if let Ok(host) = element(&host_id) {
        emit(&host, "vramcalc-llm", &settings);
    }
}

/// A control changed: its `data-llm` names the field, its value (or a checkbox's `data-next`) is
/// the new text.
fn on_change(e: web_sys::Event) {
    let Some((el, field)) = target_with(&e, "data-llm") else { return };
    let text = el.get_attribute("data-next").unwrap_or_else(|| value_of(&el));
    let Some((host_id, request)) = SHOWN.with(|s| s.borrow().clone()) else { return };
    let Ok(host) = element(&host_id) else { return };
    let answer = serde_json::from_str::<Value>(&request)
        .map_err(|e| e.to_string())
        .and_then(|mut r| {
            r["set"] = serde_json::json!({ "field": field, "value": text });
            llm_form(&r.to_string())
        })
        .and_then(|a| serde_json::from_str::<Value>(&a).map_err(|e| e.to_string()));
    let message = match answer {
        Ok(a) if a["error"].is_null() => return emit(&host, "vramcalc-llm", &a["llm"].to_string()),
        Ok(a) => a["error"]["message"].as_str().unwrap_or_default().to_string(),
        Err(e) => e,
    };
    if let Some(old) = host.query_selector("[data-testid=llm-error]").ok().flatten() {
        old.remove();
    }
    let error = format!(r#"<p class="error small llm-error" role="alert" data-testid="llm-error">{}: {}</p>"#, escape(&field), escape(&message));
    let _ = host.insert_adjacent_html("beforeend", &error);
}
