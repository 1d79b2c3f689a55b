//! What llama.cpp allocates, device by device (`vramcalc_core::llama_cpp::Estimate`): a table
//! and stacked bars of each device's buffers against its memory, the reverse answers (largest
//! context, most GPU layers) and the `llama-server` command to copy.

use crate::charts::stacks;
use crate::components::charts::stacks_chart;
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
    // Only models with recurrent layers (Mamba, hybrids) have a state column.
    let has_state = e.devices.iter().any(|d| d.rs() > 0);
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
                if has_state { { cell("dev-state", d.rs()) } }
                { cell("dev-compute", d.compute) }
                { cell("dev-output", d.output) }
                { cell("dev-total", d.total()) }
                <td class="num">{ d.capacity.map_or("—".to_string(), |c| ctx.bytes(c)) }</td>
                <td class={classes!(if d.fits() { "ok" } else { "bad" })}>{ fits }</td>
            </tr>
        }
    });
    let inputs: Vec<stacks::StackInput> = e
        .devices
        .iter()
        .map(|d| stacks::StackInput { label: device_name(d, t.host), parts: vec![("model", d.model), ("kv", d.kv()), ("state", d.rs()), ("compute", d.compute), ("output", d.output)], capacity: d.capacity })
        .collect();
    let part_label = |k: &str| match k {
        "model" => t.model,
        "kv" => t.kv,
        "state" => t.state,
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
            <div class="table-wrap table-scroll">
                <table class="devices">
                    <thead><tr>
                        <th scope="col">{ t.device }</th><th scope="col">{ t.model }</th><th scope="col">{ t.kv }</th>
                        if has_state { <th scope="col">{ t.state }</th> }
                        <th scope="col">{ t.compute }</th><th scope="col">{ t.output }</th><th scope="col">{ t.total }</th>
                        <th scope="col">{ t.capacity }</th><th scope="col">{ t.verdict }</th>
                    </tr></thead>
                    <tbody>{ for rows }</tbody>
                </table>
            </div>
            { stacks_chart(&ctx, &inputs, 150.0, t.chart, "chart-devices", part_label) }
            if a.reverse {
                <dl class="reverse">
                    <dt>{ t.max_ctx }</dt>
                    <dd data-testid="max-ctx" data-value={a.max_ctx.map(|c| c.to_string()).unwrap_or_default()}>
                        { a.max_ctx.map_or(t.none_fits.to_string(), |c| format!("-c {c}")) }
                        // under Ollama, per request: -c is num_ctx × OLLAMA_NUM_PARALLEL
                        if let (Some(c), Some((_, _, np))) = (a.max_ctx, &a.ollama) {
                            { format!(" ({} {})", t.max_num_ctx, c / np.max(&1)) }
                        }
                    </dd>
                    if e.gpus().next().is_some() {
                        <dt>{ t.max_ngl }</dt>
                        <dd data-testid="max-ngl" data-value={a.max_ngl.map(|x| x.0.to_string()).unwrap_or_default()}>{ ngl }</dd>
                    }
                </dl>
            }
            if let Some((modelfile, num_ctx, np)) = &a.ollama {
                <div class="command">
                    <h4>{ t.modelfile }</h4>
                    <pre data-testid="ollama-modelfile" data-num-ctx={num_ctx.to_string()} data-parallel={np.to_string()}><code>{ modelfile }</code></pre>
                </div>
            }
            if let Some((line, rest)) = &a.lms {
                <div class="command">
                    <h4>{ t.lms_command }</h4>
                    <pre data-testid="lms-command"><code>{ line }</code></pre>
                    if !rest.is_empty() {
                        <p class="small" data-testid="lms-settings">{ t.lms_rest }{ " " }{ rest.join(" · ") }</p>
                    }
                </div>
            }
            <div class="command">
                <h4>{ if a.ollama.is_some() { t.ollama_run } else if a.lms.is_some() { t.llama_equiv } else { t.command } }</h4>
                <pre data-testid="llama-command"><code>{ &a.command }</code></pre>
                <button type="button" data-testid="llama-copy" onclick={on_copy}>{ t.copy }{ match *copied { Some(true) => " ✓", Some(false) => " ✗", None => "" } }</button>
            </div>
        </div>
    }
}

#[derive(Properties, PartialEq)]
pub struct QuantFitsProps {
    /// The built-in model (`local::quant_models`).
    pub model: String,
    pub settings: crate::state::local::LocalSettings,
}

/// Which `llama-quantize` types of the model fit every device with these settings.
#[function_component(QuantFits)]
pub fn quant_fits(p: &QuantFitsProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.local();
    // after the answer is drawn, one quant per request to the app's worker (a 30B MoE under
    // Ollama fits its layers for each of the twelve)
    let fits = crate::hooks::use_deferred_future((p.model.clone(), p.settings.clone()), 150, |(m, s)| async move {
        let mut out = Vec::new();
        for q in crate::local::QUANTS {
            // by the app's worker, one type per request
            out.push((*q, crate::worker::llama::quant_fit(&m, q, &s).await));
        }
        Some(out)
    });
    let Some(fits) = fits else { return html! {} };
    html! {
        <div class="quant-fits" data-testid="quant-fits">
            <h4>{ t.quant_fits }</h4>
            <ul class="chips plain">
                { for fits.iter().map(|(q, f)| {
                    let (class, mark) = match f {
                        Some(true) => ("chip ok", "✓"),
                        Some(false) => ("chip bad", "✗"),
                        None => ("chip", "?"),
                    };
                    html! { <li class={class} data-testid="quant-fit" data-quant={*q} data-fits={f.map_or("unknown".to_string(), |b| b.to_string())}>{ format!("{q} {mark}") }</li> }
                }) }
            </ul>
        </div>
    }
}
