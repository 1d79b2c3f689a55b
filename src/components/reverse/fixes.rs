//! The cheapest fixes (the CLI's `vramcalc fix`): when the setup does not fit, the smallest sets
//! of changes that make it fit, ranked by what they cost, each with its peak and margin and one
//! click to apply. Drawn at the top of the what-if panel: one what-if system, whose single
//! changes follow; the sticky verdict offers the first when no single change fits. The list is
//! the app's (`use_fixes`, searched after the page is drawn).

use crate::components::{use_ctx, Shared};
use crate::hooks::use_deferred_future;
use crate::i18n::fill;
use crate::state::Action;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::solve::fix::Fix;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::TrainConfig;
use yew::prelude::*;

/// The cheapest fixes of the setup when `search` (it does not fit), computed after the page is
/// drawn; `None` while searching or when not searched.
#[hook]
pub fn use_fixes(spec: Shared<ModelSpec>, config: TrainConfig, dist: DistConfig, capacity: u64, search: bool) -> Option<std::rc::Rc<Vec<Fix>>> {
    use_deferred_future((spec, config, dist, capacity, search), 200, |(spec, c, d, cap, search)| async move {
        if !search {
            return None;
        }
        // one estimate per task: a 70B setup's search is seconds of estimates. In the background:
        // a multi-GPU job that does not fit also sizes itself (the fewest GPUs, the answers'
        // first figure, at `user-visible`), and a search beside it at the same priority took
        // every other task (the 70B FSDP×8 link's fewest GPUs came about twice as late)
        crate::reverse::fixes_stepped(&spec, &c, &d, cap, || crate::dom::yield_to_page(crate::dom::Priority::Background)).await
    })
    .filter(|_| search)
}

#[derive(Properties, PartialEq, Clone)]
pub struct FixesProps {
    /// `use_fixes`' answer (`None`: still searching).
    pub list: Option<Shared<Vec<Fix>>>,
}

#[function_component(Fixes)]
pub fn fixes(p: &FixesProps) -> Html {
    let ctx = use_ctx();
    let m = ctx.modes();
    let Some(list) = &p.list else { return html! { <p class="small muted" data-testid="fixes-pending">{ m.computing }</p> } };
    html! {
        <div class="fixes" data-testid="fixes">
            <h3>{ m.fixes_h }</h3>
            <p class="muted small">{ m.fixes_help }</p>
            if list.is_empty() { <p class="small" data-testid="no-fix">{ m.no_fix }</p> }
            <ul>
                { for list.iter().enumerate().map(|(i, f)| {
                    let ids: Vec<String> = f.changes.iter().map(|c| c.id()).collect();
                    let names: Vec<String> = f.changes.iter().map(|c| m.change(*c, ctx.zh())).collect();
                    let (d, job) = (ctx.dispatch.clone(), (f.config, f.dist));
                    html! {
                        <li>
                            <button class="trick" data-testid={format!("fix-{i}")} data-changes={ids.join("+")}
                                data-device-total={f.device_total_bytes.to_string()} data-bytes={f.peak_bytes.to_string()}
                                onclick={Callback::from(move |_| d.dispatch(Action::SetJob(job.0, job.1)))}>
                                <span class="trick-name">{ names.join(" + ") }</span>
                                <span class="tag small">{ m.tier(f.tier) }</span>
                                <span class="muted">{ fill(m.peak_margin, &[&ctx.bytes(f.peak_bytes), &ctx.bytes(f.margin_bytes)]) }{ " · " }{ m.apply }</span>
                            </button>
                        </li>
                    }
                }) }
            </ul>
        </div>
    }
}
