//! What-ifs: every change — the memory tricks, fine-tuning, generation and the multi-GPU strategy
//! — applied alone to the whole job as it is (`vramcalc_core::whatif::job`: same GPUs and
//! strategy, compared with that job's rank 0), only those that lower its device total, each saying
//! whether it alone makes the job fit; click to apply. They keep their place: an applied change
//! stays where it was, marked applied, with an undo (instead of vanishing and reflowing the grid).

use super::{percent, Ctx, Shared};
use crate::i18n::fill;
use crate::state::Action;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::whatif::job::{Change, JobWhatIf, JobWhatIfs};
use vramcalc_core::TrainConfig;
use yew::prelude::*;

/// A job: its training setup and its GPUs.
pub type Job = (TrainConfig, DistConfig);

/// The change applied last: `(change, job before, job after)`; shown as applied while the job is
/// still the one it made.
pub type Applied = UseStateHandle<Option<(Change, Job, Job)>>;

/// A change's label in the page's language.
pub fn label(ctx: &Ctx, c: Change) -> &'static str {
    match c {
        Change::Trick(t) => ctx.tr().trick(t),
        other => ctx.llm().change(other).unwrap_or_else(|| other.describe()),
    }
}

/// Applies `w` to `current` and remembers it in `applied`.
pub fn apply(dispatch: &crate::components::Dispatch, applied: &Applied, current: Job, w: &JobWhatIf) -> Callback<MouseEvent> {
    let (d, applied, change, after) = (dispatch.clone(), applied.clone(), w.change, (w.config, w.dist));
    Callback::from(move |_| {
        applied.set(Some((change, current, after)));
        d.dispatch(Action::SetJob(after.0, after.1));
    })
}

pub struct WhatIfProps {
    pub items: Shared<JobWhatIfs>,
    pub job: Job,
    pub applied: Applied,
    /// The model has an error: the what-ifs are the last valid model's.
    pub stale: bool,
    /// The cheapest sets of changes that make the setup fit (`reverse::Fixes`), drawn first:
    /// the combinations, then the single changes, in one what-if panel.
    pub fixes: Html,
}

/// A plain view function (no state of its own: the applied change is the app's).
pub fn what_if_panel(ctx: &Ctx, p: &WhatIfProps) -> Html {
    let t = ctx.tr();
    let base = p.items.device_total;
    let applied = (*p.applied).filter(|(_, _, after)| *after == p.job);
    let item = |change: Change| -> Option<Html> {
        let id = change.id();
        if let Some(w) = p.items.items.iter().find(|w| w.change == change) {
            let text = format!("{} ({})", fill(t.saves, &[&ctx.bytes(w.saves)]), percent(w.saves, base));
            return Some(html! {
                <li>
                    <button class="trick" onclick={apply(&ctx.dispatch, &p.applied, p.job, w)} disabled={p.stale}
                        data-testid={format!("whatif-{id}")} data-bytes={w.peak.to_string()} data-device-total={w.device_total.to_string()} data-fits={w.fits.map(|f| f.to_string())}>
                        <span class="trick-name">{ label(ctx, change) }</span>
                        <span class="trick-effect saves">{ text }</span>
                        <span class="muted">{ format!("→ {}", ctx.bytes(w.device_total)) }
                            if w.fits == Some(true) { { " · ✓ " }{ ctx.llm().fits_alone } }</span>
                    </button>
                </li>
            });
        }
        let (_, before, _) = applied.filter(|a| a.0 == change)?;
        let d = ctx.dispatch.clone();
        Some(html! {
            <li class="applied" data-testid={format!("whatif-applied-{id}")}>
                <span class="trick-name">{ "✓ " }{ label(ctx, change) }</span>
                <span class="muted">{ t.applied }</span>
                <button onclick={Callback::from(move |_| d.dispatch(Action::SetJob(before.0, before.1)))}
                    data-testid={format!("whatif-undo-{id}")}>{ t.undo }</button>
            </li>
        })
    };
    html! {
        <section class={classes!("panel", "whatif", p.stale.then_some("is-stale"))} aria-labelledby="whatif-h" data-testid="whatif">
            <h2 id="whatif-h">{ t.what_if }</h2>
            { p.fixes.clone() }
            <p class="muted small">{ t.what_if_help }</p>
            <ul>{ for Change::all().filter_map(item) }</ul>
        </section>
    }
}
