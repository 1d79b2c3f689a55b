//! The second wasm module (`crates/web-extras`), loaded on first use: the custom-model share-link
//! codec (DEFLATE + base64 of the spec), the Hugging Face `config.json` importer, the preset
//! constructors other than the default preset's, the paste box's reader, the CSV/JSON downloads
//! and the full core for what the app's build leaves out (the lazy route, [`crate::lazy`]). The
//! first chart needs none of them, so they stay out of the main bundle; a preset's link is written
//! by the main bundle itself (`vramcalc_core::share::encode_preset`).
//!
//! Calls are async and exchange JSON text. In the browser the module is fetched once (a failed
//! fetch is retried on the next call); in native builds (tests) the same functions are called
//! directly, so the tests exercise the same JSON interface.

use vramcalc_core::share::ShareState;
use vramcalc_core::ModelSpec;

/// The link fragment (without `#`) of any state, custom models included.
pub async fn encode_link(state: &ShareState) -> Result<String, String> {
    let json = serde_json::to_string(state).map_err(|e| e.to_string())?;
    call("encode_link", &json).await
}

/// Any link fragment (`v1.…`) → its state; the error is the decoder's message.
pub async fn decode_link(fragment: &str) -> Result<ShareState, String> {
    let json = call("decode_link", fragment).await?;
    serde_json::from_str(&json).map_err(|e| e.to_string())
}

/// A Hugging Face `config.json` → a vramcalc spec; the error names the missing or unsupported field.
pub async fn import_hf(config_json: &str) -> Result<ModelSpec, String> {
    let json = call("import_hf", config_json).await?;
    ModelSpec::from_json(&json).map_err(|e| e.to_string())
}

/// A preset's spec by id; the error is the module's (unknown id, module not loaded).
pub async fn preset(id: &str) -> Result<ModelSpec, String> {
    let json = call("build_preset", id).await?;
    ModelSpec::from_json(&json).map_err(|e| e.to_string())
}

/// The full core's batch analysis (JSON request and answer, [`crate::lazy`]).
pub async fn analyse(request_json: &str) -> Result<String, String> {
    call("analyse", request_json).await
}

/// The full core's what-ifs (JSON request and answer, [`crate::lazy`]).
pub async fn what_ifs(request_json: &str) -> Result<String, String> {
    call("what_ifs", request_json).await
}

/// A CSV or JSON download's text (`{"spec", "config", "format"}`).
pub async fn export_file(request_json: &str) -> Result<String, String> {
    call("export_file", request_json).await
}

/// The paste box's text → `spec` or `hf`, a newline and the spec's JSON (checked with the full core).
pub async fn read_paste(text: &str) -> Result<String, String> {
    call("read_paste", text).await
}

#[cfg(not(target_arch = "wasm32"))]
async fn call(name: &str, arg: &str) -> Result<String, String> {
    match name {
        "encode_link" => vramcalc_web_extras::encode_link(arg),
        "decode_link" => vramcalc_web_extras::decode_link(arg),
        "import_hf" => vramcalc_web_extras::import_hf(arg),
        "build_preset" => vramcalc_web_extras::build_preset(arg),
        "analyse" => vramcalc_web_extras::analyse(arg),
        "what_ifs" => vramcalc_web_extras::what_ifs(arg),
        "export_file" => vramcalc_web_extras::export_file(arg),
        "read_paste" => vramcalc_web_extras::read_paste(arg),
        other => Err(format!("no extras function `{other}`")),
    }
}

/// File name Trunk gives the module's JS (a `data-type="worker"` asset: not hashed).
#[cfg(target_arch = "wasm32")]
const MODULE_JS: &str = "vramcalc-web-extras.js";

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
let loading;
export function load_extras(file) {
  if (!loading) {
    const url = new URL(file, document.baseURI).href;
    loading = import(url).then(async (m) => { await m.default(); return m; });
    loading.catch(() => { loading = undefined; });
  }
  return loading;
}
"#)]
extern "C" {
    /// The module's namespace once it is fetched and instantiated (one fetch per page).
    fn load_extras(file: &str) -> js_sys::Promise;
}

#[cfg(target_arch = "wasm32")]
async fn call(name: &str, arg: &str) -> Result<String, String> {
    use wasm_bindgen::{JsCast, JsValue};
    let module = wasm_bindgen_futures::JsFuture::from(load_extras(MODULE_JS))
        .await
        .map_err(|e| format!("could not load {MODULE_JS}: {}", message(&e)))?;
    let function = js_sys::Reflect::get(&module, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| format!("{MODULE_JS} has no `{name}`"))?;
    let out = function.call1(&JsValue::NULL, &JsValue::from_str(arg)).map_err(|e| message(&e))?;
    out.as_string().ok_or_else(|| format!("{MODULE_JS}: `{name}` returned no text"))
}

/// A thrown value's text: the module throws strings; a failed `import()` throws an `Error`.
#[cfg(target_arch = "wasm32")]
fn message(e: &wasm_bindgen::JsValue) -> String {
    e.as_string()
        .or_else(|| js_sys::Reflect::get(e, &"message".into()).ok().and_then(|m| m.as_string()))
        .unwrap_or_else(|| "unknown error".into())
}

/// Runs a future that never waits (native calls above) to completion: for native tests.
#[cfg(not(target_arch = "wasm32"))]
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}
