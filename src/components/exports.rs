//! Downloads: the per-layer table (CSV), the estimate (JSON, as `vramcalc estimate --json`), and
//! each chart as a standalone SVG. The CSV and JSON are written by the lazily loaded module on
//! first use ([`crate::lazy::export_file`]); the SVGs by the page.

use super::Ctx;
use crate::dom;
use crate::export::file_stem;
use crate::state::Model;
use yew::prelude::*;

/// `(id, selector of the <svg>)` of each chart.
const CHARTS: [(&str, &str); 5] = [
    ("capacity", "svg[data-testid=chart-capacity]"),
    ("breakdown", "[data-testid=chart-breakdown] svg"),
    ("timeline", "svg[data-testid=chart-timeline]"),
    ("batch", "svg[data-testid=chart-batch]"),
    ("layers", "svg[data-testid=chart-layers]"),
];

/// The download panel. A plain function, not a component: each component type costs bundle size.
pub fn exports(ctx: &Ctx, model: &Model) -> Html {
    let t = ctx.tr();
    let stem = file_stem(&model.spec);
    let download = |format: &'static str, name: String, mime: &'static str| {
        let (spec, config) = (model.spec.clone(), model.config);
        Callback::from(move |_| {
            let (spec, name) = (spec.clone(), name.clone());
            wasm_bindgen_futures::spawn_local(async move {
                match crate::lazy::export_file(&spec, &config, format).await {
                    Ok(text) => dom::download(&name, mime, &text),
                    // The module could not be fetched, or the model has an error: say so.
                    Err(e) => drop(web_sys::window().map(|w| w.alert_with_message(&e))),
                }
            })
        })
    };
    let on_csv = download("csv", format!("{stem}-layers.csv"), "text/csv;charset=utf-8");
    let on_json = download("json", format!("{stem}-estimate.json"), "application/json");
    let chart_name = |id: &str| match id {
        "capacity" => t.capacity,
        "breakdown" => t.breakdown,
        "timeline" => t.timeline,
        "batch" => t.batch_chart,
        _ => t.per_layer,
    };
    html! {
        <section class="panel exports" aria-labelledby="exports-h" data-testid="exports">
            <h2 id="exports-h">{ t.downloads }</h2>
            <p class="buttons">
                <button onclick={on_csv} data-testid="export-csv">{ "⤓ " }{ t.download_csv }</button>
                <button onclick={on_json} data-testid="export-json">{ "⤓ " }{ t.download_json }</button>
            </p>
            <p class="buttons">
                <span class="small muted">{ t.download_svg }</span>
                { for CHARTS.iter().map(|&(id, selector)| {
                    let name = format!("{stem}-{id}.svg");
                    let onclick = Callback::from(move |_| {
                        if let Some(svg) = dom::standalone_svg(selector) {
                            dom::download(&name, "image/svg+xml", &svg);
                        }
                    });
                    html! { <button {onclick} data-testid={format!("export-svg-{id}")}>{ chart_name(id) }</button> }
                }) }
            </p>
        </section>
    }
}
