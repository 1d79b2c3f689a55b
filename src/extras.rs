//! The second wasm module (`crates/web-extras`), loaded on first use: the custom-model share-link
//! codec (DEFLATE + base64 of the spec), the Hugging Face `config.json` importer and loading a
//! model from the hub by id (the fetch). The first chart needs none, so they stay out of the main
//! bundle; a preset's link is written by the
//! main bundle itself (`vramcalc_core::share::encode_preset`).
//!
//! Calls are async and exchange JSON text. In the browser the module is fetched once (a failed
//! fetch is retried on the next call); in native builds (tests) the same functions are called
//! directly, so the tests exercise the same JSON interface.

use vramcalc_core::hub::{HubErrorKind, HubFailure, HubLoaded};
use vramcalc_core::share::ShareState;
use vramcalc_core::ModelSpec;

/// The link fragment (without `#`) of any state, custom models included.
pub async fn encode_link(state: &ShareState) -> Result<String, String> {
    let json = serde_json::to_string(state).map_err(|e| e.to_string())?;
    call("encode_link", &[&json]).await
}

/// Any link fragment (`v1.…`) → its state; the error is the decoder's message.
pub async fn decode_link(fragment: &str) -> Result<ShareState, String> {
    let json = call("decode_link", &[fragment]).await?;
    serde_json::from_str(&json).map_err(|e| e.to_string())
}

/// A Hugging Face `config.json` → a vramcalc spec; the error names the missing or unsupported field.
pub async fn import_hf(config_json: &str) -> Result<ModelSpec, String> {
    let json = call("import_hf", &[config_json]).await?;
    ModelSpec::from_json(&json).map_err(|e| e.to_string())
}

/// A model from the Hugging Face hub: `input` is an id, `id@revision` or a hub URL; `token` an
/// access token or empty. The module fetches `config.json` from huggingface.co and imports it.
pub async fn load_hub(input: &str, token: &str) -> Result<HubLoaded, HubFailure> {
    // A failure that is not the module's (the module itself did not load) reads as a network one.
    let reply = hub_call(input, token).await.map_err(|e| HubFailure::from_text(&e))?;
    HubLoaded::from_text(&reply).ok_or_else(|| HubFailure { kind: HubErrorKind::Import, message: "unreadable answer from the module".into() })
}

#[cfg(not(target_arch = "wasm32"))]
async fn hub_call(input: &str, token: &str) -> Result<String, String> {
    call("load_hub", &[input, token]).await
}

#[cfg(not(target_arch = "wasm32"))]
async fn call(name: &str, args: &[&str]) -> Result<String, String> {
    let arg = args.first().copied().unwrap_or_default();
    match name {
        "encode_link" => vramcalc_web_extras::encode_link(arg),
        "decode_link" => vramcalc_web_extras::decode_link(arg),
        "import_hf" => vramcalc_web_extras::import_hf(arg),
        "load_hub" => vramcalc_web_extras::hub::load_hub(arg, args.get(1).copied().unwrap_or_default()),
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

/// `load_hub` returns a promise of its text.
#[cfg(target_arch = "wasm32")]
async fn hub_call(input: &str, token: &str) -> Result<String, String> {
    let promise = js_sys::Promise::from(call_js("load_hub", &[input, token]).await?);
    text(wasm_bindgen_futures::JsFuture::from(promise).await.map_err(|e| message(&e))?)
}

#[cfg(target_arch = "wasm32")]
async fn call(name: &str, args: &[&str]) -> Result<String, String> {
    text(call_js(name, args).await?)
}

/// Calls the module's function `name` (loading the module first).
#[cfg(target_arch = "wasm32")]
async fn call_js(name: &str, args: &[&str]) -> Result<wasm_bindgen::JsValue, String> {
    use wasm_bindgen::{JsCast, JsValue};
    let module = wasm_bindgen_futures::JsFuture::from(load_extras(MODULE_JS))
        .await
        .map_err(|e| format!("could not load {MODULE_JS}: {}", message(&e)))?;
    let function = js_sys::Reflect::get(&module, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| format!("{MODULE_JS} has no `{name}`"))?;
    let arg = |i: usize| JsValue::from_str(args.get(i).copied().unwrap_or_default());
    function.call2(&JsValue::NULL, &arg(0), &arg(1)).map_err(|e| message(&e))
}

#[cfg(target_arch = "wasm32")]
fn text(v: wasm_bindgen::JsValue) -> Result<String, String> {
    v.as_string().ok_or_else(|| format!("{MODULE_JS} returned no text"))
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
