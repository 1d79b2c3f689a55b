//! Renders the full app into `<div id="app">` (after index.html's skip links, which stay).

/// Loads the saved work and any link in the fragment, then renders. (`index.html` sends the first
/// release's embed addresses, `/?embed…`, to the embed page before this runs.)
#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::App;
    wasm_bindgen_futures::spawn_local(async {
        let boot = std::rc::Rc::new(vramcalc_web::hooks::Boot::load().await);
        let props = vramcalc_web::app::AppProps { boot };
        match web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id("app")) {
            Some(root) => yew::Renderer::<App>::with_root_and_props(root, props).render(),
            None => yew::Renderer::<App>::with_props(props).render(),
        };
    });
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-web is a browser app: build it with `trunk build --release` (see tests/serve.sh).");
}
