//! What the LLM setup answers below the estimate (issues 14–15, 22 item 4): trainable parameters,
//! the generation's prefill and decode peaks and KV cache, rank 0's host memory and its peak by
//! what the strategy allocates, the fewest GPUs that fit with rank 0's device total against the
//! number of GPUs (sized step by step, yielding to the page), and a language model's serving
//! capacity under vLLM. Every figure names its engine: PyTorch's `generate()` or training step
//! (the report's), or vLLM's paged pool (`llm::answers::serve_config`).

use super::{use_ctx, Ctx, Shared};
use crate::analysis::Report;
use crate::llm::answers::{rank_parts, serve_context, size, Sizing, CHART_GPUS, MAX_GPUS};
use std::rc::Rc;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{thousands, Mode, TrainConfig};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct AnswersProps {
    pub report: Shared<Report>,
    pub spec: Shared<ModelSpec>,
    pub config: TrainConfig,
    pub dist: DistConfig,
    pub capacity: u64,
    /// vLLM's answer for the model (serve and inference modes of a language model: `app`).
    #[prop_or_default]
    pub serving: Option<Shared<Result<vramcalc_core::serve::Capacity, vramcalc_core::Error>>>,
}

const COLOURS: [&str; 6] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#b07aa1"];
const REST: &str = "#bab0ac";

#[function_component(LlmAnswers)]
pub fn llm_answers(p: &AnswersProps) -> Html {
    let ctx = use_ctx();
    let (c, d) = (p.config, p.dist);
    let tuned = c.mode == Mode::Train && !c.finetune.is_default();
    let serving = &p.serving;
    let sizing = use_sizing((c.mode == Mode::Train && !d.is_default()).then(|| (p.spec.clone(), c, d, p.capacity)));
    if !tuned && c.mode != Mode::Generate && d.is_default() && serving.is_none() {
        return html! {};
    }
    let l = ctx.llm();
    let e = &p.report.estimate;
    let fig = |label: &'static str, testid: &'static str, bytes: u64| html! {
        <span class="figure-inline">{ label }{ ": " }<b data-testid={testid} data-bytes={bytes.to_string()}>{ ctx.bytes(bytes) }</b>{ " " }</span>
    };
    let bk = &e.breakdown;
    let engine = if c.mode == Mode::Generate { l.engine_hf } else { l.engine_train };
    html! {
        <section class="panel llm-answers" data-testid="llm-answers" aria-label={ctx.tr().llm_setup}>
            <p class="small llm-figures" data-testid="llm-figures">
                <span class="muted" data-testid="engine">{ engine }{ " · " }</span>
                if tuned {
                    <span>{ l.trainable }{ ": " }<b data-testid="trainable" data-count={e.trainable_params.to_string()}>{ thousands(e.trainable_params) }</b>
                        { format!(" ({:.2} %) ", e.trainable_params as f64 * 100.0 / e.params.max(1) as f64) }</span>
                    { fig(l.frozen_weights, "frozen-bytes", bk.frozen_parameters) }
                    if bk.adapter_parameters > 0 { { fig(l.adapters, "adapter-bytes", bk.adapter_parameters) } }
                }
                if let Some(g) = &e.generation {
                    { fig(l.prefill_peak, "prefill-peak", g.prefill_peak_bytes) }
                    { fig(l.decode_peak, "decode-peak", g.decode_peak_bytes) }
                }
                if bk.kv_cache > 0 { { fig(l.kv_cache_bytes, "kv-cache-bytes", bk.kv_cache) } }
                if let Some(dr) = &p.report.distributed {
                    <span data-testid="rank0" data-gpus={d.gpus.to_string()}>{ format!("{} / {} ", l.rank0, d.gpus) }</span>
                    { fig(l.host_memory, "host-memory", dr.host_bytes) }
                }
            </p>
            if let Some(dr) = &p.report.distributed { { rank_breakdown(&ctx, &dr.breakdown, e.peak_bytes) } }
            if let Some(g) = e.generation.as_ref().filter(|g| g.decode_series.len() > 1) { { decode_chart(&ctx, &g.decode_series) } }
            if c.mode == Mode::Train && !d.is_default() {
                <div class="gpu-chart" data-testid="gpu-answers">
                    { match &*sizing {
                        None => html! { <p class="small muted">{ l.sizing }</p> },
                        Some(s) => gpus_chart(&ctx, s, d, p.capacity),
                    } }
                </div>
            }
            if let Some(s) = serving { { serve_view(&ctx, s, serve_context(&p.spec, &c), c.batch) } }
        </section>
    }
}

type SizingRequest = (Shared<ModelSpec>, TrainConfig, DistConfig, u64);

/// The job's sizing, computed after the page is drawn, a world size per macrotask; a newer
/// request stops the one running. The fewest GPUs show as soon as they are known, the chart's
/// larger sizes after.
#[hook]
fn use_sizing(request: Option<SizingRequest>) -> UseStateHandle<Option<Rc<Sizing>>> {
    let answer = use_state(|| None::<Rc<Sizing>>);
    let issued = use_mut_ref(|| 0u64);
    {
        let answer = answer.clone();
        let key = request.as_ref().map(|r| (Rc::as_ptr(&r.0 .0) as usize, r.1, r.2, r.3));
        use_effect_with(key, move |_| {
            let n = {
                let mut i = issued.borrow_mut();
                *i += 1;
                *i
            };
            answer.set(None);
            if let Some((spec, c, d, cap)) = request {
                wasm_bindgen_futures::spawn_local(async move {
                    let stop = || *issued.borrow() != n;
                    let publish = |s: Sizing| {
                        if !stop() {
                            answer.set(Some(Rc::new(s)));
                        }
                    };
                    let pause = || crate::dom::yield_to_page(crate::dom::Priority::UserVisible);
                    if let Some(s) = size(&spec, &c, &d, cap, pause, stop, |s| publish(s.clone())).await {
                        publish(s);
                    }
                });
            }
        });
    }
    answer
}

fn rank_breakdown(ctx: &Ctx, x: &vramcalc_core::distributed::DistBreakdown, peak: u64) -> Html {
    let l = ctx.llm();
    let parts = rank_parts(x);
    let rest = parts.iter().fold(peak, |left, p| left.saturating_sub(p.1));
    let all: Vec<(&str, u64, &str)> = parts.iter().enumerate().map(|(i, p)| (p.0, p.1, COLOURS[i % COLOURS.len()])).chain([("rest", rest, REST)]).collect();
    html! {
        <div class="rank-breakdown" data-testid="rank-breakdown">
            <h3>{ l.rank_title }</h3>
            <div role="img" aria-label={l.rank_aria} data-testid="chart-rank" class="rank-bar">
                { for all.iter().map(|(id, bytes, colour)| html! {
                    <span data-testid={format!("rank-bar-{id}")} data-bytes={bytes.to_string()} title={format!("{}: {}", l.rank_part(id), ctx.bytes(*bytes))}
                        style={format!("flex:{bytes} 1 0;min-width:1px;background:{colour}")}></span>
                }) }
            </div>
            <ul class="small">
                { for all.iter().map(|(id, bytes, colour)| html! {
                    <li><i aria-hidden="true" class="swatch" style={format!("background:{colour}")}></i>{ l.rank_part(id) }{ ": " }
                        <b data-testid={format!("rank-{id}")} data-bytes={bytes.to_string()}>{ ctx.bytes(*bytes) }</b></li>
                }) }
            </ul>
        </div>
    }
}

fn decode_chart(ctx: &Ctx, series: &[(u64, u64)]) -> Html {
    let l = ctx.llm();
    let (w, h) = (360.0, 100.0);
    let (first, last) = (series[0].0 as f64, series[series.len() - 1].0 as f64);
    let lo = series.iter().map(|p| p.1).min().unwrap_or(0) as f64;
    let hi = series.iter().map(|p| p.1).max().unwrap_or(1) as f64;
    let x = |s: u64| (s as f64 - first) / (last - first).max(1.0) * w;
    let y = |v: u64| h - 4.0 - (v as f64 - lo) / (hi - lo).max(1.0) * (h - 8.0);
    let path: String = series.iter().enumerate().map(|(i, p)| format!("{}{:.1},{:.1}", if i == 0 { "M" } else { "L" }, x(p.0), y(p.1))).collect();
    let end = series[series.len() - 1];
    html! {
        <div class="decode-chart">
            <svg class="chart" viewBox={format!("0 0 {w} {}", h + 14.0)} role="img" aria-label={l.decode_chart} data-testid="chart-decode"
                data-steps={series.len().to_string()} data-last={end.1.to_string()}>
                <title>{ l.decode_chart }</title>
                <path class="line" d={path}></path>
                <text x="0" y={(h + 12.0).to_string()} class="axis-label">{ format!("{} {}", l.step, series[0].0) }</text>
                <text x={w.to_string()} y={(h + 12.0).to_string()} text-anchor="end" class="axis-label">{ format!("{} {}", l.step, end.0) }</text>
            </svg>
            <p class="small muted">{ format!("{}: {} → {}", l.decode_chart, ctx.bytes(series[0].1), ctx.bytes(end.1)) }</p>
        </div>
    }
}

fn gpus_chart(ctx: &Ctx, s: &Sizing, d: DistConfig, capacity: u64) -> Html {
    let l = ctx.llm();
    let fewest = match &s.fewest {
        Ok(Some((n, batch))) => html! {
            <p class="small" data-testid="fewest-gpus" data-gpus={n.to_string()} data-batch={batch.to_string()}>
                { l.fewest }{ " " }<b>{ n }</b>{ format!(" ({}) · {} ", d.strategy.name(), l.largest_batch_there) }<b>{ batch }</b>
            </p>
        },
        Ok(None) => html! { <p class="small" data-testid="fewest-gpus" data-gpus="">{ format!("{} {MAX_GPUS}", l.no_fit_up_to) }</p> },
        Err(e) => html! { <p class="small error" data-testid="fewest-gpus">{ e }</p> },
    };
    let top = s.points.iter().map(|p| p.2).max().unwrap_or(0).max(capacity).max(1);
    let (w, h, bar) = (360u64, 120u64, 40u64);
    let y = |v: u64| h - (v as f64 / top as f64 * (h - 16) as f64) as u64;
    let cap = y(capacity).to_string();
    debug_assert!(s.points.len() <= CHART_GPUS.len());
    html! {
        <>
            { fewest }
            <svg class="chart" viewBox={format!("0 0 {w} {}", h + 16)} role="img" aria-label={l.gpus_chart} data-testid="chart-gpus">
                <title>{ l.gpus_chart }</title>
                { for s.points.iter().enumerate().map(|(i, &(n, _, total))| {
                    let x = 8 + i as u64 * (bar + 10);
                    html! { <>
                        <rect class={if total <= capacity { "fits" } else { "over" }} x={x.to_string()} y={y(total).to_string()} width={bar.to_string()}
                            height={(h - y(total)).to_string()} data-gpus={n.to_string()} data-bytes={total.to_string()}>
                            <title>{ format!("{n} × GPU: {}", ctx.bytes(total)) }</title>
                        </rect>
                        <text x={(x + bar / 2).to_string()} y={(h + 12).to_string()} text-anchor="middle">{ n }</text>
                    </> }
                }) }
                <line class="capacity" x1="0" x2={w.to_string()} y1={cap.clone()} y2={cap}></line>
            </svg>
        </>
    }
}

fn serve_view(ctx: &Ctx, cap: &Result<vramcalc_core::serve::Capacity, vramcalc_core::Error>, context: u64, batch: u64) -> Html {
    let l = ctx.llm();
    let cap = match cap {
        Ok(c) => c,
        Err(e) => return html! { <p class="small error" data-testid="serve-error">{ e.to_string() }</p> },
    };
    let longest = cap.max_context_at_concurrency.map_or_else(|| "—".to_string(), thousands);
    let graphs = if cap.cuda_graph_in_budget { cap.cuda_graph_bytes } else { 0 };
    let rows = [
        (format!("{} × {}", l.gpu_memory, cap.gpu_memory_utilization), cap.requested_bytes, "serve-requested"),
        (format!("− {} ({})", l.serve_weights, cap.weights_format), cap.weights_bytes, "serve-weights"),
        (format!("− {}*", l.serve_activations), cap.activation_peak_bytes, "serve-activations"),
        (format!("− {}*", l.serve_non_torch), cap.non_torch_bytes, "serve-non-torch"),
        (format!("− {}*", l.serve_graphs), graphs, "serve-cuda-graphs"),
        (format!("= {} ({})", l.serve_pool, cap.kv_dtype), cap.kv_pool_bytes, "serve-kv-pool"),
    ];
    let outside = (!cap.cuda_graph_in_budget).then(|| {
        format!(" {} {}*, {} {}*.", l.outside_graphs, ctx.bytes(cap.cuda_graph_bytes), l.cuda_context, ctx.bytes(vramcalc_core::memory::device::CUDA_CONTEXT_BYTES))
    });
    html! {
        <div class="serve" data-testid="serve">
            <h3>{ l.serve_title }</h3>
            <table class="small"><tbody>
                { for rows.iter().map(|(label, bytes, id)| html! {
                    <tr><td>{ label }</td><td class="num" data-testid={*id} data-bytes={bytes.to_string()}>{ ctx.bytes(*bytes) }</td></tr>
                }) }
            </tbody></table>
            <p class="small">
                <b data-testid="serve-tokens" data-count={cap.kv_tokens.to_string()}>{ thousands(cap.kv_tokens) }</b>
                { format!(" {} ({} {}) · ", l.serve_tokens, ctx.bytes(cap.kv_bytes_per_token), l.per_token) }
                <b data-testid="serve-max-concurrency" data-count={cap.max_concurrency.to_string()}>{ thousands(cap.max_concurrency) }</b>
                { format!(" {} {} · ", l.sequences_of, thousands(context)) }
                <b data-testid="serve-max-context" data-count={cap.max_context_at_concurrency.unwrap_or(0).to_string()}>{ longest }</b>
                { format!(" {} {} {}", l.tokens_of_context_at, thousands(batch), l.concurrent) }
            </p>
            <p class="small muted">{ l.serve_note }{ outside.unwrap_or_default() }</p>
        </div>
    }
}
