//! What llama.cpp allocates, device by device (`vramcalc_core::llama_cpp::Estimate`): a table
//! and stacked bars of each device's buffers against its memory, the reverse answers (largest
//! context, most GPU layers) and the `llama-server` command to copy.

use crate::charts::{f, stacks};
use crate::components::use_ctx;
use crate::local::Answer;
use std::rc::Rc;
use vramcalc_core::llama_cpp::DeviceReport;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct AnswerProps {
    pub answer: Rc<Answer>,
}

fn device_name(d: &DeviceReport, host: &str) -> String {
    if d.is_host() {
        host.to_string()
    } else {
        format!("{} ({})", d.backend, d.gpu)
    }
}

#[function_component(LocalAnswer)]
pub fn local_answer(p: &AnswerProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.local();
    let a = &p.answer;
    let e = &a.estimate;
    let copied = use_state(|| None::<bool>);
    let cell = |id: &'static str, b: u64| html! { <td class="num" data-testid={id} data-bytes={b.to_string()}>{ ctx.bytes(b) }</td> };
    let rows = e.devices.iter().map(|d| {
        let fits = match d.capacity {
            None => t.unknown,
            Some(_) if d.fits() => t.fits,
            Some(_) => t.over,
        };
        html! {
            <tr data-testid="device-row" data-backend={d.backend.clone()} data-fits={d.fits().to_string()}>
                <th scope="row">{ device_name(d, t.host) }</th>
                { cell("dev-model", d.model) }
                { cell("dev-kv", d.kv()) }
                { cell("dev-compute", d.compute) }
                { cell("dev-output", d.output) }
                { cell("dev-total", d.total()) }
                <td class="num">{ d.capacity.map_or("—".to_string(), |c| ctx.bytes(c)) }</td>
                <td class={classes!(if d.fits() { "ok" } else { "bad" })}>{ fits }</td>
            </tr>
        }
    });
    let (cw, left, row_h) = (ctx.chart_width(), 150.0, 26.0);
    let inputs: Vec<stacks::StackInput> = e
        .devices
        .iter()
        .map(|d| stacks::StackInput { label: device_name(d, t.host), parts: vec![("model", d.model), ("kv", d.kv()), ("compute", d.compute), ("output", d.output)], capacity: d.capacity })
        .collect();
    let g = stacks::stacks(&inputs, cw - left - 12.0, row_h, ctx.unit);
    let h = g.height + 24.0;
    let part_label = |k: &str| match k {
        "model" => t.model,
        "kv" => t.kv,
        "compute" => t.compute,
        _ => t.output,
    };
    let on_copy = {
        let (cmd, copied) = (a.command.clone(), copied.clone());
        Callback::from(move |_| {
            let copied = copied.clone();
            crate::dom::copy_text(&cmd, move |ok| copied.set(Some(ok)));
        })
    };
    let ngl = match a.max_ngl {
        Some((n, host)) => format!("{n} / {} ({} {})", e.n_layer + 1, t.host_then, ctx.bytes(host)),
        None => t.none_fits.to_string(),
    };
    html! {
        <div class="local-answer" data-testid="llama-answer" data-fits={e.fits().to_string()}>
            <h3>{ t.answer }</h3>
            <p class="totals">
                <span data-testid="llama-total" data-bytes={e.total().to_string()}>{ format!("{} {}", t.total, ctx.bytes(e.total())) }</span>
                { " · " }<span data-testid="llama-model" data-bytes={e.model_bytes().to_string()}>{ format!("{} {}", t.model, ctx.bytes(e.model_bytes())) }</span>
                { " · " }<span data-testid="llama-kv" data-bytes={e.kv_bytes().to_string()}>{ format!("{} {} (-c {})", t.kv, ctx.bytes(e.kv_bytes()), e.ctx.n_ctx) }</span>
                { " · " }<span data-testid="llama-compute" data-bytes={e.compute_bytes().to_string()}>{ format!("{} {}", t.compute, ctx.bytes(e.compute_bytes())) }</span>
            </p>
            <div class="table-wrap">
                <table class="devices">
                    <thead><tr>
                        <th scope="col">{ t.device }</th><th scope="col">{ t.model }</th><th scope="col">{ t.kv }</th>
                        <th scope="col">{ t.compute }</th><th scope="col">{ t.output }</th><th scope="col">{ t.total }</th>
                        <th scope="col">{ t.capacity }</th><th scope="col"></th>
                    </tr></thead>
                    <tbody>{ for rows }</tbody>
                </table>
            </div>
            <svg class="chart stacks" viewBox={format!("0 0 {cw} {h}")} role="img" aria-label={t.chart} data-testid="chart-devices">
                <title>{ t.chart }</title>
                { for g.rows.iter().map(|r| html! {
                    <g transform={format!("translate(0,{})", f(r.y + 4.0))} class={classes!(r.over.then_some("over"))}>
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
            if a.reverse {
                <dl class="reverse">
                    <dt>{ t.max_ctx }</dt>
                    <dd data-testid="max-ctx" data-value={a.max_ctx.map(|c| c.to_string()).unwrap_or_default()}>{ a.max_ctx.map_or(t.none_fits.to_string(), |c| c.to_string()) }</dd>
                    if e.gpus().next().is_some() {
                        <dt>{ t.max_ngl }</dt>
                        <dd data-testid="max-ngl" data-value={a.max_ngl.map(|x| x.0.to_string()).unwrap_or_default()}>{ ngl }</dd>
                    }
                </dl>
            }
            <div class="command">
                <h4>{ t.command }</h4>
                <pre data-testid="llama-command"><code>{ &a.command }</code></pre>
                <button type="button" data-testid="llama-copy" onclick={on_copy}>{ t.copy }{ match *copied { Some(true) => " ✓", Some(false) => " ✗", None => "" } }</button>
            </div>
        </div>
    }
}
