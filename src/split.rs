//! Views whose code loads after the page's first answer (issue 23, load times).
//!
//! A share link waits for the whole app's wasm before it shows its answer, and on a phone that
//! wait is the download. The views that no link's first figure needs — the llama.cpp and
//! image-pipeline workloads, the layer editor, the charts (timeline, batch size, per layer:
//! about half of the page's elements), what fits a GPU, the largest values, the cheapest fixes,
//! the downloads — are cut out of the app's wasm into files of their own at build time
//! (`tools/wasm-split`, Dioxus' `wasm-split`: one wasm memory and one state, so a lazy view is
//! an ordinary component of the typed state, not a second app).
//!
//! How a view gets here: its render function below is not called by this library. The app's
//! binary (`src/main.rs`) hands each one to `provide` through a `#[wasm_split]` function, which
//! the splitter moves, with everything only it reaches, into its own file; the native prerender
//! (`src/bin/prerender.rs`) hands them over directly with `provide_ready`. A `Lazy` component
//! draws a placeholder until its view's file has arrived, then the view.

use crate::components::downloads::{Downloads, DownloadsProps};
use crate::components::layers::{Layers, LayersProps};
use crate::components::local::{LocalPanel, LocalProps};
use crate::components::pipeline::{PipelinePanel, PipelineProps};
use crate::components::results::{Charts, ChartsProps};
use crate::components::reverse::fits::FitsProps;
use crate::components::reverse::fixes::FixesProps;
use crate::components::reverse::largest::LargestProps;
use crate::components::reverse::{FitsTable, Fixes, Largest};
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use yew::prelude::*;

/// Draws a view from its props.
pub type Render<P> = fn(&P) -> Html;
/// Fetches a view's code and answers its render function (`None`: the file did not load).
pub type Load<P> = fn() -> Pin<Box<dyn Future<Output = Option<Render<P>>>>>;

/// One lazily loaded view: how to load it (set once by the binary) and, once loaded, its render.
pub struct LazyView<P: 'static> {
    load: OnceLock<Load<P>>,
    ready: OnceLock<Render<P>>,
}

impl<P: 'static> LazyView<P> {
    const fn new() -> Self {
        Self { load: OnceLock::new(), ready: OnceLock::new() }
    }

    /// How the binary loads this view (the first call wins).
    pub fn provide(&self, load: Load<P>) {
        let _ = self.load.set(load);
    }

    /// The view's render, already at hand (a native build has no file to wait for).
    pub fn provide_ready(&self, render: Render<P>) {
        let _ = self.ready.set(render);
    }

    /// The render, if its code is here.
    pub fn ready(&self) -> Option<Render<P>> {
        self.ready.get().copied()
    }

    /// Loads the view's code (once; later calls answer at once). `None`: no binary provided it,
    /// or its file did not load.
    pub async fn load(&'static self) -> Option<Render<P>> {
        if let Some(r) = self.ready() {
            return Some(r);
        }
        let render = (self.load.get()?)().await?;
        Some(*self.ready.get_or_init(|| render))
    }
}

pub static LOCAL: LazyView<LocalProps> = LazyView::new();
pub static PIPELINE: LazyView<PipelineProps> = LazyView::new();
pub static CHARTS: LazyView<ChartsProps> = LazyView::new();
pub static LAYERS: LazyView<LayersProps> = LazyView::new();
pub static FITS: LazyView<FitsProps> = LazyView::new();
pub static LARGEST: LazyView<LargestProps> = LazyView::new();
pub static FIXES: LazyView<FixesProps> = LazyView::new();
pub static DOWNLOADS: LazyView<DownloadsProps> = LazyView::new();

/// The renders, for the binaries to provide (never called from this library, so that only a
/// binary's split-off file holds each view's code).
pub mod renders {
    use super::*;

    pub fn local(p: &LocalProps) -> Html {
        html! { <LocalPanel ..p.clone() /> }
    }
    pub fn pipeline(p: &PipelineProps) -> Html {
        html! { <PipelinePanel ..p.clone() /> }
    }
    pub fn charts(p: &ChartsProps) -> Html {
        html! { <Charts ..p.clone() /> }
    }
    pub fn layers(p: &LayersProps) -> Html {
        html! { <Layers ..p.clone() /> }
    }
    pub fn fits(p: &FitsProps) -> Html {
        html! { <FitsTable ..p.clone() /> }
    }
    pub fn largest(p: &LargestProps) -> Html {
        html! { <Largest ..p.clone() /> }
    }
    pub fn fixes(p: &FixesProps) -> Html {
        html! { <Fixes ..p.clone() /> }
    }
    pub fn downloads(p: &DownloadsProps) -> Html {
        html! { <Downloads ..p.clone() /> }
    }

    /// Every view at hand, for a native render (the prerender).
    pub fn provide_all_ready() {
        LOCAL.provide_ready(local);
        PIPELINE.provide_ready(pipeline);
        CHARTS.provide_ready(charts);
        LAYERS.provide_ready(layers);
        FITS.provide_ready(fits);
        LARGEST.provide_ready(largest);
        FIXES.provide_ready(fixes);
        DOWNLOADS.provide_ready(downloads);
    }
}

#[derive(Properties)]
pub struct LazyProps<P: PartialEq + 'static> {
    pub view: &'static LazyView<P>,
    pub props: P,
}

impl<P: PartialEq + 'static> PartialEq for LazyProps<P> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.view, other.view) && self.props == other.props
    }
}

/// `view` drawn from `props` once its code is here; until then an empty, busy placeholder, and
/// a line that says so if its file cannot be fetched.
#[function_component(Lazy)]
pub fn lazy<P: PartialEq + 'static>(p: &LazyProps<P>) -> Html {
    let ctx = crate::components::use_ctx();
    let failed = use_state(|| false);
    let view = p.view;
    {
        let failed = failed.clone();
        use_effect_with((), move |_| {
            if view.ready().is_none() {
                yew::platform::spawn_local(async move {
                    // After the page's user-visible work (the multi-GPU sizing's steps): a view
                    // arriving and drawing (the charts are half the page's elements) would land
                    // between them and hold back the answer a link waits for.
                    crate::dom::yield_to_page(crate::dom::Priority::Background).await;
                    // a new value either way: the loaded view is drawn, or the failure said
                    failed.set(view.load().await.is_none());
                });
            }
        });
    }
    match view.ready() {
        Some(render) => render(&p.props),
        None if *failed => html! { <p class="small error" role="status">{ ctx.tr().part_not_loaded }</p> },
        None => html! { <div class="lazy" aria-busy="true"></div> },
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[derive(PartialEq)]
    struct P;
    fn draw(_: &P) -> Html {
        html! { <b>{ "drawn" }</b> }
    }

    /// Runs a future that needs nothing outside it.
    fn now<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the load waited"),
        }
    }

    #[test]
    fn a_view_loads_once_through_what_the_binary_provided() {
        static VIEW: LazyView<P> = LazyView::new();
        assert!(VIEW.ready().is_none());
        assert!(now(VIEW.load()).is_none(), "nothing provided: nothing to draw");
        VIEW.provide(|| Box::pin(async { Some(draw as Render<P>) }));
        assert!(now(VIEW.load()).is_some());
        assert!(VIEW.ready().is_some(), "kept: later mounts draw at once");
    }

    #[test]
    fn a_file_that_did_not_load_leaves_the_view_unloaded() {
        static VIEW: LazyView<P> = LazyView::new();
        VIEW.provide(|| Box::pin(async { None }));
        assert!(now(VIEW.load()).is_none());
        assert!(VIEW.ready().is_none());
    }

    #[test]
    fn a_native_render_has_every_view_at_hand() {
        renders::provide_all_ready();
        assert!(LOCAL.ready().is_some() && PIPELINE.ready().is_some() && CHARTS.ready().is_some() && LAYERS.ready().is_some() && FITS.ready().is_some());
        assert!(LARGEST.ready().is_some() && FIXES.ready().is_some() && DOWNLOADS.ready().is_some());
    }
}
