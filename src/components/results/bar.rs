//! The sticky one-line verdict: peak · fits or over by how much, on which GPU · largest batch
//! that fits (the app's only verdict: `fit-status`), and
//! when it does not fit, the fixes (use the largest batch, or the cheapest what-if that fits).
//! It stays at the top of the viewport on every screen size, like a configurator's price bar,
//! and is an `aria-live` region so screen readers hear the new verdict after each edit.

use crate::analysis::Report;
use crate::components::whatif::{apply, Applied};
use crate::components::{Ctx, Shared};
use crate::i18n::fill;
use crate::capacity::gpu_label;
use crate::state::{Action, GpuChoice};
use vramcalc_core::whatif::job::{Change, JobWhatIf, JobWhatIfs};
use vramcalc_core::whatif::Trick;
use yew::prelude::*;

/// What the bar shows (a plain view function: it re-renders with the app, whose every render
/// can change the verdict).
pub struct BarProps {
    pub report: Option<Shared<Report>>,
    pub gpu: GpuChoice,
    pub what_ifs: Option<Shared<JobWhatIfs>>,
    /// The job the figures are for (what a fix applies to).
    pub job: crate::components::whatif::Job,
    /// The current input has an error: the figures are the last good ones.
    pub stale: bool,
    pub applied: Applied,
    /// In the serve mode, vLLM's answer with the concurrency and context asked for: the
    /// verdict is whether its KV pool holds them.
    pub serving: Option<(Serving, u64, u64)>,
    /// The cheapest set of changes that fits (`reverse::fixes`), offered when no single change does.
    pub fix_set: Option<vramcalc_core::solve::fix::Fix>,
}

/// vLLM's answer for the model (`serve::capacity`).
pub type Serving = std::rc::Rc<Result<vramcalc_core::serve::Capacity, vramcalc_core::Error>>;

/// Tricks from the least to the most disruptive to training: mixed precision and in-place ReLU
/// change nothing the model learns; checkpointing costs about one extra forward; accumulation
/// keeps the effective batch; a shorter sequence, a smaller batch or another optimizer change
/// the run itself.
const BY_COST: [Trick; 7] =
    [Trick::Amp, Trick::InplaceRelu, Trick::Checkpointing, Trick::GradAccum4, Trick::ShorterSeq, Trick::HalveBatch, Trick::Sgd];

/// The least disruptive what-if whose device total fits `capacity`: the memory tricks by
/// [`BY_COST`], then the other changes in the list's order.
pub fn cheapest_fix(items: &[JobWhatIf], capacity: u64) -> Option<&JobWhatIf> {
    let fits = |w: &&JobWhatIf| w.device_total <= capacity;
    BY_COST
        .iter()
        .find_map(|t| items.iter().filter(fits).find(|w| w.change == Change::Trick(*t)))
        .or_else(|| items.iter().filter(fits).find(|w| !matches!(w.change, Change::Trick(_))))
}

pub fn summary_bar(ctx: &Ctx, p: &BarProps) -> Html {
    let t = ctx.tr();
    let Some(r) = &p.report else {
        return html! { <div class="sumbar" data-testid="summary" data-empty="true" role="status" aria-live="polite">{ t.no_result }</div> };
    };
    if let Some((Ok(cap), want, context)) = p.serving.as_ref().map(|(c, w, x)| (&**c, *w, *x)) {
        return serve_bar(ctx, p, cap, want, context);
    }
    let e = &r.estimate;
    let fits = e.device_total_bytes <= r.capacity;
    let verdict = if fits {
        fill(t.fits, &[&ctx.bytes(r.capacity - e.device_total_bytes)])
    } else {
        fill(t.does_not_fit, &[&ctx.bytes(e.device_total_bytes - r.capacity)])
    };
    let (gpu_name, cap) = gpu_label(&p.gpu, r.capacity, ctx.unit, t.custom_capacity);
    let max = match r.max_batch {
        Some(m) => fill(t.max_batch, &[&m.to_string()]),
        None => t.no_batch_fits.to_string(),
    };
    let use_max = r.max_batch.filter(|&m| !fits && m != e.config.batch).map(|m| {
        let d = ctx.dispatch.clone();
        html! {
            <button class="fix" data-testid="use-max-batch" onclick={Callback::from(move |_| d.dispatch(Action::SetBatch(m)))}>
                { fill(t.use_batch, &[&m.to_string()]) }
            </button>
        }
    });
    let fix: Option<Html> = (!fits && !p.stale).then(|| p.what_ifs.as_ref().and_then(|w| cheapest_fix(&w.items, r.capacity))).flatten().map(|w| html! {
        <button class="fix" data-testid="fix-whatif" data-trick={w.id}
            onclick={apply(&ctx.dispatch, &p.applied, p.job, w)}>{ fill(t.or_fix, &[crate::components::whatif::label(ctx, w.change)]) }</button>
    });
    let single = fix.is_some();
    let class = classes!("sumbar", if p.stale { "stale" } else if fits { "ok" } else { "over" });
    html! {
        <div {class} data-testid="summary" data-fits={fits.to_string()} data-stale={p.stale.to_string()}>
            <span role="status" aria-live="polite" aria-atomic="true">
                if p.stale { <span class="tag">{ t.stale_tag }</span> }
                <span class="muted">{ t.peak }{ " " }</span><b>{ ctx.bytes(e.peak_bytes) }</b>
                <span class="sep" aria-hidden="true">{ " · " }</span>
                <b class="verdict" data-testid="fit-status" data-fits={fits.to_string()}>{ if fits { "✓ " } else { "✗ " } }{ verdict }
                    { " " }<span class="muted on-gpu">{ fill(t.on_gpu, &[&gpu_name, &cap]) }</span></b>
                <span class="sep" aria-hidden="true">{ " · " }</span>
                <span data-testid="summary-max">{ max }</span>
            </span>
            { for use_max }{ for fix }
            if !single && !fits && !p.stale {
                if let Some(f) = &p.fix_set { { fix_set_button(ctx, f) } }
            }
        </div>
    }
}

/// The serve mode's verdict: the sequences vLLM's KV pool holds at the context, against the
/// concurrency asked for (the CLI's `vramcalc serve`).
fn serve_bar(ctx: &Ctx, p: &BarProps, cap: &vramcalc_core::serve::Capacity, want: u64, context: u64) -> Html {
    let (t, m) = (ctx.tr(), ctx.modes());
    let fits = cap.max_concurrency >= want;
    let held = vramcalc_core::thousands(cap.max_concurrency);
    let verdict = fill(if fits { m.serve_fits } else { m.serve_over }, &[&held, &vramcalc_core::thousands(context)]);
    let (gpu_name, size) = gpu_label(&p.gpu, cap.gpu_bytes, ctx.unit, t.custom_capacity);
    let class = classes!("sumbar", if p.stale { "stale" } else if fits { "ok" } else { "over" });
    html! {
        <div {class} data-testid="summary" data-fits={fits.to_string()} data-stale={p.stale.to_string()} data-engine="vllm">
            <span role="status" aria-live="polite" aria-atomic="true">
                <span class="muted">{ m.serve_engine }{ " · " }</span>
                <b class="verdict" data-testid="fit-status" data-fits={fits.to_string()} data-count={cap.max_concurrency.to_string()}>
                    { if fits { "✓ " } else { "✗ " } }{ verdict }{ " " }<span class="muted on-gpu">{ fill(t.on_gpu, &[&gpu_name, &size]) }</span></b>
            </span>
        </div>
    }
}

/// "or: A + B": the cheapest set of changes that fits, applied in one click.
fn fix_set_button(ctx: &Ctx, f: &vramcalc_core::solve::fix::Fix) -> Html {
    let names: Vec<String> = f.changes.iter().map(|c| ctx.modes().change(*c, ctx.zh())).collect();
    let ids: Vec<String> = f.changes.iter().map(|c| c.id()).collect();
    let (d, job) = (ctx.dispatch.clone(), (f.config, f.dist));
    html! {
        <button class="fix" data-testid="fix-set" data-changes={ids.join("+")}
            onclick={Callback::from(move |_| d.dispatch(Action::SetJob(job.0, job.1)))}>{ fill(ctx.tr().or_fix, &[&names.join(" + ")]) }</button>
    }
}
