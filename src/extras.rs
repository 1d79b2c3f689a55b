//! The second wasm module (`crates/web-extras`), loaded on first use: the custom-model share-link
//! codec (DEFLATE + base64 of the spec) and the LLM settings' links, the preset constructors other
//! than the default preset's, the full core for what the app's build leaves out (the lazy route,
//! [`crate::lazy`]), and the panels it draws into the page itself (the LLM setup, the import panel
//! with the Hugging Face hub and the paste box, the downloads: `components::panels`). The
//! first chart needs none of them, so they stay out of the main bundle; a preset's link is written
//! by the main bundle itself (`vramcalc_core::share::encode_preset`).
//!
//! Calls are async and exchange JSON text. In the browser the module is fetched once (a failed
//! fetch is retried on the next call); in native builds (tests) the same functions are called
//! directly, so the tests exercise the same JSON interface.

use serde_json::{Map, Value};
use vramcalc_core::share::ShareState;
use vramcalc_core::ModelSpec;

/// The link fragment (without `#`) of any state, custom models and the LLM settings (`llm`,
/// `Model::llm`: the config's `finetune`, `generate`, `weights`, the state's `dist`) included.
pub async fn encode_link(state: &ShareState, llm: &Map<String, Value>) -> Result<String, String> {
    let mut json = serde_json::to_string(state).map_err(|e| e.to_string())?;
    if !llm.is_empty() {
        let mut v: Value = serde_json::from_str(&json).map_err(|e| e.to_string())?;
        for (key, value) in llm {
            let at = if key == "dist" { &mut v } else { &mut v["config"] };
            if let Value::Object(m) = at {
                m.insert(key.clone(), value.clone());
            }
        }
        json = v.to_string();
    }
    call("encode_link", &json).await
}

/// Any link fragment (`v1.…`) → its state and its LLM settings (as [`encode_link`] takes them);
/// the error is the decoder's message.
pub async fn decode_link(fragment: &str) -> Result<(ShareState, Map<String, Value>), String> {
    let json = call("decode_link", fragment).await?;
    let mut v: Value = serde_json::from_str(&json).map_err(|e| e.to_string())?;
    let mut llm = Map::new();
    for key in ["finetune", "generate", "weights", "dist"] {
        let from = if key == "dist" { &mut v } else { &mut v["config"] };
        if let Some(value) = from.as_object_mut().and_then(|m| m.remove(key)) {
            llm.insert(key.into(), value);
        }
    }
    let state = serde_json::from_str(&v.to_string()).map_err(|e| e.to_string())?;
    Ok((state, llm))
}


/// A preset's spec by id; the error is the module's (unknown id, module not loaded).
pub async fn preset(id: &str) -> Result<ModelSpec, String> {
    spec_of("build_preset", id).await
}

/// A Hugging Face model's spec by id (`id@revision`), its config fetched again by the module with
/// the tab's access token; the error is the fetch's message.
pub async fn hub_model(id: &str) -> Result<ModelSpec, String> {
    spec_of("load_hub", id).await
}

async fn spec_of(function: &str, arg: &str) -> Result<ModelSpec, String> {
    ModelSpec::from_json(&call(function, arg).await?).map_err(|e| e.to_string())
}

/// The full core's batch analysis (JSON request and answer, [`crate::lazy`]).
pub async fn analyse(request_json: &str) -> Result<String, String> {
    call("analyse", request_json).await
}

/// Has the module draw one of its panels into the page (`render_llm`, `render_import`:
/// `components::panels`).
pub async fn render_panel(render: &str, request_json: &str) -> Result<String, String> {
    call(render, request_json).await
}

/// The full core's what-ifs (JSON request and answer, [`crate::lazy`]).
pub async fn what_ifs(request_json: &str) -> Result<String, String> {
    call("what_ifs", request_json).await
}


#[cfg(not(target_arch = "wasm32"))]
async fn call(name: &str, arg: &str) -> Result<String, String> {
    match name {
        "encode_link" => vramcalc_web_extras::encode_link(arg),
        "decode_link" => vramcalc_web_extras::decode_link(arg),
        "build_preset" => vramcalc_web_extras::build_preset(arg),
        "load_hub" => vramcalc_web_extras::load_hub(arg.to_string()).await,
        "analyse" => vramcalc_web_extras::analyse(arg),
        "what_ifs" => vramcalc_web_extras::what_ifs(arg),
        // no page to draw into: the request is checked
        "render_llm" => vramcalc_web_extras::llm_form(arg).map(|_| String::new()),
        "render_import" | "render_exports" => serde_json::from_str::<Value>(arg).map(|_| String::new()).map_err(|e| e.to_string()),
        other => Err(format!("no extras function `{other}`")),
    }
}

/// File name Trunk gives the module's JS (a `data-type="worker"` asset: not hashed).
#[cfg(target_arch = "wasm32")]
const MODULE_JS: &str = "vramcalc-web-extras.js";

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
let loading;
function load_extras(file) {
  if (!loading) {
    const url = new URL(file, document.baseURI).href;
    loading = import(url).then(async (m) => { await m.default(); return m; });
    loading.catch(() => { loading = undefined; });
  }
  return loading;
}
export async function call_extras(file, name, arg) {
  let m;
  try { m = await load_extras(file); } catch (e) { throw `could not load ${file}: ${e?.message ?? e}`; }
  if (typeof m[name] !== 'function') throw `${file} has no \`${name}\``;
  const out = await m[name](arg);
  if (typeof out !== 'string') throw `${file}: \`${name}\` returned no text`;
  return out;
}
"#)]
extern "C" {
    /// The module's function `name` called with `arg`, awaited if it is async (`load_hub`); the
    /// module is fetched and instantiated once per page (a failed fetch is retried next time).
    fn call_extras(file: &str, name: &str, arg: &str) -> js_sys::Promise;
}

#[cfg(target_arch = "wasm32")]
async fn call(name: &str, arg: &str) -> Result<String, String> {
    let out = wasm_bindgen_futures::JsFuture::from(call_extras(MODULE_JS, name, arg)).await;
    out.map(|v| v.as_string().unwrap_or_default()).map_err(|e| {
        // the module throws strings; a failed call throws an `Error`
        e.as_string()
            .or_else(|| js_sys::Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string()))
            .unwrap_or_else(|| "unknown error".into())
    })
}

/// Runs a future that never waits (native calls above) to completion: for native tests.
#[cfg(not(target_arch = "wasm32"))]
pub use vramcalc_web_extras::test_util::block_on;
