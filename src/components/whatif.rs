//! What-ifs: each memory trick applied to the current setup, with its saving; click to apply.
//! They keep their place: an applied trick stays where it was, marked applied, with an undo
//! (instead of vanishing and reflowing the grid); a trick that changes nothing is not shown.

use super::{percent, Ctx, Shared};
use crate::i18n::fill;
use crate::state::Action;
use vramcalc_core::whatif::{Trick, WhatIf};
use vramcalc_core::TrainConfig;
use yew::prelude::*;

/// The trick applied last: `(trick, setup before, setup after)`; shown as applied while the
/// setup is still the one it made.
pub type Applied = UseStateHandle<Option<(Trick, TrainConfig, TrainConfig)>>;

/// Applies `w` to `current` and remembers it in `applied`.
pub fn apply(ctx_dispatch: &UseReducerDispatcher<crate::state::State>, applied: &Applied, current: TrainConfig, w: &WhatIf) -> Callback<MouseEvent> {
    let (d, applied, trick, after) = (ctx_dispatch.clone(), applied.clone(), w.trick, w.config);
    Callback::from(move |_| {
        applied.set(Some((trick, current, after)));
        d.dispatch(Action::SetConfig(after));
    })
}

pub struct WhatIfProps {
    pub items: Shared<Vec<WhatIf>>,
    /// The current peak.
    pub base: u64,
    pub config: TrainConfig,
    pub applied: Applied,
    /// The model has an error: the what-ifs are the last valid model's.
    pub stale: bool,
}

/// A plain view function (no state of its own: the applied trick is the app's).
pub fn what_if_panel(ctx: &Ctx, p: &WhatIfProps) -> Html {
    let t = ctx.tr();
    let base = p.base;
    let applied = (*p.applied).filter(|(_, _, after)| *after == p.config);
    let item = |trick: Trick| -> Option<Html> {
        if let Some(w) = p.items.iter().find(|w| w.trick == trick && w.peak != base) {
            let (cls, text) = if w.peak < base {
                let s = base - w.peak;
                ("saves", format!("{} ({})", fill(t.saves, &[&ctx.bytes(s)]), percent(s, base)))
            } else {
                ("adds", fill(t.adds, &[&ctx.bytes(w.peak - base)]))
            };
            return Some(html! {
                <li>
                    <button class="trick" onclick={apply(&ctx.dispatch, &p.applied, p.config, w)} disabled={p.stale}
                        data-testid={format!("whatif-{}", trick.id())}>
                        <span class="trick-name">{ t.trick(trick) }</span>
                        <span class={classes!("trick-effect", cls)}>{ text }</span>
                        <span class="muted">{ format!("→ {}", ctx.bytes(w.peak)) }</span>
                    </button>
                </li>
            });
        }
        let (_, before, _) = applied.filter(|a| a.0 == trick)?;
        let d = ctx.dispatch.clone();
        Some(html! {
            <li class="applied" data-testid={format!("whatif-applied-{}", trick.id())}>
                <span class="trick-name">{ "✓ " }{ t.trick(trick) }</span>
                <span class="muted">{ t.applied }</span>
                <button onclick={Callback::from(move |_| d.dispatch(Action::SetConfig(before)))}
                    data-testid={format!("whatif-undo-{}", trick.id())}>{ t.undo }</button>
            </li>
        })
    };
    html! {
        <section class={classes!("panel", "whatif", p.stale.then_some("is-stale"))} aria-labelledby="whatif-h" data-testid="whatif">
            <h2 id="whatif-h">{ t.what_if }</h2>
            <p class="muted small">{ t.what_if_help }</p>
            <ul>{ for Trick::ALL.into_iter().filter_map(item) }</ul>
        </section>
    }
}
