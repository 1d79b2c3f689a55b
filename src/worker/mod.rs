//! The app's worker (issue 23, load times): the code no PyTorch link needs — the importers first —
//! runs in a second wasm module, `src/bin/worker.rs`, in a Web Worker the app starts on first use
//! ([`call`]), so the app's own bundle, which every link loads, leaves it out. The two talk in
//! typed requests and answers, the core's own types ([`Request`], [`Response`]), sent as JSON
//! text over `postMessage`, each request with an id its answer carries ([`Envelope`]).
//!
//! [`answer`] is the worker's side: one request's text → its answer's text. Natively (the app's
//! tests) [`call`] runs it in place, through the same JSON text, so the tests cover what crosses.

#[cfg(target_arch = "wasm32")]
mod client;

use crate::import::paste::{self, Pasted};
use serde::{Deserialize, Serialize};
use vramcalc_core::hub::{HubError, HubRef};
use vramcalc_core::spec::ModelSpec;

/// What the app asks the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// The paste box's text: a vramcalc spec or a Hugging Face `config.json`
    /// (`crate::import::paste::read_now`).
    ReadPaste { text: String },
    /// The hub's answer to `hub`'s `config.json` (the app fetched it: the token is the tab's,
    /// the worker never sees it): `vramcalc_core::hub::read_answer`.
    HubConfig { hub: HubRef, status: u16, body: String, with_token: bool },
}

/// The worker's answer to a [`Request`] of the same name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    ReadPaste(Result<Pasted, String>),
    HubConfig(Result<ModelSpec, HubError>),
    /// The request could not be read (a worker of another build, say): the message says what.
    Refused(String),
}

/// A request or an answer on the wire: the answer carries its request's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub id: u64,
    pub body: T,
}

/// Computes a request's answer (the worker's side; natively, the app's too).
pub fn handle(r: Request) -> Response {
    match r {
        Request::ReadPaste { text } => Response::ReadPaste(paste::read_now(&text)),
        Request::HubConfig { hub, status, body, with_token } => Response::HubConfig(vramcalc_core::hub::read_answer(&hub, status, &body, with_token)),
    }
}

/// One request's JSON text ([`Envelope`] of a [`Request`]) → its answer's ([`Envelope`] of a
/// [`Response`]). A text that is no request is answered [`Response::Refused`] (id 0 when even
/// the id is unreadable), never a panic.
pub fn answer(text: &str) -> String {
    let out = match serde_json::from_str::<Envelope<Request>>(text) {
        Ok(e) => Envelope { id: e.id, body: handle(e.body) },
        Err(err) => {
            let id = serde_json::from_str::<serde_json::Value>(text).ok().and_then(|v| v.get("id")?.as_u64()).unwrap_or(0);
            Envelope { id, body: Response::Refused(format!("the worker could not read the request: {err}")) }
        }
    };
    // every answer is plain data (strings, numbers, the core's specs): it serialises
    serde_json::to_string(&out).unwrap_or_else(|e| format!(r#"{{"id":{},"body":{{"Refused":"{}"}}}}"#, out.id, e.to_string().replace('"', "'")))
}

/// Reads an answer's text (the app's side).
fn read_answer(text: &str) -> Result<Envelope<Response>, String> {
    serde_json::from_str(text).map_err(|e| format!("the worker's answer could not be read: {e}"))
}

/// Asks the worker (started on first use) and waits for its answer. The error is the transport's
/// (the worker failed to load or stopped): the caller shows it.
#[cfg(target_arch = "wasm32")]
pub async fn call(r: Request) -> Result<Response, String> {
    client::call(r).await
}

/// Natively there is no worker: the request runs here, through the same JSON text.
#[cfg(not(target_arch = "wasm32"))]
pub async fn call(r: Request) -> Result<Response, String> {
    let text = serde_json::to_string(&Envelope { id: 1, body: r }).map_err(|e| e.to_string())?;
    read_answer(&answer(&text)).map(|e| e.body)
}

/// The answer `what` expected was another kind: a worker of another build.
pub fn unexpected(what: &str, r: Response) -> String {
    match r {
        Response::Refused(m) => m,
        other => format!("the worker answered {what} with another kind of answer: {other:?}").chars().take(200).collect(),
    }
}

/// Starts the worker now (a page that will need it soon, such as a hub model's link): its wasm
/// loads while the page does other work. Natively nothing.
pub fn warm_up() {
    #[cfg(target_arch = "wasm32")]
    client::warm_up();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;

    #[test]
    fn a_request_crosses_as_text_and_its_answer_comes_back() {
        let spec = vramcalc_core::presets::build("vgg11").unwrap();
        let r = block_on(call(Request::ReadPaste { text: spec.to_json_pretty() })).unwrap();
        assert_eq!(r, Response::ReadPaste(Ok(Pasted::Spec(spec))));
        let hub = HubRef::parse("Qwen/Qwen2.5-0.5B").unwrap();
        let r = block_on(call(Request::HubConfig { hub: hub.clone(), status: 404, body: String::new(), with_token: false })).unwrap();
        assert_eq!(r, Response::HubConfig(Err(HubError::NotFound(hub.to_string()))));
    }

    #[test]
    fn a_text_that_is_no_request_is_refused_by_id() {
        let a = read_answer(&answer(r#"{"id": 7, "body": {"NoSuchRequest": {}}}"#)).unwrap();
        assert_eq!(a.id, 7);
        assert!(matches!(a.body, Response::Refused(m) if m.contains("could not read")));
        assert!(matches!(read_answer(&answer("not json")).unwrap().body, Response::Refused(_)));
    }
}
