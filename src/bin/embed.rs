//! The embed card (`embed.html?embed&controls=…#v1.…`): its own page and bundle, so a blog post
//! loads only the card, and the full app's bundle carries no embed code.

#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::components::embed::{EmbedApp, EmbedProps};
    use vramcalc_web::{dom, share_link};
    let controls = share_link::embed_controls(&dom::location_search()).unwrap_or_default();
    wasm_bindgen_futures::spawn_local(async move {
        let start = std::rc::Rc::new(share_link::start(&dom::location_hash(), None).await);
        yew::Renderer::<EmbedApp>::with_props(EmbedProps { controls, start }).render();
    });
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-embed is a browser page: build it with `trunk build --release` (see tests/serve.sh).");
}
