//! The llama.cpp panel's requests (issue 23, load times): its answer (`crate::local::answer`:
//! llama.cpp's buffers per device, the largest context, the most GPU layers) and which
//! `llama-quantize` types fit (`crate::local::quant_fit`) are computed in the worker, so the app's
//! bundle leaves out llama.cpp's graph, allocator and scheduler.
//!
//! A GGUF header can be megabytes (a tokenizer's vocabulary): it crosses once. The app names each
//! header by a key ([`key_of`]); the worker keeps the last few by key and answers
//! [`Response::NeedHeader`] for one it does not have (a new header, or a restarted worker), and
//! the app asks again with the header.

use super::{call, unexpected, Request, Response};
use crate::local::Answer;
use crate::state::local::{GgufSource, LocalSettings};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use vramcalc_core::gguf::Header;

/// Headers either side keeps (the panel shows one model at a time).
const KEPT: usize = 2;

thread_local! {
    /// The app's side: the headers it named, held so that a key never names another header.
    static NAMED: RefCell<Vec<(Rc<Header>, u64)>> = const { RefCell::new(Vec::new()) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
    /// The worker's side: the headers it was sent, by key.
    static KNOWN: RefCell<Vec<(u64, Rc<Header>)>> = const { RefCell::new(Vec::new()) };
}

fn keep<T>(list: &mut Vec<T>, item: T) {
    list.push(item);
    if list.len() > KEPT {
        list.remove(0);
    }
}

/// The key that names header `h` (the same `Rc`, the same key).
fn key_of(h: &Rc<Header>) -> u64 {
    NAMED.with(|n| {
        let mut n = n.borrow_mut();
        if let Some((_, k)) = n.iter().find(|(x, _)| Rc::ptr_eq(x, h)) {
            return *k;
        }
        let k = NEXT.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        keep(&mut n, (h.clone(), k));
        k
    })
}

/// The panel's answer for header `h` and the settings, computed by the worker.
pub async fn answer(h: &Rc<Header>, settings: &LocalSettings, source: &GgufSource) -> Result<Answer, String> {
    let key = key_of(h);
    let ask = |header: Option<Header>| Request::LlamaCpp { key, header, settings: settings.clone(), source: source.clone() };
    let mut r = call(ask(None)).await?;
    if r == Response::NeedHeader {
        r = call(ask(Some((**h).clone()))).await?;
    }
    match r {
        Response::LlamaCpp(a) => a,
        other => Err(unexpected("llama.cpp's estimate", other)),
    }
}

/// Whether built-in model `model` as `quant` fits with these settings (`None`: not sized), by the
/// worker; a failed worker is `None` too.
pub async fn quant_fit(model: &str, quant: &str, settings: &LocalSettings) -> Option<bool> {
    match call(Request::QuantFit { model: model.into(), quant: quant.into(), settings: settings.clone() }).await {
        Ok(Response::QuantFit(f)) => f,
        _ => None,
    }
}

/// The worker's side of [`Request::LlamaCpp`].
pub(super) fn handle(key: u64, header: Option<Header>, settings: &LocalSettings, source: &GgufSource) -> Response {
    let h = match header {
        Some(h) => {
            let h = Rc::new(h);
            KNOWN.with(|k| keep(&mut k.borrow_mut(), (key, h.clone())));
            h
        }
        None => match KNOWN.with(|k| k.borrow().iter().find(|(x, _)| *x == key).map(|(_, h)| h.clone())) {
            Some(h) => h,
            None => return Response::NeedHeader,
        },
    };
    Response::LlamaCpp(crate::local::answer(&h, settings, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;

    /// The worker's answer is the panel's own, and a header crosses once: a second answer for the
    /// same header sends only its key.
    #[test]
    fn the_answer_is_the_panels_and_a_header_crosses_once() {
        let s = LocalSettings::default();
        let src = GgufSource::Quant { model: "qwen2.5-0.5b".into(), quant: "Q4_K_M".into() };
        let h = Rc::new(crate::local::synth("qwen2.5-0.5b", "Q4_K_M").unwrap());
        let a = block_on(answer(&h, &s, &src)).unwrap();
        assert_eq!(a, crate::local::answer(&h, &s, &src).unwrap());
        let key = key_of(&h);
        assert_eq!(handle(key, None, &s, &src), Response::LlamaCpp(Ok(a)));
        assert_eq!(handle(key + 100, None, &s, &src), Response::NeedHeader);
        assert_eq!(block_on(quant_fit("qwen2.5-0.5b", "Q4_K_M", &s)), crate::local::quant_fit("qwen2.5-0.5b", "Q4_K_M", &s));
    }
}
