//! The timeline chart.

use crate::analysis::Report;
use crate::charts::{f, timeline};
use crate::components::Ctx;
use vramcalc_core::Phase;
use yew::prelude::*;

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
                { for g.phases.iter().map(|s| {
                    // Centred on its phase, but kept inside the plot (the card) at either end.
                    let half = t.phase(s.phase).chars().count() as f64 * 3.0;
                    let x = ((s.x0 + s.x1) / 2.0).min(cw - left - 8.0 - half).max(half);
                    html! {
                        <g>
                            <rect x={f(s.x0)} y="0" width={f((s.x1 - s.x0).max(0.0))} height={f(h - bottom - 8.0)} class={classes!("phase", phase_class(s.phase))} />
                            <text x={f(x)} y={f(h - bottom + 8.0)} text-anchor="middle" class="axis-label">{ t.phase(s.phase) }</text>
                        </g>
                    }
                }) }
                { for g.y_ticks.iter().map(|(y, b)| html! {
                    <g>
                        <line x1="0" x2={f(cw - left - 8.0)} y1={f(*y)} y2={f(*y)} class="grid" />
                        <text x="-4" y={f(*y + 4.0)} text-anchor="end" class="axis-label">{ ctx.bytes(*b) }</text>
                    </g>
                }) }
                <path d={g.area.clone()} class="area" />
                <path d={g.line.clone()} class="line" />
                // The crosshair: a strip per slice of the step, lit on hover with its highest op's
                // layer, phase and bytes; a click goes to that layer's row.
                <g class="hits" data-testid="timeline-hits" onclick={{
                    let d = ctx.dispatch.clone();
                    Callback::from(move |e: MouseEvent| {
                        if let Some(path) = e.target_dyn_into::<web_sys::Element>().and_then(|t| t.get_attribute("data-path")) {
                            crate::dom::go_to_row(&d, path);
                        }
                    })
                }}>
                    { for timeline::hits(&report.estimate.timeline, cw - left - 8.0, 120).into_iter().map(|(x, w, i)| {
                        let p = report.estimate.timeline[i];
                        let layer = report.estimate.layers.get(p.layer as usize).map(|l| (crate::tree::normalize_core_path(&l.info.path), l.info.kind.clone()));
                        let what = layer.as_ref().map_or_else(|| t.phase(p.phase).to_string(), |(path, kind)| format!("{path} ({kind}) · {}", t.phase(p.phase)));
                        html! {
                            <rect x={f(x)} y="0" width={f(w)} height={f(h - bottom - 8.0)} data-path={layer.map(|l| l.0)} data-bytes={p.bytes.to_string()}>
                                <title>{ format!("{what} · {}", ctx.bytes(p.bytes)) }</title>
                            </rect>
                        }
                    }) }
                </g>
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
