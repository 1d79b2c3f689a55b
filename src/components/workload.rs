//! The workload switch (issues 24, 27): PyTorch (every other panel), llama.cpp, or an image
//! pipeline. Above the page, not a mode of the setup panel: each workload starts from its own
//! model (a PyTorch spec or Hugging Face config, a GGUF file, a diffusers pipeline), so the
//! switch replaces the model panel too; a PyTorch model's modes (train, fine-tune, generate,
//! serve) are the setup panel's.

use super::Ctx;
use crate::state::local::Workload;
use crate::state::Action;
use yew::prelude::*;

pub fn workload_switch(ctx: &Ctx, current: Workload) -> Html {
    let t = ctx.local();
    let button = |w: Workload| {
        let d = ctx.dispatch.clone();
        let label = match w {
            Workload::PyTorch => t.workload_pytorch,
            Workload::LlamaCpp => t.workload_llama,
            Workload::Pipeline => t.workload_pipeline,
        };
        let onclick = Callback::from(move |_| d.dispatch(Action::SetWorkload(w)));
        html! {
            <button type="button" aria-pressed={(w == current).to_string()} data-testid={format!("workload-{}", w.id())} {onclick}>{ label }</button>
        }
    };
    html! {
        <nav class="workload tabs" aria-label={t.workload} data-testid="workload" data-workload={current.id()}>
            <span class="muted small">{ t.workload }</span>
            { for Workload::ALL.into_iter().map(button) }
        </nav>
    }
}
