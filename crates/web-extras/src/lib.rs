//! The web app's second wasm module, loaded right after the first chart (`src/extras.rs` in the
//! app): the share-link codec (DEFLATE, base64, the v1 field format), the preset constructors (all
//! but the default preset's), the full core (every feature but candle) for the models and settings
//! the app's own build leaves out (`analysis`), and the panels it draws into the page and answers
//! itself (`panel.rs`: the LLM setup, the import panel with the Hugging Face hub and the paste
//! box, the downloads). None is needed to draw the first chart, so they stay out of the main
//! bundle.
//!
//! The interface is JSON text both ways (the app already carries serde for its saved state), and
//! every function returns `Err(message)` — a thrown JS string — instead of panicking.

mod analysis;
pub mod export;
#[cfg(target_arch = "wasm32")]
mod export_panel;
pub mod hub;
#[cfg(target_arch = "wasm32")]
mod import_panel;
pub mod llm_answers;
mod llm_form;
#[cfg(target_arch = "wasm32")]
mod llm_panel;
#[cfg(target_arch = "wasm32")]
mod panel;
pub mod paste;

/// The core's error as the lazy route's answers carry it (the app's native tests read it back).
pub use analysis::error_text;
use vramcalc_core::share::{self, ShareState};
use wasm_bindgen::prelude::*;

/// A [`ShareState`] (JSON) → the link fragment, without `#`.
#[wasm_bindgen]
pub fn encode_link(state_json: &str) -> Result<String, String> {
    let state: ShareState = serde_json::from_str(state_json).map_err(|e| format!("share state: {e}"))?;
    share::encode(&state).map_err(|e| e.to_string())
}

/// A link fragment (`v1.…`, with or without `#`) → its [`ShareState`] as JSON.
#[wasm_bindgen]
pub fn decode_link(fragment: &str) -> Result<String, String> {
    let state = share::decode(fragment).map_err(|e| e.to_string())?;
    serde_json::to_string(&state).map_err(|e| e.to_string())
}

/// A hub model's spec (JSON) by id (`id@revision`, as a link's `h=` names it): fetches its
/// `config.json` with the tab's access token, if any; the error is the failure's message (`hub.rs`).
#[cfg_attr(target_arch = "wasm32", wasm_bindgen)]
pub async fn load_hub(id: String) -> Result<String, String> {
    let (_, spec, _) = hub::load(&id, "").await.map_err(|e| e.to_string())?;
    serde_json::to_string(&spec).map_err(|e| e.to_string())
}

/// A preset's spec (JSON) by id (`vgg16`).
#[wasm_bindgen]
pub fn build_preset(id: &str) -> Result<String, String> {
    let spec = vramcalc_core::import::preset(id).map_err(|e| e.to_string())?;
    serde_json::to_string(&spec).map_err(|e| e.to_string())
}

/// The full core's estimate and batch analysis of `{"spec", "config", "capacity"}`:
/// `ok` and `{"estimate", "max_batch", "sweep"}`, or `err` and the error (`analysis.rs`).
#[wasm_bindgen]
pub fn analyse(request_json: &str) -> Result<String, String> {
    analysis::analyse(request_json)
}

/// The setup panel's LLM fields of `{"spec", "config", "dist", "lang", "set"?}` and the settings
/// after `set` (`llm_form.rs`).
#[wasm_bindgen]
pub fn llm_form(request_json: &str) -> Result<String, String> {
    llm_form::llm_form(request_json)
}

/// Draws the setup panel's LLM controls for `{"host", "spec", "config", "dist", "lang"}` into the
/// page's element `host` and answers their changes (`llm_panel.rs`).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
pub fn render_llm(request_json: &str) -> Result<String, String> {
    let host: serde_json::Value = serde_json::from_str(request_json).map_err(|e| e.to_string())?;
    llm_panel::render(host["host"].as_str().unwrap_or_default(), request_json).map(|()| String::new())
}

/// Draws the downloads panel for `{"host", "lang", "spec", "config", "dist"?}` into the page's
/// element `host` (when the page has it) and answers its buttons (`export_panel.rs`).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
pub fn render_exports(request_json: &str) -> Result<String, String> {
    export_panel::render(request_json).map(|()| String::new())
}

/// Draws the import panel (Hugging Face model id, paste box) for `{"host", "lang"}` into the
/// page's element `host` and answers it (`import_panel.rs`).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
pub fn render_import(request_json: &str) -> Result<String, String> {
    let r: serde_json::Value = serde_json::from_str(request_json).map_err(|e| e.to_string())?;
    import_panel::render(r["host"].as_str().unwrap_or_default(), r["lang"].as_str().unwrap_or_default()).map(|()| String::new())
}

/// The full core's what-ifs of `{"spec", "config"}`: `ok` and `[what-if, …]`, or `err` and the error.
#[wasm_bindgen]
pub fn what_ifs(request_json: &str) -> Result<String, String> {
    analysis::what_ifs(request_json)
}


/// For native tests, here and in the app's (which call this module's functions directly).
#[cfg(not(target_arch = "wasm32"))]
pub mod test_util {
    /// Runs a future that never waits on anything outside it (no fetch, no timer) to the end.
    pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
