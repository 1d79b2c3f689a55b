//! The breakdown chart (summary panel and embed card).

use crate::analysis::Report;
use crate::charts::{bars, f};
use crate::components::{percent, Ctx};
use yew::prelude::*;

/// The peak split by category, plus the device overhead, as one stacked bar with a legend.
pub fn breakdown_chart(ctx: &Ctx, report: &Report) -> Html {
    let t = ctx.tr();
    let cw = ctx.chart_width();
    let est = &report.estimate;
    let segs = bars::breakdown(est, cw);
    let total = est.device_total_bytes.max(1);
    html! {
        <figure class="breakdown" data-testid="chart-breakdown">
            <svg class="chart" viewBox={format!("0 0 {cw} 28")} role="img" aria-label={t.breakdown}>
                <title>{ t.breakdown }</title>
                { for segs.iter().map(|s| html! {
                    <rect x={f(s.x)} y="0" width={f(s.w)} height="28" class={classes!("seg", s.key.key())}>
                        <title>{ format!("{}: {}", t.part(s.key), ctx.bytes(s.bytes)) }</title>
                    </rect>
                }) }
            </svg>
            <ul class="legend">
                { for segs.iter().map(|s| html! {
                    <li data-testid={format!("breakdown-{}", s.key.key())} data-bytes={s.bytes.to_string()}>
                        <span class={classes!("swatch", s.key.key())} aria-hidden="true"></span>
                        <span>{ t.part(s.key) }</span>
                        <b>{ ctx.bytes(s.bytes) }</b>
                        <span class="muted">{ percent(s.bytes, total) }</span>
                    </li>
                }) }
            </ul>
            if est.breakdown.weight_casts > 0 { <p class="small muted" data-testid="weight-casts-why">{ t.weight_casts_why }</p> }
        </figure>
    }
}
