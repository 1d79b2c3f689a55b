//! Renders the app into `<body>`.

#[cfg(target_arch = "wasm32")]
fn main() {
    yew::Renderer::<vramcalc_web::App>::new().render();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-web is a browser app: build it with `trunk build --release` (see tests/serve.sh).");
}
