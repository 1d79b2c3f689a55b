//! The capacity chart (summary panel).

use crate::analysis::Report;
use crate::charts::bars::Part;
use crate::charts::{bars, f};
use crate::components::Ctx;
use yew::prelude::*;

/// Peak and device total against the GPU's capacity.
pub fn capacity_chart(ctx: &Ctx, report: &Report) -> Html {
    let t = ctx.tr();
    let cw = ctx.chart_width();
    let est = &report.estimate;
    let left = if ctx.narrow { 124.0 } else { 130.0 };
    let width = cw - left - 10.0;
    let g = bars::capacity(est, report.capacity, width, ctx.unit);
    let fits = est.device_total_bytes <= report.capacity;
    let label = format!("{}: {} · {}: {} · {}: {}", t.peak, ctx.bytes(est.peak_bytes), t.device_total,
        ctx.bytes(est.device_total_bytes), t.capacity, ctx.bytes(report.capacity));
    let bar_y = |i: usize| 8.0 + i as f64 * 30.0;
    let cap_text = format!("{} {}", t.capacity, ctx.bytes(report.capacity));
    // The capacity's label stays inside the card at either end.
    let half = cap_text.chars().count() as f64 * 3.1;
    let cap_anchor = if g.capacity_x < half - left { "start" } else if g.capacity_x + half > width + 10.0 { "end" } else { "middle" };
    html! {
        <svg class="chart capacity" viewBox={format!("0 0 {cw} 96")} role="img" aria-label={label.clone()} data-testid="chart-capacity">
            <title>{ label }</title>
            { for g.bars.iter().enumerate().map(|(i, b)| html! {
                <g>
                    <text x="0" y={f(bar_y(i) + 16.0)} class="axis-label">{ t.part(b.key) }</text>
                    <rect x={f(left)} y={f(bar_y(i))} width={f(b.w.max(1.0))} height="22" rx="3"
                        class={classes!("bar", b.key.key(), (!fits && b.key == Part::DeviceTotal).then_some("over"))} />
                </g>
            }) }
            <line x1={f(left + g.capacity_x)} x2={f(left + g.capacity_x)} y1="2" y2="68" class="capacity-line" />
            // Drawn after the line, and placed off it (`value_label_x`).
            { for g.bars.iter().enumerate().map(|(i, b)| {
                let text = ctx.bytes(b.bytes);
                let (x, end) = bars::value_label_x(b.w.max(1.0), g.capacity_x, text.len() as f64 * 6.6, width);
                html! {
                    <text x={f(left + x)} y={f(bar_y(i) + 16.0)} class={classes!("value", end.then_some("inside"))}
                        text-anchor={if end { "end" } else { "start" }}>{ text }</text>
                }
            }) }
            <text x={f(left + g.capacity_x)} y="84" text-anchor={cap_anchor} class="axis-label cap">{ cap_text }</text>
        </svg>
    }
}
