//! The per-layer table (cs231n's VGG16 table for any model): name (the model's own, else the
//! path), kind, output shape, params, output values per sample, bytes saved for backward.

use super::Ctx;
use crate::analysis::Report;
use vramcalc_core::thousands;
use yew::prelude::*;

/// Rows shown before "show all".
const FIRST_ROWS: usize = 30;

/// A plain view function (no component's lifecycle code in the bundle): `all` ("show all rows")
/// is kept by its panel, [`crate::components::results::Charts`], which re-renders it only when the
/// report or that choice changes.
pub fn layer_table(ctx: &Ctx, report: &Report, all: &UseStateHandle<bool>) -> Html {
    let t = ctx.tr();
    let layers = &report.estimate.layers;
    let n = layers.len();
    let shown = if **all { n } else { n.min(FIRST_ROWS) };
    let toggle = { let all = all.clone(); Callback::from(move |_| all.set(!*all)) };
    html! {
        <div class="table-wrap">
            <p class="scroll-hint muted small" aria-hidden="true">{ "⇠ ⇢" }</p>
            <div class="table-scroll" tabindex="0" role="group" aria-label={t.per_layer}>
            <table class="layer-table" data-testid="layer-table">
                <thead><tr>
                    <th scope="col">{ t.col_layer }</th><th scope="col">{ t.col_kind }</th><th scope="col">{ t.col_output }</th>
                    <th scope="col" class="num">{ t.col_params }</th><th scope="col" class="num">{ t.col_values }</th>
                    <th scope="col" class="num">{ t.col_saved }</th>
                </tr></thead>
                <tbody>
                    { for layers[..shown].iter().map(|l| {
                        // fine-tuning: a layer whose weights all freeze, or one that trains only its adapters
                        let (p, tr) = (l.info.params, l.info.trainable_params);
                        let mark = match () {
                            _ if l.info.block || p == 0 || tr == p => None,
                            _ if tr == 0 => Some(("frozen", "❄", t.frozen.to_string())),
                            _ => Some(("adapter", "+", format!("{}: {}", t.trainable, thousands(tr)))),
                        };
                        html! {
                        <tr class={classes!(l.info.block.then_some("block"))} data-testid="layer-table-row" data-train={mark.as_ref().map(|m| m.0)} data-path={l.info.path.clone()}>
                            <td style={format!("padding-left:{}em", 0.4 + l.info.depth as f64 * 0.9)}>{ row_name(l) }</td>
                            <td>{ &l.info.kind }</td>
                            <td>{ l.info.output_shape.to_string() }</td>
                            <td class="num">{ thousands(l.info.params) }
                                if let Some((_, sign, title)) = mark { <span class="train-mark" {title}>{ sign }</span> }
                            </td>
                            <td class="num">{ thousands(l.info.activation_values) }</td>
                            <td class="num">{ ctx.bytes(l.saved_bytes) }</td>
                        </tr>
                    }}) }
                </tbody>
            </table>
            </div>
            if n > FIRST_ROWS {
                <button onclick={toggle} data-testid="table-toggle">
                    { if **all { t.show_fewer.to_string() } else { crate::i18n::fill(t.show_all, &[&n.to_string()]) } }
                </button>
            }
        </div>
    }
}

/// A row's label: the model's own name for the layer (`model.layers.3`) with its path as the
/// title, or the path where the model names nothing.
fn row_name(l: &vramcalc_core::memory::LayerReport) -> Html {
    let path = &l.info.path;
    html! { <code title={l.info.name.is_some().then(|| path.clone())}>{ l.info.name.as_ref().unwrap_or(path) }</code> }
}
