//! The first screen as HTML (issue 23, load-time budgets): renders the app's default state — no
//! link, no saved work — to a string natively (Yew's `ssr`) and puts it into the built
//! `index.html`'s `<div id="app">`, so the first chart is on screen before the wasm arrives.
//! `scripts/build.sh` runs it after Trunk: `vramcalc-prerender dist/index.html`.
//!
//! The copy is a picture of the page, not the page: it is `inert` (no focus, no typing into it),
//! its `data-testid`s are renamed `data-pre-testid` (the browser tests only ever see the live
//! app), and the app's mount clears `#app` before its first render (Yew's `mount_with_props`),
//! in the same task, so no frame shows both. A link in the address bar or saved work in
//! LocalStorage hides it before the first paint (index.html's `vc-own` class): those pages would
//! show other numbers.

/// Where the copy goes in Trunk's output (index.html's own markup).
#[cfg(not(target_arch = "wasm32"))]
const MOUNT: &str = r#"<div id="app"></div>"#;

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: vramcalc-prerender DIST/index.html");
        std::process::exit(2);
    };
    let page = match std::fs::read_to_string(&path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("vramcalc-prerender: cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let Some(out) = insert(&page, &render()) else {
        eprintln!("vramcalc-prerender: {path} has no empty `{MOUNT}` (already prerendered, or index.html changed)");
        std::process::exit(1);
    };
    if let Err(e) = std::fs::write(&path, out) {
        eprintln!("vramcalc-prerender: cannot write {path}: {e}");
        std::process::exit(1);
    }
}

/// The default page's markup, as the app's first render draws it (effects and deferred views,
/// such as the what-ifs and the share link, are left for the live app).
#[cfg(not(target_arch = "wasm32"))]
fn render() -> String {
    use vramcalc_web::{app::AppProps, hooks::Boot, share_link, App};
    vramcalc_web::split::renders::provide_all_ready();
    let boot = block_on(async { Boot { start: share_link::start("", None).await, saved: None } });
    let props = AppProps { boot: std::rc::Rc::new(boot) };
    block_on(yew::LocalServerRenderer::<App>::with_props(props).hydratable(false).render())
}

/// `page` with `html` as the inert copy inside its empty mount point.
#[cfg(not(target_arch = "wasm32"))]
fn insert(page: &str, html: &str) -> Option<String> {
    let at = page.find(MOUNT)?;
    let copy = html.replace(" data-testid=", " data-pre-testid=");
    let open = &MOUNT[..MOUNT.len() - "</div>".len()];
    Some(format!(r#"{}{open}<div class="prerendered" inert>{copy}</div></div>{}"#, &page[..at], &page[at + MOUNT.len()..]))
}

/// Runs a future that waits on nothing outside it (the default state needs no fetch) to the end.
#[cfg(not(target_arch = "wasm32"))]
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    /// The copy shows the default model's first chart and peak, the figures the live app draws
    /// from the same state and core.
    #[test]
    fn the_copy_is_the_default_pages_first_screen() {
        let html = render();
        let page = insert("<body><div id=\"app\"></div></body>", &html).unwrap();
        assert!(page.starts_with("<body><div id=\"app\"><div class=\"prerendered\" inert>"), "{}", &page[..80]);
        assert!(page.contains("data-pre-testid=\"chart-capacity\""));
        assert!(!page.contains(" data-testid="), "a test id left in the copy");
        let state = vramcalc_web::state::State::default();
        let m = &state.model;
        let peak = vramcalc_core::estimate(&m.spec, &m.config).unwrap().peak_bytes;
        assert!(page.contains(&format!("data-bytes=\"{peak}\"")), "the default peak {peak} is not in the copy");
        assert_eq!(insert(&page, &html), None, "prerendered twice");
    }
}
