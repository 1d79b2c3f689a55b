//! The embed page (`embed.html`): its own bundle, so a blog post loads only the card and the full
//! app's bundle carries no embed code. `?embed&controls=…#v1.…` shows the card;
//! `?builder#v1.…` (the app's "Embed" button) the snippet builder with a live preview.

#[cfg(target_arch = "wasm32")]
fn main() {
    use vramcalc_web::components::embed::{EmbedApp, EmbedProps};
    use vramcalc_web::components::pipeline::card::PipelineCard;
    use vramcalc_web::components::share::{EmbedBuilder, EmbedBuilderProps};
    use vramcalc_web::{dom, share_link};
    let search = dom::location_search();
    let controls = share_link::embed_controls(&search).unwrap_or_default();
    wasm_bindgen_futures::spawn_local(async move {
        let hash = dom::location_hash();
        let start = share_link::start(&hash, None).await;
        if share_link::is_embed_builder(&search) {
            let (fragment, lang) = (hash.trim_start_matches('#').to_string().into(), start.state.prefs.lang);
            yew::Renderer::<EmbedBuilder>::with_props(EmbedBuilderProps { fragment, lang }).render();
        } else {
            // a pipeline link's card: only this bundle carries the pipeline code
            let pipeline_card = Some(yew::Callback::from(|state| yew::html! { <PipelineCard {state} /> }));
            yew::Renderer::<EmbedApp>::with_props(EmbedProps { controls, start: std::rc::Rc::new(start), pipeline_card }).render();
        }
    });
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("vramcalc-embed is a browser page: build it with `trunk build --release` (see tests/serve.sh).");
}
