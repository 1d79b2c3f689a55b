//! The llama.cpp panel (issue 24): where the GGUF header comes from (`source`), llama.cpp's
//! settings (`crate::local::fields`, drawn by `workload_form`), and what it allocates per device
//! with the reverse answers and the command line (`answer`).

mod answer;
mod source;

use super::use_ctx;
use super::workload_form::WorkloadForm;
use crate::local::{self, ModelTraits};
use crate::state::local::{LocalAction, LocalState};
use crate::state::Action;
use answer::LocalAnswer;
use source::SourcePicker;
use std::rc::Rc;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct LocalProps {
    pub state: LocalState,
}

#[function_component(LocalPanel)]
pub fn local_panel(p: &LocalProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.local();
    let s = &p.state;
    let traits = s.model.as_ref().and_then(|(_, h)| ModelTraits::of(h)).unwrap_or_default();
    let fields = local::fields(&s.settings, traits);
    let labels: Vec<&'static str> = fields.iter().map(|f| t.label(f.id)).collect();
    let on_commit = {
        let (d, settings) = (ctx.dispatch.clone(), s.settings.clone());
        Callback::from(move |(id, text): (&'static str, String)| {
            let next = local::with(&settings, id, &text)?;
            d.dispatch(Action::Local(LocalAction::Set(next)));
            Ok(())
        })
    };
    let answer = {
        let key = (s.model.as_ref().map(|(src, h)| (src.clone(), Rc::as_ptr(h) as usize)), s.settings.clone());
        let model = s.model.clone();
        use_memo(key, move |(_, settings)| model.as_ref().map(|(src, h)| local::answer(h, settings, src)))
    };
    // the address bar carries the hub file or model, and the settings (`#gguf.…`)
    use_effect_with((s.model.as_ref().map(|m| m.0.clone()), s.settings.clone()), |(src, set)| {
        crate::dom::replace_fragment(&local::link::to_fragment(src.as_ref(), set), false)
    });
    let body = match &*answer {
        None => html! { <p class="muted" data-testid="local-empty">{ t.no_model }</p> },
        Some(Err(e)) => html! { <p class="error" role="alert" data-testid="llama-error">{ e }</p> },
        Some(Ok(a)) => html! { <LocalAnswer answer={Rc::new(a.clone())} /> },
    };
    html! {
        <section class="panel local" aria-labelledby="local-h" data-testid="local-panel">
            <h2 id="local-h">{ t.heading }</h2>
            <SourcePicker model={s.model.as_ref().map(|m| m.0.clone())} load={s.load.clone()} />
            if let Some((_, h)) = &s.model {
                <p class="muted small" data-testid="gguf-model" data-bytes={h.tensor_bytes().to_string()} data-arch={h.architecture().unwrap_or("").to_string()}>
                    { format!("{} · {} {} · {} {}", h.architecture().unwrap_or("?"), h.tensors.len(), t.tensors, ctx.bytes(h.tensor_bytes()), t.weights) }
                    { for local::weight_types(h).iter().take(3).map(|(ty, b)| html! { <span class="chip">{ format!("{} {}", ty.name, ctx.bytes(*b)) }</span> }) }
                </p>
            }
            <h3>{ t.settings }</h3>
            <WorkloadForm {fields} {labels} {on_commit} prefix="llama" />
            { body }
        </section>
    }
}
