//! The batch-size chart.

use crate::analysis::Report;
use crate::charts::{batch, f};
use crate::components::Ctx;
use yew::prelude::*;

/// Device total and peak against batch size (log scale), capacity line, largest batch that fits.
pub fn batch_chart(ctx: &Ctx, report: &Report) -> Html {
    let t = ctx.tr();
    let cw = ctx.chart_width();
    let r = &report;
    let (h, left, bottom) = (220.0, 64.0, 22.0);
    let (pw, ph) = (cw - left - 12.0, h - bottom - 10.0);
    let g = batch::geometry(&r.sweep, r.capacity, r.max_batch, r.estimate.config.batch, pw, ph, ctx.unit);
    html! {
        <svg class="chart batch" viewBox={format!("0 0 {cw} {h}")} role="img" aria-label={t.batch_chart} data-testid="chart-batch">
            <title>{ t.batch_chart }</title>
            <g transform={format!("translate({left},10)")}>
                { for g.y_ticks.iter().map(|(y, b)| html! {
                    <g>
                        <line x1="0" x2={f(pw)} y1={f(*y)} y2={f(*y)} class="grid" />
                        <text x="-4" y={f(*y + 4.0)} text-anchor="end" class="axis-label">{ ctx.bytes(*b) }</text>
                    </g>
                }) }
                { for g.x_ticks.iter().map(|(x, b)| html! {
                    <text x={f(*x)} y={f(ph + 16.0)} text-anchor="middle" class="axis-label">{ b.to_string() }</text>
                }) }
                <line x1="0" x2={f(pw)} y1={f(g.capacity_y)} y2={f(g.capacity_y)} class="capacity-line" />
                <text x={f(pw)} y={f((g.capacity_y - 4.0).max(10.0))} text-anchor="end" class="axis-label cap">{ format!("{} {}", t.capacity, ctx.bytes(r.capacity)) }</text>
                <path d={g.device_line.clone()} class="line device" />
                <path d={g.peak_line.clone()} class="line peak" />
                if let Some(x) = g.max_x {
                    <line x1={f(x)} x2={f(x)} y1="0" y2={f(ph)} class="max-line" />
                    <text x={f(x)} y="10" dx={if x > pw * 0.8 { "-4" } else { "4" }}
                        text-anchor={if x > pw * 0.8 { "end" } else { "start" }} class="axis-label max">{ crate::i18n::fill(ctx.tr().chart_max, &[&r.max_batch.unwrap_or(0).to_string()]) }</text>
                }
                // A click on the plot sets the batch nearest to it.
                <g class="hits" data-testid="batch-hits" onclick={{
                    let d = ctx.dispatch.clone();
                    Callback::from(move |e: MouseEvent| {
                        let batch = e.target_dyn_into::<web_sys::Element>().and_then(|t| t.get_attribute("data-batch")?.parse().ok());
                        if let Some(b) = batch {
                            d.dispatch(crate::state::Action::SetBatch(b));
                        }
                    })
                }}>
                    { for g.columns.iter().map(|&(x0, x1, b)| html! {
                        <rect x={f(x0)} y="0" width={f(x1 - x0)} height={f(ph)} data-batch={b.to_string()}><title>{ format!("{} {b}", t.batch) }</title></rect>
                    }) }
                </g>
                if let Some((x, y)) = g.current {
                    <circle cx={f(x)} cy={f(y)} r="4" class="current-dot"><title>{ format!("{} {}", t.batch, r.estimate.config.batch) }</title></circle>
                }
            </g>
        </svg>
    }
}
