//! What-ifs: each memory trick applied to the current setup, with its saving; click to apply.

use super::{percent, Ctx};
use vramcalc_core::whatif::WhatIf;
use crate::i18n::fill;
use crate::state::Action;
use yew::prelude::*;

/// The what-if panel (a plain function: no state of its own). `base` is the current peak.
pub fn what_if_panel(ctx: &Ctx, items: &[WhatIf], base: u64) -> Html {
    let t = ctx.tr();
    html! {
        <section class="panel whatif" aria-labelledby="whatif-h" data-testid="whatif">
            <h2 id="whatif-h">{ t.what_if }</h2>
            <p class="muted small">{ t.what_if_help }</p>
            <ul>
                { for items.iter().map(|w| {
                    let (d, cfg) = (ctx.dispatch.clone(), w.config);
                    let onclick = Callback::from(move |_| d.dispatch(Action::SetConfig(cfg)));
                    let (cls, text) = if w.peak < base {
                        let s = base - w.peak;
                        ("saves", format!("{} ({})", fill(t.saves, &[&ctx.bytes(s)]), percent(s, base)))
                    } else if w.peak > base {
                        ("adds", fill(t.adds, &[&ctx.bytes(w.peak - base)]))
                    } else {
                        ("same", t.no_change.to_string())
                    };
                    html! {
                        <li>
                            <button class="trick" {onclick} data-testid={format!("whatif-{}", w.trick.id())}>
                                <span class="trick-name">{ t.trick(w.trick) }</span>
                                <span class={classes!("trick-effect", cls)}>{ text }</span>
                                <span class="muted">{ format!("→ {}", ctx.bytes(w.peak)) }</span>
                            </button>
                        </li>
                    }
                }) }
            </ul>
        </section>
    }
}
