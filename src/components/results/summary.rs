//! The headline figures against the GPU, the capacity bar and the breakdown.

use crate::analysis::Report;
use crate::components::charts::{breakdown_chart, capacity_chart};
use crate::components::{percent, use_ctx, Shared};
use crate::i18n::fill;
use crate::state::GpuChoice;
use vramcalc_core::{thousands, Error};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct SummaryProps {
    /// The last good report (kept on screen while the current input has an error).
    pub report: Option<Shared<Report>>,
    pub gpu: GpuChoice,
    #[prop_or_default]
    pub error: Option<Error>,
}

#[function_component(Summary)]
pub fn summary(p: &SummaryProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let stale = p.error.as_ref().map(|e| html! {
        <div class="stale" role="alert" data-testid="estimate-error"><b>{ t.stale }</b>{ " " }<span>{ e.to_string() }</span></div>
    });
    let Some(r) = &p.report else {
        return html! {
            <section class="panel summary" data-testid="summary"><h2>{ t.results }</h2>{ for stale }<p>{ t.no_result }</p></section>
        };
    };
    let e = &r.estimate;
    let fits = e.device_total_bytes <= r.capacity;
    let gpu_name = match &p.gpu {
        GpuChoice::Listed(id) => vramcalc_core::memory::device::gpu(id).map(|g| g.name).unwrap_or(id.as_str()).to_string(),
        GpuChoice::Custom(_) => t.custom_capacity.trim_end_matches('…').to_string(),
    };
    let fit_text = if fits {
        fill(t.fits, &[&ctx.bytes(r.capacity - e.device_total_bytes)])
    } else {
        fill(t.does_not_fit, &[&ctx.bytes(e.device_total_bytes - r.capacity)])
    };
    let rule = e.rule_of_thumb_bytes;
    html! {
        <section class={classes!("panel", "summary", p.error.is_some().then_some("is-stale"))} aria-labelledby="summary-h" data-testid="summary">
            <h2 id="summary-h">{ t.results }</h2>
            { for stale }
            <div class="headline">
                <div class="figure main">
                    <span class="label" title={t.peak_help}>{ t.peak }</span>
                    <b data-testid="peak" data-bytes={e.peak_bytes.to_string()}>{ ctx.bytes(e.peak_bytes) }</b>
                    <small class="muted">{ t.peak_help }</small>
                </div>
                <div class="figure">
                    <span class="label" title={t.device_total_help}>{ t.device_total }</span>
                    <b data-testid="device-total" data-bytes={e.device_total_bytes.to_string()}>{ ctx.bytes(e.device_total_bytes) }</b>
                    <small class="muted">{ t.device_total_help }</small>
                </div>
                <div class="figure">
                    <span class="label">{ t.parameters }</span>
                    <b data-testid="params" data-count={e.params.to_string()}>{ thousands(e.params) }</b>
                    <small class="muted">{ format!("{} · {}", ctx.bytes(e.param_bytes), e.config.precision) }</small>
                </div>
            </div>
            <p class={classes!("fit", if fits { "ok" } else { "over" })} data-testid="fit-status" data-fits={fits.to_string()}>
                <span class="fit-icon" aria-hidden="true">{ if fits { "✓" } else { "✗" } }</span>
                { fit_text }{ " " }<span class="muted">{ fill(t.on_gpu, &[&gpu_name, &ctx.bytes(r.capacity)]) }</span>
            </p>
            { capacity_chart(&ctx, r) }
            <p class="small"><span class="muted">{ t.peak_at }{ ": " }</span><code data-testid="peak-at">{ &e.peak_at }</code></p>
            <p class="rule small" data-testid="rule-of-thumb" data-bytes={rule.to_string()}>
                <b>{ t.rule_of_thumb }{ ": " }{ ctx.bytes(rule) }</b>{ " — " }
                { fill(t.vs_rule, &[&percent(e.peak_bytes, rule)]) }
                <br /><span class="muted">{ t.rule_of_thumb_help }</span>
            </p>
            <h3>{ t.breakdown }</h3>
            { breakdown_chart(&ctx, r) }
        </section>
    }
}
