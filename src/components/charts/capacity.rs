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
    html! {
        <svg class="chart capacity" viewBox={format!("0 0 {cw} 96")} role="img" aria-label={label.clone()} data-testid="chart-capacity">
            <title>{ label }</title>
            { for g.bars.iter().enumerate().map(|(i, b)| {
                let y = 8.0 + i as f64 * 30.0;
                html! {
                    <g>
                        <text x="0" y={f(y + 16.0)} class="axis-label">{ t.part(b.key) }</text>
                        <rect x={f(left)} y={f(y)} width={f(b.w.max(1.0))} height="22" rx="3"
                            class={classes!("bar", b.key.key(), (!fits && b.key == Part::DeviceTotal).then_some("over"))} />
                        <text x={f(left + b.w.max(1.0) + 4.0)} y={f(y + 16.0)} class="value"
                            text-anchor={if b.w > width - 90.0 { "end" } else { "start" }}
                            dx={if b.w > width - 90.0 { "-8" } else { "0" }}>{ ctx.bytes(b.bytes) }</text>
                    </g>
                }
            }) }
            <line x1={f(left + g.capacity_x)} x2={f(left + g.capacity_x)} y1="2" y2="68" class="capacity-line" />
            <text x={f(left + g.capacity_x)} y="80" text-anchor="middle" class="axis-label cap">{ format!("{} {}", t.capacity, ctx.bytes(report.capacity)) }</text>
        </svg>
    }
}
