//! Downloads: the per-layer table (CSV), the estimate (JSON, as `vramcalc estimate --json`), and
//! each chart as a standalone SVG.

use super::{Ctx, Shared};
use crate::analysis::Report;
use crate::dom;
use crate::export::{estimate_json, file_stem, layers_csv};
use vramcalc_core::spec::ModelSpec;
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
pub fn exports(ctx: &Ctx, report: &Shared<Report>, spec: &ModelSpec) -> Html {
    let t = ctx.tr();
    let stem = file_stem(spec);
    let on_csv = {
        let (r, stem) = (report.clone(), stem.clone());
        Callback::from(move |_| dom::download(&format!("{stem}-layers.csv"), "text/csv;charset=utf-8", &layers_csv(&r.estimate)))
    };
    let on_json = {
        let (r, spec, stem) = (report.clone(), spec.clone(), stem.clone());
        Callback::from(move |_| {
            dom::download(&format!("{stem}-estimate.json"), "application/json", &estimate_json(&spec, &r.estimate))
        })
    };
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
