//! Renders the full app into `<body>`.

/// Loads the saved work and any link in the fragment, then renders. (`index.html` sends the first
/// release's embed addresses, `/?embed…`, to the embed page before this runs.)
#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::App;
    wasm_bindgen_futures::spawn_local(async {
        let boot = std::rc::Rc::new(vramcalc_web::hooks::Boot::load().await);
        yew::Renderer::<App>::with_props(vramcalc_web::app::AppProps { boot }).render();
    });
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-web is a browser app: build it with `trunk build --release` (see tests/serve.sh).");
}
