//! The embed card's small bundle (issue 23, load times): `embed.html?embed#v1.…` of a preset or
//! a spec — what nearly every embed is — with only the PyTorch estimate's code. The page's loader
//! (`static/embed.html`) picks this bundle or the full one (`src/bin/embed.rs`: a hub model's
//! link, which needs the importer; llama.cpp and pipeline links; the snippet builder) from the
//! address before either is fetched. The card is the same component (`EmbedApp`) in both.

#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::components::embed::{EmbedApp, EmbedProps};
    use vramcalc_web::{dom, share_link};
    let controls = share_link::embed_controls(&dom::location_search()).unwrap_or_default();
    wasm_bindgen_futures::spawn_local(async move {
        let start = share_link::start_card(&dom::location_hash()).await;
        yew::Renderer::<EmbedApp>::with_props(EmbedProps { controls, start: std::rc::Rc::new(start), pipeline_card: None }).render();
    });
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-card is a browser page: build it with `trunk build --release` (see tests/serve.sh).");
}
