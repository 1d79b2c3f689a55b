//! The chart panels of the results column: timeline, batch size, per layer (chart and table).

use crate::analysis::Report;
use crate::components::charts::{batch_chart, timeline_chart, LayerChart};
use crate::components::table::layer_table;
use crate::components::{use_ctx, Shared};
use crate::i18n::fill;
use vramcalc_core::thousands;
use yew::prelude::*;

#[derive(Properties, PartialEq, Clone)]
pub struct ChartsProps {
    pub report: Option<Shared<Report>>,
}

#[function_component(Charts)]
pub fn charts(p: &ChartsProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let all_rows = use_state(|| false);
    let Some(r) = &p.report else { return html! {} };
    let max = match r.max_batch {
        Some(m) => fill(t.max_batch, &[&thousands(m)]),
        None => t.no_batch_fits.to_string(),
    };
    let mode = r.estimate.config.mode;
    // generation and inference save nothing for a backward: no per-layer chart of it
    let training = mode == vramcalc_core::Mode::Train;
    let timeline = match mode {
        vramcalc_core::Mode::Train => t.timeline,
        vramcalc_core::Mode::Generate => t.timeline_generate,
        vramcalc_core::Mode::Infer => t.timeline_infer,
    };
    html! {
        <>
            <section class="panel" aria-labelledby="timeline-h">
                <h2 id="timeline-h" data-testid="timeline-title">{ timeline }</h2>
                { timeline_chart(&ctx, r) }
            </section>
            <section class="panel" aria-labelledby="batch-h">
                <h2 id="batch-h">{ t.batch_chart }</h2>
                <p class="small" data-testid="max-batch" data-max={r.max_batch.map(|m| m.to_string()).unwrap_or_default()}>{ max }</p>
                { batch_chart(&ctx, r) }
                <p class="legend-line small">
                    <span class="key device"></span>{ t.device_total }{ "  " }
                    <span class="key peak"></span>{ t.peak }{ "  " }
                    <span class="key cap"></span>{ t.capacity }
                </p>
            </section>
            if training {
                <section class="panel" aria-labelledby="layers-h">
                    <h2 id="layers-h">{ t.per_layer }</h2>
                    <LayerChart report={r.clone()} />
                    { layer_table(&ctx, r, &all_rows) }
                </section>
            }
        </>
    }
}
