//! The headline figures, the capacity bar and the breakdown (the verdict is the sticky bar's).

use crate::analysis::Report;
use crate::components::charts::{breakdown_chart, capacity_chart};
use crate::components::{percent, Ctx, Shared};
use crate::fix;
use crate::i18n::fill;
use crate::import::checkpoint::{HubCheckpoint, Source};
use vramcalc_core::safetensors::disagreement;
use vramcalc_core::memory::param_copies;
use vramcalc_core::{thousands, Error, Mode};
use yew::prelude::*;

pub struct SummaryProps {
    /// The last good report (kept on screen while the current input has an error).
    pub report: Option<Shared<Report>>,
    pub error: Option<Error>,
    /// The repair the error suggests ([`fix::suggest`]): its field, value and action.
    pub fix: Option<(&'static str, u64, Callback<MouseEvent>)>,
    /// `(sequence length, context)` a Hugging Face import assumed.
    pub assumed_seq: Option<(u64, u64)>,
    /// The hub model's checkpoint as stored, shown beside the modelled weights.
    pub checkpoint: Option<HubCheckpoint>,
}

/// A plain view function (its figures change with nearly every render of the app).
pub fn summary(ctx: &Ctx, p: SummaryProps) -> Html {
    let t = ctx.tr();
    // The error names its row: a link there, and the one-click fix when the message implies one.
    let stale = p.error.as_ref().map(|e| {
        let goto = fix::error_path(e).map(|path| {
            let path = path.to_string();
            let onclick = { let (path, d) = (path.clone(), ctx.dispatch.clone()); Callback::from(move |_| crate::dom::go_to_row(&d, path.clone())) };
            html! { <button class="link" {onclick} data-testid="error-goto">{ fill(t.go_to_row, &[&path]) }</button> }
        });
        let repair = p.fix.clone().map(|(field, value, onclick)| html! {
            <button class="fix" {onclick} data-testid="error-fix">{ fill(t.fix_field, &[field, &value.to_string()]) }</button>
        });
        html! {
            <div class="stale" role="alert" data-testid="estimate-error">
                <b>{ t.stale }</b>{ " " }<span>{ e.to_string() }</span>{ " " }{ for goto }{ " " }{ for repair }
            </div>
        }
    });
    let Some(r) = &p.report else {
        return html! {
            <section class="panel summary" data-testid="results"><h2>{ t.results }</h2>{ for stale }<p>{ t.no_result }</p></section>
        };
    };
    let e = &r.estimate;
    let rule = e.rule_of_thumb_bytes;
    let rule_help = match e.config.mode {
        Mode::Infer | Mode::Generate => t.rule_help_infer.to_string(),
        Mode::Train => fill(t.rule_of_thumb_help, &[&param_copies(&e.config).to_string(), e.config.optimizer.name()]),
    };
    html! {
        <section class={classes!("panel", "summary", p.error.is_some().then_some("is-stale"))} aria-labelledby="summary-h" data-testid="results">
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
            { for p.checkpoint.as_ref().map(|c| checkpoint_note(ctx, c, e.param_bytes)) }
            if let Some((l, c)) = p.assumed_seq {
                <p class="assumed small" role="note" data-testid="import-assumed">{ fill(t.import_assumed, &[&l.to_string(), &c.to_string()]) }</p>
            }
            { capacity_chart(ctx, r) }
            <p class="small"><span class="muted">{ t.peak_at }{ ": " }</span>
                // a link to the row of the layer whose op reaches the peak
                { match peak_row(e) {
                    Some(path) => html! {
                        <button class="link" data-testid="peak-at-link" data-path={path.clone()} onclick={{
                            let d = ctx.dispatch.clone();
                            Callback::from(move |_| crate::dom::go_to_row(&d, path.clone()))
                        }}>
                            <code data-testid="peak-at">{ &e.peak_at }</code>
                        </button>
                    },
                    None => html! { <code data-testid="peak-at">{ &e.peak_at }</code> },
                } }
            </p>
            <p class="rule small" data-testid="rule-of-thumb" data-bytes={rule.to_string()}>
                <b>{ t.rule_of_thumb }{ ": " }{ ctx.bytes(rule) }</b>{ " — " }
                { fill(t.vs_rule, &[&percent(e.peak_bytes, rule)]) }
                <br /><span class="muted">{ rule_help }</span>
            </p>
            <h3>{ t.breakdown }</h3>
            { breakdown_chart(ctx, r) }
        </section>
    }
}

/// The checkpoint as the hub stores it and how far it is from the modelled weights (more than
/// 1 % apart is flagged: a weight format that does not match the checkpoint's).
fn checkpoint_note(ctx: &Ctx, c: &HubCheckpoint, modelled: u64) -> Html {
    let t = crate::i18n::import_tr(ctx.lang);
    let stored = match &c.stored {
        Ok(s) => s,
        Err(e) => return html! { <p class="small muted" data-testid="checkpoint" data-status="failed">{ fill(t.checkpoint_failed, &[e]) }</p> },
    };
    let source = match stored.source {
        Source::Index { files } => fill(t.checkpoint_index, &[&files.to_string()]),
        Source::Header => t.checkpoint_header.to_string(),
    };
    let rel = disagreement(stored.bytes, modelled);
    let verdict = match rel {
        Some(r) => fill(t.checkpoint_disagree, &[&format!("{:+.1} %", r * 100.0), &ctx.bytes(modelled)]),
        None => t.checkpoint_agree.to_string(),
    };
    html! {
        <p class={classes!("small", rel.is_some().then_some("warn"))} data-testid="checkpoint" data-status="read"
            data-bytes={stored.bytes.to_string()} data-disagree={rel.is_some().to_string()}>
            { fill(t.checkpoint_stored, &[&ctx.bytes(stored.bytes), &source]) }{ " — " }{ verdict }
        </p>
    }
}

/// The editor row of the layer whose op reaches the step's peak (the timeline's highest point, the
/// first of equals), if it is a layer's (not the optimizer step's).
fn peak_row(e: &vramcalc_core::Estimate) -> Option<String> {
    let peak = e.timeline.iter().max_by(|a, b| a.bytes.cmp(&b.bytes))?;
    let first = e.timeline.iter().find(|p| p.bytes == peak.bytes)?;
    e.layers.get(first.layer as usize).map(|l| crate::tree::normalize_core_path(&l.info.path))
}
