//! Thin SVG views (plain functions, except the per-layer chart with its hover state): they map the geometry of `crate::charts` to elements. Sizes are viewBox
//! units; the SVGs scale to their container's width.

use super::{use_ctx, Ctx, Shared};
use crate::analysis::Report;
use crate::charts::bars::Part;
use crate::charts::{bars, batch, f, timeline};
use vramcalc_core::Phase;
use yew::prelude::*;


#[derive(Properties, PartialEq)]
pub struct ChartProps {
    pub report: Shared<Report>,
}

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
                        <span class="muted">{ super::percent(s.bytes, total) }</span>
                    </li>
                }) }
            </ul>
        </figure>
    }
}

/// Memory after each op of the step, phases shaded, the peak marked.
pub fn timeline_chart(ctx: &Ctx, report: &Report) -> Html {
    let t = ctx.tr();
    let cw = ctx.chart_width();
    let (h, left, bottom) = (200.0, 64.0, 18.0);
    let g = timeline::geometry(&report.estimate.timeline, cw - left - 8.0, h - bottom - 8.0, ctx.unit);
    let phase_class = |ph: Phase| ph.name();
    html! {
        <svg class="chart timeline" viewBox={format!("0 0 {cw} {h}")} role="img" aria-label={t.timeline} data-testid="chart-timeline">
            <title>{ t.timeline }</title>
            <g transform={format!("translate({left},8)")}>
                { for g.phases.iter().map(|s| html! {
                    <g>
                        <rect x={f(s.x0)} y="0" width={f((s.x1 - s.x0).max(0.0))} height={f(h - bottom - 8.0)} class={classes!("phase", phase_class(s.phase))} />
                        <text x={f((s.x0 + s.x1) / 2.0)} y={f(h - bottom + 8.0)} text-anchor="middle" class="axis-label">{ t.phase(s.phase) }</text>
                    </g>
                }) }
                { for g.y_ticks.iter().map(|(y, b)| html! {
                    <g>
                        <line x1="0" x2={f(cw - left - 8.0)} y1={f(*y)} y2={f(*y)} class="grid" />
                        <text x="-4" y={f(*y + 4.0)} text-anchor="end" class="axis-label">{ ctx.bytes(*b) }</text>
                    </g>
                }) }
                <path d={g.area.clone()} class="area" />
                <path d={g.line.clone()} class="line" />
                if let Some((x, y, bytes)) = g.peak {
                    <g data-testid="timeline-peak">
                        <circle cx={f(x)} cy={f(y)} r="4" class="peak-dot" />
                        <text x={f(x)} y={f((y - 8.0).max(10.0))} text-anchor={if x > (cw - left) * 0.7 { "end" } else { "middle" }} class="peak-label">
                            { crate::i18n::fill(ctx.tr().chart_peak, &[&ctx.bytes(bytes)]) }
                        </text>
                    </g>
                }
            </g>
        </svg>
    }
}

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
                if let Some((x, y)) = g.current {
                    <circle cx={f(x)} cy={f(y)} r="4" class="current-dot"><title>{ format!("{} {}", t.batch, r.estimate.config.batch) }</title></circle>
                }
            </g>
        </svg>
    }
}

/// Saved activations per leaf layer (cs231n's per-layer memory column). A column's tooltip is
/// made when the pointer reaches it (hundreds of `<title>`s rewritten on every edit cost more
/// than the rest of the chart).
#[function_component(LayerChart)]
pub fn layer_chart(p: &ChartProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let cw = ctx.chart_width();
    let hover = use_state_eq(|| None::<usize>);
    let layers = &p.report.estimate.layers;
    let (h, left) = (160.0, 64.0);
    let (cols, ticks, scale) = bars::layer_columns(layers, cw - left - 8.0, h - 16.0, ctx.unit);
    let onmouseover = {
        let hover = hover.clone();
        Callback::from(move |e: MouseEvent| {
            let i = e.target_dyn_into::<web_sys::Element>().and_then(|el| el.get_attribute("data-i")).and_then(|i| i.parse().ok());
            hover.set(i);
        })
    };
    html! {
        <svg class="chart layers-chart" viewBox={format!("0 0 {cw} {h}")} role="img" aria-label={t.per_layer} data-testid="chart-layers">
            <title>{ t.per_layer }</title>
            <g transform={format!("translate({left},8)")}>
                { for ticks.iter().map(|(y, b)| html! {
                    <g>
                        <line x1="0" x2={f(cw - left - 8.0)} y1={f(*y)} y2={f(*y)} class="grid" />
                        <text x="-4" y={f(*y + 4.0)} text-anchor="end" class="axis-label">{ ctx.bytes(*b) }</text>
                    </g>
                }) }
                <g transform={bars::column_transform(scale, h - 16.0)} {onmouseover}>
                    { for cols.iter().enumerate().map(|(i, c)| {
                        let title = (*hover == Some(i)).then(|| {
                            let l = &layers[c.row];
                            format!("{} ({}) {} → {}", l.info.path, l.info.kind, ctx.bytes(l.saved_bytes), l.info.output_shape)
                        });
                        html! {
                            <rect x={f(c.x)} y={f(c.y)} width={f(c.w)} height={f(c.h)} class="lcol" data-i={i.to_string()}>
                                if let Some(title) = title { <title>{ title }</title> }
                            </rect>
                        }
                    }) }
                </g>
            </g>
        </svg>
    }
}
