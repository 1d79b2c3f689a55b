//! Renders the full app into `<body>`.

/// Loads the saved work and any link in the fragment, then renders. An old-style embed address
/// (`/?embed…`) is sent to the embed page, which has its own, smaller bundle.
#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::{dom, share_link, App};
    if share_link::embed_controls(&dom::location_search()).is_some() {
        dom::go_to_embed_page();
        return;
    }
    wasm_bindgen_futures::spawn_local(async {
        let boot = std::rc::Rc::new(vramcalc_web::hooks::Boot::load().await);
        yew::Renderer::<App>::with_props(vramcalc_web::app::AppProps { boot }).render();
    });
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-web is a browser app: build it with `trunk build --release` (see tests/serve.sh).");
}
