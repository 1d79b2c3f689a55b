//! What-ifs: each memory trick applied to the current setup, with its saving; click to apply.

use super::{percent, use_ctx, Shared};
use crate::analysis::WhatIf;
use crate::i18n::fill;
use crate::state::Action;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct WhatIfProps {
    pub items: Shared<Vec<WhatIf>>,
    /// The current peak.
    pub base: u64,
}

#[function_component(WhatIfs)]
pub fn what_ifs(p: &WhatIfProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    html! {
        <section class="panel whatif" aria-labelledby="whatif-h" data-testid="whatif">
            <h2 id="whatif-h">{ t.what_if }</h2>
            <p class="muted small">{ t.what_if_help }</p>
            <ul>
                { for p.items.iter().map(|w| {
                    let (d, cfg) = (ctx.dispatch.clone(), w.config);
                    let onclick = Callback::from(move |_| d.dispatch(Action::SetConfig(cfg)));
                    let (cls, text) = if w.peak < p.base {
                        let s = p.base - w.peak;
                        ("saves", format!("{} ({})", fill(t.saves, &[&ctx.bytes(s)]), percent(s, p.base)))
                    } else if w.peak > p.base {
                        ("adds", fill(t.adds, &[&ctx.bytes(w.peak - p.base)]))
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
