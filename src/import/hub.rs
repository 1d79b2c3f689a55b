//! Loading a model from the Hugging Face hub by id, in the browser: parse what the user typed
//! ([`vramcalc_core::hub::HubRef::parse`]), fetch `config.json` from huggingface.co (no server of
//! ours), import it (in the app's worker, `crate::worker`). The request:
//!
//! - goes only to `https://huggingface.co/<id>/resolve/<revision>/config.json`;
//! - sends no referrer (`referrerPolicy: "no-referrer"`) and no cookies (`credentials: "omit"`);
//! - carries `Authorization: Bearer <token>` only when the user gave a token (a browser drops it
//!   if the hub ever redirected to another origin);
//! - is aborted after [`TIMEOUT_SECS`] (an `AbortController`).
//!
//! A failure is a [`HubError`]: its kind tells the import panel what to offer (a token field, a
//! retry, the JSON paste).

use vramcalc_core::hub::{check_status, HubError, HubRef};
#[cfg(target_arch = "wasm32")]
use vramcalc_core::hub::TIMEOUT_SECS;
use vramcalc_core::spec::ModelSpec;

/// `input` (an id, `id@revision` or a hub URL) → where it is, the model's spec (named by its id)
/// the context and the dtype its config gives. `token`: one the user just typed, kept for this tab
/// ([`remember_token`]); empty: the tab's token, if any.
pub async fn load(input: &str, token: &str) -> Result<(HubRef, ModelSpec, Option<u64>, Option<String>), HubError> {
    let hub = HubRef::parse(input)?;
    let token = token_for(token);
    // the worker imports the config: its wasm loads while the config is fetched
    crate::worker::warm_up();
    let (status, body) = fetch(&hub.config_url(), &token).await?;
    // the status first: a refusal needs no worker
    check_status(&hub, status, !token.is_empty())?;
    let (context, dtype) = (super::paste::context_of(&body), super::paste::dtype_of(&body));
    let spec = import(&hub, status, body, !token.is_empty()).await?;
    Ok((hub, spec, context, dtype))
}

/// The hub's answer imported by the app's worker (`vramcalc_core::hub::read_answer`: the
/// importer is not in the app's bundle); a failed worker is a [`HubError::Import`].
async fn import(hub: &HubRef, status: u16, body: String, with_token: bool) -> Result<ModelSpec, HubError> {
    use crate::worker::{call, unexpected, Request, Response};
    let failed = |message: String| HubError::Import { id: hub.to_string(), message };
    match call(Request::HubConfig { hub: hub.clone(), status, body, with_token }).await.map_err(failed)? {
        Response::HubConfig(r) => r,
        other => Err(failed(unexpected("the hub's config", other))),
    }
}

/// The token a request sends: `typed` (kept for this tab), or when empty the tab's, if any.
pub(crate) fn token_for(typed: &str) -> String {
    match typed.trim() {
        "" => session_token(),
        typed => {
            remember_token(typed);
            typed.to_string()
        }
    }
}

/// The `sessionStorage` key of the access token: this tab only, gone when it closes, never in
/// a link, an export or the saved work.
#[cfg(target_arch = "wasm32")]
const TOKEN_KEY: &str = "vramcalc-hf-token";

#[cfg(target_arch = "wasm32")]
fn session() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok()?
}

/// The token this tab was given, or empty.
#[cfg(target_arch = "wasm32")]
fn session_token() -> String {
    session().and_then(|s| s.get_item(TOKEN_KEY).ok().flatten()).unwrap_or_default()
}

#[cfg(target_arch = "wasm32")]
fn remember_token(token: &str) {
    if let Some(s) = session() {
        let _ = s.set_item(TOKEN_KEY, token);
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn session_token() -> String {
    String::new()
}

#[cfg(not(target_arch = "wasm32"))]
fn remember_token(_token: &str) {}

/// A `GET` of `url` as text (`config.json`).
pub(crate) async fn fetch(url: &str, token: &str) -> Result<(u16, String), HubError> {
    let (status, body) = fetch_bytes(url, token, None).await?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Outside the browser there is no fetch: the native tests get a network failure.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) async fn fetch_bytes(_url: &str, _token: &str, _range: Option<(u64, u64)>) -> Result<(u16, Vec<u8>), HubError> {
    Err(HubError::Network("no network outside the browser".into()))
}

/// A `GET` of `url` (bytes `start..end` of it with `range`), as the module's doc says.
#[cfg(target_arch = "wasm32")]
pub(crate) async fn fetch_bytes(url: &str, token: &str, range: Option<(u64, u64)>) -> Result<(u16, Vec<u8>), HubError> {
    use wasm_bindgen::{closure::Closure, JsCast, JsValue};
    use wasm_bindgen_futures::JsFuture;
    use web_sys::{AbortController, Headers, ReferrerPolicy, RequestCredentials, RequestInit, RequestMode, Response};
    let net = |e: JsValue| {
        let name = js_sys::Reflect::get(&e, &"name".into()).ok().and_then(|n| n.as_string()).unwrap_or_default();
        if name == "AbortError" {
            HubError::Timeout
        } else {
            let m = js_sys::Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string());
            HubError::Network(m.or_else(|| e.as_string()).unwrap_or_else(|| "the request failed".into()))
        }
    };
    let window = web_sys::window().ok_or_else(|| HubError::Network("no window".into()))?;
    let init = RequestInit::new();
    init.set_method("GET");
    init.set_mode(RequestMode::Cors);
    init.set_credentials(RequestCredentials::Omit);
    init.set_referrer_policy(ReferrerPolicy::NoReferrer);
    let headers = Headers::new().map_err(net)?;
    if !token.is_empty() {
        headers.set("Authorization", &format!("Bearer {token}")).map_err(net)?;
    }
    if let Some((start, end)) = range {
        headers.set("Range", &format!("bytes={start}-{}", end.saturating_sub(1))).map_err(net)?;
    }
    init.set_headers(&headers);
    let controller = AbortController::new().map_err(net)?;
    init.set_signal(Some(&controller.signal()));
    let abort = Closure::once_into_js(move || controller.abort());
    let timer = window
        .set_timeout_with_callback_and_timeout_and_arguments_0(abort.unchecked_ref(), (TIMEOUT_SECS * 1000) as i32)
        .map_err(net)?;
    let result = async {
        let response: Response = JsFuture::from(window.fetch_with_str_and_init(url, &init)).await.map_err(net)?.unchecked_into();
        let body = JsFuture::from(response.array_buffer().map_err(net)?).await.map_err(net)?;
        Ok((response.status(), js_sys::Uint8Array::new(&body).to_vec()))
    }
    .await;
    window.clear_timeout_with_handle(timer);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;
    use vramcalc_core::hub::HubErrorKind;

    #[test]
    fn an_invalid_id_is_refused_before_any_request() {
        assert_eq!(block_on(load("not an id!", "")).unwrap_err().kind(), HubErrorKind::Invalid);
        assert_eq!(block_on(load("Qwen/Qwen2.5-0.5B", "")).unwrap_err().kind(), HubErrorKind::Network);
    }
}
