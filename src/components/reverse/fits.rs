//! "What fits my GPU": the presets × six formats for the page's GPU and a workload (the page's
//! mode's by default), computed one row per task after the panel is opened, so the page stays
//! responsive; each row links to its full estimate.

use crate::dom::{yield_to_page, Priority};
use crate::components::use_ctx;
use crate::i18n::fill;
use crate::reverse::fits::{link, models};
use crate::state::GpuChoice;
use std::rc::Rc;
use vramcalc_core::solve::fits::{FitsOptions, Row, RowSteps, Workload};
use vramcalc_core::thousands;
use web_sys::HtmlSelectElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
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
    let table = use_state(|| (Rc::new(Vec::<Row>::new()), 0usize, 0usize));
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
                        yield_to_page(Priority::Background).await; // the model built in one task, then a row per task
                        if stop() {
                            return;
                        }
                        let Ok(spec) = vramcalc_core::import::preset(id) else { continue };
                        for format in w.formats() {
                            // a row in up to three tasks (resolved, enveloped, read): a large
                            // model's full-training row is over 200 ms in one
                            let gpus = [cap];
                            let mut steps = RowSteps::new(id, &spec, w, format, &gpus, &o);
                            let row = loop {
                                yield_to_page(Priority::Background).await;
                                if stop() {
                                    return;
                                }
                                if let Some(row) = steps.step() {
                                    break row.ok();
                                }
                            };
                            rows.extend(row);
                        }
                        table.set((Rc::new(rows.clone()), done + 1, ids.len()));
                    }
                });
            }
        });
    }
    let ontoggle = { let open = open.clone(); Callback::from(move |e: Event| open.set(e.target_unchecked_into::<web_sys::HtmlDetailsElement>().open())) };
    let onchange = { let chosen = chosen.clone(); Callback::from(move |e: Event| chosen.set(Workload::parse(&e.target_unchecked_into::<HtmlSelectElement>().value()))) };
    let (rows, done, all) = (*table).clone();
    let lang = ctx.lang.code();
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
                        { for rows.iter().map(|r| {
                            let margin = if r.margin_bytes >= 0 { ctx.bytes(r.margin_bytes as u64) } else { format!("−{}", ctx.bytes(r.margin_bytes.unsigned_abs())) };
                            let href = link(r, w, &p.options, &p.gpu, ctx.unit, lang);
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
                        }) }
                    </tbody>
                </table>
            </div>
        </details>
    }
}
