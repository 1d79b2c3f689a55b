//! The largest value that fits for the mode (the CLI's `vramcalc max --of …`): batch and
//! sequence length, generation's prompt and new tokens, vLLM's context and concurrency, each
//! with where the memory runs out just above it and a click to use it.

use crate::components::{use_ctx, Shared};
use crate::hooks::use_deferred_future;
use crate::i18n::fill;
use crate::reverse::{current, variables, with_value};
use crate::state::{Action, SetupMode};
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::solve::{Answer, Variable};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{thousands, TrainConfig};
use yew::prelude::*;

#[derive(Properties, PartialEq, Clone)]
pub struct LargestProps {
    pub spec: Shared<ModelSpec>,
    pub config: TrainConfig,
    pub dist: DistConfig,
    pub capacity: u64,
    pub mode: SetupMode,
}

type Answers = Vec<(Variable, Result<Answer, String>)>;

#[function_component(Largest)]
pub fn largest(p: &LargestProps) -> Html {
    let ctx = use_ctx();
    let m = ctx.modes();
    // in the app's worker (issue 23: a search is several estimates, a lowering of the model per
    // sequence length: one search was the longest task while a 70B link's sizing ran)
    let answers = use_deferred_future((p.spec.clone(), p.config, p.dist, p.capacity, p.mode), 150, |(spec, c, d, cap, mode)| async move {
        let out: Answers = crate::worker::largest(&spec, &c, &d, cap, variables(mode, &spec)).await;
        Some(out)
    });
    let row = |(of, a): &(Variable, Result<Answer, String>)| -> Html {
        let name = m.variable(*of, ctx.zh());
        let id = format!("largest-{of}");
        match a {
            Ok(a) => {
                let now = current(&p.spec, &p.config, *of);
                let limit = a.limit.as_ref().map(|l| fill(m.limited_by, &[&l.category.replace('_', " "), &l.phase, &thousands(l.value)]));
                let use_it = (now != Some(a.value)).then(|| {
                    let (d, c) = (ctx.dispatch.clone(), with_value(&p.spec, &p.config, *of, a.value));
                    html! { <button class="fix" data-testid={format!("use-{id}")} onclick={Callback::from(move |_| d.dispatch(Action::SetConfig(c)))}>{ m.use_it }{ " " }{ thousands(a.value) }</button> }
                });
                html! {
                    <li>
                        { name }{ ": " }<b data-testid={id} data-value={a.value.to_string()}>{ thousands(a.value) }</b>
                        if let Some(l) = limit { <span class="muted small">{ " · " }{ l }</span> }
                        { " " }{ for use_it }
                    </li>
                }
            }
            Err(e) => html! { <li>{ name }{ ": " }<span class="muted" data-testid={id} data-value="">{ e.trim_start_matches("config: ") }</span></li> },
        }
    };
    html! {
        <div class="largest" data-testid="largest">
            <h3>{ m.largest_h }</h3>
            { match &answers {
                None => html! { <p class="small muted">{ m.computing }</p> },
                Some(a) => html! { <ul class="small">{ for a.iter().map(row) }</ul> },
            } }
        </div>
    }
}
