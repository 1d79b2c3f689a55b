//! Renders the app into `<body>`.

/// The full app, or with `?embed` in the address the embed card (one bundle, two modes).
#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::components::embed::{EmbedApp, EmbedProps};
    match vramcalc_web::share_link::embed_controls(&vramcalc_web::dom::location_search()) {
        Some(controls) => drop(yew::Renderer::<EmbedApp>::with_props(EmbedProps { controls }).render()),
        None => drop(yew::Renderer::<vramcalc_web::App>::new().render()),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-web is a browser app: build it with `trunk build --release` (see tests/serve.sh).");
}
