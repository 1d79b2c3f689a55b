//! The app's worker (issue 23, load times): a second wasm module, run in a Web Worker that the app
//! starts on first use (`vramcalc_web::worker`), with the code no PyTorch link needs — the
//! importers (the paste box, a hub model), llama.cpp's estimate and the image/video pipelines'. It answers each request's JSON text
//! (`vramcalc_web::worker::answer`) and says `ready` once it is listening.

#[cfg(target_arch = "wasm32")]
fn main() {
    use wasm_bindgen::{closure::Closure, JsCast};
    let scope: web_sys::DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let reply = scope.clone();
    let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
        let text = e.data().as_string().unwrap_or_default();
        let _ = reply.post_message(&vramcalc_web::worker::answer(&text).into());
    });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    let _ = scope.post_message(&"ready".into());
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-worker is the web app's worker: build it with `bash scripts/build.sh`.");
}
