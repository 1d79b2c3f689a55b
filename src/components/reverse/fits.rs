//! "What fits my GPU": the presets × six formats for the page's GPU and a workload (the page's
//! mode's by default), computed by the app's worker one model per request after the panel is
//! opened, so the page stays responsive; each row links to its full estimate.

use crate::components::use_ctx;
use crate::i18n::fill;
use crate::reverse::fits::{link, models};
use crate::state::GpuChoice;
use std::rc::Rc;
use vramcalc_core::solve::fits::{FitsOptions, Row, Workload};
use vramcalc_core::thousands;
use web_sys::HtmlSelectElement;
use yew::prelude::*;

#[derive(Properties, PartialEq, Clone)]
pub struct FitsProps {
    pub gpu: GpuChoice,
    /// The page's mode's workload (`reverse::fits::workload_of`).
    pub workload: Workload,
    pub options: FitsOptions,
}

#[function_component(FitsTable)]
pub fn fits_table(p: &FitsProps) -> Html {
    let ctx = use_ctx();
    let m = ctx.modes();
    let open = use_state(|| false);
    let chosen = use_state(|| None::<Workload>);
    let w = chosen.unwrap_or(p.workload);
    // (rows so far, models done, models in all)
    let table = use_state(|| (Rc::new(Vec::<Rc<Row>>::new()), 0usize, 0usize));
    let issued = use_mut_ref(|| 0u64);
    {
        let (table, cap, o) = (table.clone(), p.gpu.capacity(), p.options);
        use_effect_with((*open, w, cap, o), move |&(open, w, cap, o)| {
            let n = {
                let mut i = issued.borrow_mut();
                *i += 1;
                *i
            };
            if open {
                let ids = models(w);
                table.set((Rc::new(Vec::new()), 0, ids.len()));
                wasm_bindgen_futures::spawn_local(async move {
                    let mut rows = Vec::new();
                    let stop = || *issued.borrow() != n;
                    for (done, id) in ids.iter().enumerate() {
                        // a model's rows per request to the app's worker (its llama.cpp rows
                        // need llama.cpp's estimate, which is not in the app's bundle)
                        let model_rows = crate::worker::fits_rows(id, w, cap, o).await;
                        if stop() {
                            return;
                        }
                        rows.extend(model_rows.into_iter().map(Rc::new));
                        table.set((Rc::new(rows.clone()), done + 1, ids.len()));
                    }
                });
            }
        });
    }
    let ontoggle = { let open = open.clone(); Callback::from(move |e: Event| open.set(e.target_unchecked_into::<web_sys::HtmlDetailsElement>().open())) };
    let onchange = { let chosen = chosen.clone(); Callback::from(move |e: Event| chosen.set(Workload::parse(&e.target_unchecked_into::<HtmlSelectElement>().value()))) };
    let (rows, done, all) = (*table).clone();
    html! {
        <details class="panel fits" data-testid="fits-table" {ontoggle}>
            <summary><h2 class="inline">{ m.fits_h }</h2></summary>
            <p class="small muted">{ m.fits_help }</p>
            <div class="field">
                <label for="fits-workload">{ m.workload }</label>
                <select id="fits-workload" data-testid="fits-workload" {onchange}>
                    { for Workload::ALL.iter().map(|x| html! { <option value={x.name()} selected={*x == w}>{ x.name() }</option> }) }
                </select>
            </div>
            <p class="small muted" data-testid="fits-progress" data-done={done.to_string()} data-all={all.to_string()}>{ fill(m.rows_done, &[&done.to_string(), &all.to_string()]) }</p>
            <div class="table-wrap" tabindex="0" role="region" aria-label={m.fits_h}>
                <table class="small">
                    <thead><tr>
                        <th>{ m.model }</th><th>{ m.format }</th><th>{ m.fits }</th><th class="num">{ m.margin }</th>
                        <th class="num">{ m.variable(w.reverse(), ctx.zh()) }</th><th></th>
                    </tr></thead>
                    <tbody>
                        { for rows.iter().enumerate().map(|(i, r)| html! {
                            <FitsRow key={i} row={r.clone()} workload={w} options={p.options} gpu={p.gpu.clone()} />
                        }) }
                    </tbody>
                </table>
            </div>
        </details>
    }
}

#[derive(Properties, PartialEq)]
struct FitsRowProps {
    row: Rc<Row>,
    workload: Workload,
    options: FitsOptions,
    gpu: GpuChoice,
}

/// One row of the table, its own component so that a model's new rows render only themselves:
/// the table grows a model at a time, and each row's link is a share link encoded and
/// compressed (on a phone, re-rendering every row for each model made each update 200–490 ms).
#[function_component(FitsRow)]
fn fits_row(p: &FitsRowProps) -> Html {
    let ctx = use_ctx();
    let m = ctx.modes();
    let r = &*p.row;
    let margin = if r.margin_bytes >= 0 { ctx.bytes(r.margin_bytes as u64) } else { format!("−{}", ctx.bytes(r.margin_bytes.unsigned_abs())) };
    let href = link(r, p.workload, &p.options, &p.gpu, ctx.unit, ctx.lang.code());
    html! {
        <tr data-testid="fits-row" data-model={r.model.clone()} data-format={r.format.clone()} data-fits={r.fits.to_string()}
            data-margin={r.margin_bytes.to_string()} data-reverse={r.reverse_value.map(|v| v.to_string()).unwrap_or_default()}>
            <td>{ &r.model }</td><td><code>{ &r.format }</code></td>
            <td class={if r.fits { "ok" } else { "over" }}>{ if r.fits { m.yes } else { m.no } }</td>
            <td class="num">{ margin }</td>
            <td class="num">{ r.reverse_value.map_or_else(|| "—".to_string(), thousands) }</td>
            <td>if let Some(h) = href { <a href={h} data-testid="fits-open">{ m.open }</a> }</td>
        </tr>
    }
}
