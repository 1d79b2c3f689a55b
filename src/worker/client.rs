//! The app's side of the worker in the browser: one `Worker` (the module script `worker.js`,
//! which loads `src/bin/worker.rs`'s bundle), started on the first request. Requests wait in a
//! queue until the worker says `ready`; each answer settles its request's promise by id. If the
//! worker fails (its wasm did not load, or it stopped), every waiting request gets the error and
//! the next request starts a new worker.

use super::{read_answer, Envelope, Request, Response};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::{closure::Closure, JsCast, JsValue};
use web_sys::{MessageEvent, Worker, WorkerOptions, WorkerType};

/// The worker's module script beside `index.html` (`static/worker.js`).
const SCRIPT: &str = "worker.js";

struct Client {
    worker: Worker,
    ready: bool,
    /// Requests sent before `ready`.
    queue: Vec<String>,
    /// Each waiting request's promise: resolve (with the answer's text) and reject.
    waiting: HashMap<u64, (js_sys::Function, js_sys::Function)>,
    next: u64,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

thread_local! {
    static CLIENT: RefCell<Option<Rc<RefCell<Client>>>> = const { RefCell::new(None) };
}

fn start() -> Result<Rc<RefCell<Client>>, String> {
    let opts = WorkerOptions::new();
    opts.set_type(WorkerType::Module);
    let url = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.base_uri().ok().flatten())
        .and_then(|base| web_sys::Url::new_with_base(SCRIPT, &base).ok())
        .map_or_else(|| SCRIPT.to_string(), |u| u.href());
    let worker = Worker::new_with_options(&url, &opts).map_err(|e| format!("could not start the worker: {}", js_text(&e)))?;
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(|e: MessageEvent| on_message(e.data().as_string().unwrap_or_default()));
    let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(|e: web_sys::Event| {
        let m = js_sys::Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string()).unwrap_or_else(|| "it did not load".into());
        fail(&format!("the worker stopped: {m}"));
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    Ok(Rc::new(RefCell::new(Client { worker, ready: false, queue: Vec::new(), waiting: HashMap::new(), next: 1, _on_message: on_message, _on_error: on_error })))
}

fn js_text(e: &JsValue) -> String {
    js_sys::Reflect::get(e, &"message".into()).ok().and_then(|m| m.as_string()).or_else(|| e.as_string()).unwrap_or_else(|| "unknown error".into())
}

fn client() -> Result<Rc<RefCell<Client>>, String> {
    if let Some(c) = CLIENT.with(|c| c.borrow().clone()) {
        return Ok(c);
    }
    let c = start()?;
    CLIENT.with(|slot| *slot.borrow_mut() = Some(c.clone()));
    Ok(c)
}

/// Starts the worker if it is not running.
pub fn warm_up() {
    let _ = client();
}

fn on_message(text: String) {
    let Some(c) = CLIENT.with(|c| c.borrow().clone()) else { return };
    if text == "ready" {
        let (worker, queue) = {
            let mut c = c.borrow_mut();
            c.ready = true;
            (c.worker.clone(), std::mem::take(&mut c.queue))
        };
        for t in queue {
            let _ = worker.post_message(&t.into());
        }
        return;
    }
    let id = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v.get("id")?.as_u64()).unwrap_or(0);
    let settle = c.borrow_mut().waiting.remove(&id);
    if let Some((resolve, _)) = settle {
        let _ = resolve.call1(&JsValue::NULL, &text.into());
    }
}

/// Rejects every waiting request and drops the worker: the next request starts a new one.
fn fail(message: &str) {
    let Some(c) = CLIENT.with(|c| c.borrow_mut().take()) else { return };
    let waiting: Vec<_> = c.borrow_mut().waiting.drain().collect();
    c.borrow().worker.terminate();
    for (_, (_, reject)) in waiting {
        let _ = reject.call1(&JsValue::NULL, &message.into());
    }
}

pub async fn call(r: Request) -> Result<Response, String> {
    let c = client()?;
    let id = {
        let mut c = c.borrow_mut();
        c.next += 1;
        c.next
    };
    let text = serde_json::to_string(&Envelope { id, body: r }).map_err(|e| e.to_string())?;
    let promise = js_sys::Promise::new(&mut |resolve, reject| {
        let mut c = c.borrow_mut();
        c.waiting.insert(id, (resolve, reject));
        if c.ready {
            let _ = c.worker.post_message(&text.clone().into());
        } else {
            c.queue.push(text.clone());
        }
    });
    let answer = wasm_bindgen_futures::JsFuture::from(promise).await.map_err(|e| e.as_string().unwrap_or_else(|| js_text(&e)))?;
    read_answer(&answer.as_string().unwrap_or_default()).map(|e| e.body)
}
