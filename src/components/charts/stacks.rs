//! Stacked bars of bytes, one row each (`crate::charts::stacks`): llama.cpp's devices, a
//! pipeline's stages in run order. The largest row is marked `peak`, a row over its capacity
//! `over`, and the capacity is a line.

use crate::charts::{f, stacks};
use crate::components::Ctx;
use yew::prelude::*;

/// `part_label` names a part's key in the tooltips.
pub fn stacks_chart(ctx: &Ctx, rows: &[stacks::StackInput], left: f64, title: &'static str, testid: &'static str, part_label: impl Fn(&str) -> &'static str) -> Html {
    let (cw, row_h) = (ctx.chart_width(), 26.0);
    let g = stacks::stacks(rows, cw - left - 12.0, row_h, ctx.unit);
    let h = g.height + 24.0;
    let mut keys: Vec<&'static str> = Vec::new();
    for s in g.rows.iter().flat_map(|r| &r.segments) {
        if !keys.contains(&s.key) {
            keys.push(s.key);
        }
    }
    html! {
        <figure class="stacks-fig">
        <svg class="chart stacks" viewBox={format!("0 0 {cw} {h}")} role="img" aria-label={title} data-testid={testid}>
            <title>{ title }</title>
            { for g.rows.iter().enumerate().map(|(i, r)| html! {
                <g transform={format!("translate(0,{})", f(r.y + 4.0))} class={classes!((g.peak == Some(i)).then_some("peak"), r.over.then_some("over"))}>
                    <text x={f(left - 6.0)} y={f(row_h / 2.0)} text-anchor="end" class="axis-label">{ &r.label }</text>
                    { for r.segments.iter().map(|s| html! {
                        <rect x={f(left + s.x)} y="2" width={f(s.w)} height={f(row_h - 8.0)} class={classes!("seg", s.key)}>
                            <title>{ format!("{}: {}", part_label(s.key), ctx.bytes(s.bytes)) }</title>
                        </rect>
                    }) }
                    if let Some(x) = r.cap_x {
                        <line x1={f(left + x)} x2={f(left + x)} y1="0" y2={f(row_h - 4.0)} class="cap-line" />
                    }
                </g>
            }) }
            <g transform={format!("translate({left},{})", f(g.height + 16.0))} class="axis-label">
                { for g.ticks.iter().map(|(x, b)| html! { <text x={f(*x)} y="0" text-anchor="middle">{ ctx.bytes(*b) }</text> }) }
            </g>
        </svg>
        <ul class="legend">
            { for keys.iter().map(|k| html! {
                <li><span class={classes!("swatch", *k)} aria-hidden="true"></span><span>{ part_label(k) }</span></li>
            }) }
        </ul>
        </figure>
    }
}
