//! The llama.cpp panel (issue 24): where the GGUF header comes from (`source`), llama.cpp's
//! settings (`crate::local::fields`, drawn by `workload_form`), and what it allocates per device
//! with the reverse answers and the command line (`answer`).

mod answer;
mod cards;
mod source;

use super::use_ctx;
use super::workload_form::WorkloadForm;
use crate::local::{self, ModelTraits};
use crate::state::local::{LocalAction, LocalState};
use crate::state::Action;
use answer::{LocalAnswer, QuantFits};
use cards::CardList;
use crate::form::Kind;
use crate::state::local::{GgufSource, LocalEngine};
use source::SourcePicker;
use std::rc::Rc;
use yew::prelude::*;

#[derive(Properties, PartialEq, Clone)]
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
    let lm_studio = s.settings.engine == LocalEngine::LmStudio;
    let labels: Vec<&'static str> = fields.iter().map(|f| t.label_in(lm_studio, f.id)).collect();
    let on_commit = {
        let (d, settings) = (ctx.dispatch.clone(), s.settings.clone());
        // typing in one field is one undo step; a choice is a step of its own
        let typed: Vec<&'static str> = fields.iter().filter(|f| matches!(f.kind, Kind::Number | Kind::Text)).map(|f| f.id).collect();
        Callback::from(move |(id, text): (&'static str, String)| {
            let next = local::with(&settings, id, &text)?;
            d.dispatch(Action::Local(if typed.contains(&id) { LocalAction::Edit(id, next) } else { LocalAction::Set(next) }));
            Ok(())
        })
    };
    // `-ot` presets for a MoE model under llama.cpp; a preset redraws the form (a text typed
    // there that was not a value gives way to the preset's)
    let form_key = use_state(|| 0u32);
    let presets = (traits.moe && s.settings.engine == LocalEngine::LlamaCpp).then(|| {
        let buttons = local::ot_presets().into_iter().map(|(id, text)| {
            let label = match id {
                "experts-cpu" => t.preset_experts_cpu,
                "up-down-cpu" => t.preset_up_down_cpu,
                _ => t.preset_none,
            };
            let (d, settings, key) = (ctx.dispatch.clone(), s.settings.clone(), form_key.clone());
            let onclick = Callback::from(move |_| {
                if let Ok(next) = local::with(&settings, "ot", &text) {
                    d.dispatch(Action::Local(LocalAction::Set(next)));
                    key.set(*key + 1);
                }
            });
            html! { <button type="button" data-testid={format!("ot-preset-{id}")} {onclick}>{ label }</button> }
        });
        html! { <div class="ot-presets" role="group" aria-label={t.ot_presets}><span class="muted small">{ t.ot_presets }</span>{ for buttons }</div> }
    });
    let quant_model = match s.model.as_ref().map(|m| &m.0) {
        Some(GgufSource::Quant { model, .. }) => Some(model.clone()),
        _ => None,
    };
    // computed by the app's worker (llama.cpp's code is not in the app's bundle), whose wasm
    // starts loading when the panel shows, while the header is read
    use_effect_with((), |_| crate::worker::warm_up());
    let answer = {
        let key = (s.model.as_ref().map(|(src, h)| (src.clone(), Rc::as_ptr(h) as usize)), s.settings.clone());
        let model = s.model.clone();
        crate::hooks::use_answer_of(key, move |(_, settings)| {
            let model = model.clone();
            async move {
                match &model {
                    Some((src, h)) => Some(crate::worker::llama::answer(h, &settings, src).await),
                    None => None,
                }
            }
        })
    };
    // the address bar carries the hub file or model, and the settings (`#gguf.…`)
    use_effect_with((s.model.as_ref().map(|m| m.0.clone()), s.settings.clone()), |(src, set)| {
        crate::dom::replace_fragment(&local::link::to_fragment(src.as_ref(), set), false)
    });
    // until the current settings' answer arrives, the last one stays, dimmed, under a status line
    let pending = (!answer.current).then(|| html! { <p class="muted small" role="status" data-testid="llama-pending">{ ctx.tr().computing }</p> });
    let shown = match answer.last.as_deref() {
        _ if s.model.is_none() => html! { <p class="muted" data-testid="local-empty">{ t.no_model }</p> },
        None => html! {},
        Some(None) => html! { <p class="muted" data-testid="local-empty">{ t.no_model }</p> },
        Some(Some(Err(e))) => html! { <p class="error" role="alert" data-testid="llama-error">{ e }</p> },
        Some(Some(Ok(a))) => html! { <LocalAnswer answer={Rc::new(a.clone())} /> },
    };
    let body = html! {
        <div class={classes!("local-answer", (!answer.current).then_some("is-stale"))} aria-busy={(!answer.current).to_string()}>
            { for pending }{ shown }
        </div>
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
            <WorkloadForm key={form_key.to_string()} {fields} {labels} {on_commit} prefix="llama" />
            <CardList settings={s.settings.clone()} />
            { for presets }
            { body }
            if let Some(model) = quant_model {
                <QuantFits {model} settings={s.settings.clone()} />
            }
        </section>
    }
}
