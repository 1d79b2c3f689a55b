//! Renders the full app into `<div id="app">` (after index.html's skip links, which stay).

/// Loads the saved work and any link in the fragment, then renders. (`index.html` sends the first
/// release's embed addresses, `/?embed…`, to the embed page before this runs.)
#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::App;
    lazy_views::provide();
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

/// The views that load after the first answer (`vramcalc_web::split`): each `lazy_loader!` is a
/// split point, and `scripts/build.sh` (`tools/wasm-split`) moves the function it names, with
/// the code only it reaches, into a wasm file of its own, fetched on the loader's first `load`.
#[cfg(target_arch = "wasm32")]
mod lazy_views {
    use vramcalc_web::components::downloads::DownloadsProps;
    use vramcalc_web::components::layers::LayersProps;
    use vramcalc_web::components::local::LocalProps;
    use vramcalc_web::components::pipeline::PipelineProps;
    use vramcalc_web::components::results::ChartsProps;
    use vramcalc_web::components::reverse::{fits::FitsProps, fixes::FixesProps, largest::LargestProps};
    use vramcalc_web::split::{renders, Render, CHARTS, DOWNLOADS, FITS, FIXES, LARGEST, LAYERS, LOCAL, PIPELINE};
    use wasm_split::{lazy_loader, LazyLoader};

    fn local(_: ()) -> Render<LocalProps> {
        renders::local
    }
    fn pipeline(_: ()) -> Render<PipelineProps> {
        renders::pipeline
    }
    fn charts(_: ()) -> Render<ChartsProps> {
        renders::charts
    }
    fn layers(_: ()) -> Render<LayersProps> {
        renders::layers
    }
    fn fits(_: ()) -> Render<FitsProps> {
        renders::fits
    }
    fn largest(_: ()) -> Render<LargestProps> {
        renders::largest
    }
    fn fixes(_: ()) -> Render<FixesProps> {
        renders::fixes
    }
    fn downloads(_: ()) -> Render<DownloadsProps> {
        renders::downloads
    }
    static LOCAL_CODE: LazyLoader<(), Render<LocalProps>> = lazy_loader!(extern "local" fn local(_: ()) -> Render<LocalProps>);
    static PIPELINE_CODE: LazyLoader<(), Render<PipelineProps>> = lazy_loader!(extern "pipeline" fn pipeline(_: ()) -> Render<PipelineProps>);
    static CHARTS_CODE: LazyLoader<(), Render<ChartsProps>> = lazy_loader!(extern "charts" fn charts(_: ()) -> Render<ChartsProps>);
    static LAYERS_CODE: LazyLoader<(), Render<LayersProps>> = lazy_loader!(extern "layers" fn layers(_: ()) -> Render<LayersProps>);
    static FITS_CODE: LazyLoader<(), Render<FitsProps>> = lazy_loader!(extern "fits" fn fits(_: ()) -> Render<FitsProps>);
    static LARGEST_CODE: LazyLoader<(), Render<LargestProps>> = lazy_loader!(extern "largest" fn largest(_: ()) -> Render<LargestProps>);
    static FIXES_CODE: LazyLoader<(), Render<FixesProps>> = lazy_loader!(extern "fixes" fn fixes(_: ()) -> Render<FixesProps>);
    static DOWNLOADS_CODE: LazyLoader<(), Render<DownloadsProps>> = lazy_loader!(extern "downloads" fn downloads(_: ()) -> Render<DownloadsProps>);

    /// The render behind `code`, once its file has loaded (`None` if it did not).
    async fn fetch<P>(code: &'static LazyLoader<(), Render<P>>) -> Option<Render<P>> {
        if code.load().await {
            code.call(()).ok()
        } else {
            None
        }
    }

    pub fn provide() {
        LOCAL.provide(|| Box::pin(fetch(&LOCAL_CODE)));
        PIPELINE.provide(|| Box::pin(fetch(&PIPELINE_CODE)));
        CHARTS.provide(|| Box::pin(fetch(&CHARTS_CODE)));
        LAYERS.provide(|| Box::pin(fetch(&LAYERS_CODE)));
        FITS.provide(|| Box::pin(fetch(&FITS_CODE)));
        LARGEST.provide(|| Box::pin(fetch(&LARGEST_CODE)));
        FIXES.provide(|| Box::pin(fetch(&FIXES_CODE)));
        DOWNLOADS.provide(|| Box::pin(fetch(&DOWNLOADS_CODE)));
    }
}
