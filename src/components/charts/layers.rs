//! The per-layer chart.

use crate::analysis::Report;
use crate::charts::{bars, f};
use crate::components::{use_ctx, Shared};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct ChartProps {
    pub report: Shared<Report>,
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
