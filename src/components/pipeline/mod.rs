//! The image/video pipeline panel (issue 27): a built-in diffusers pipeline and its settings
//! (`crate::pipeline::fields`, drawn by `workload_form`), and the answer (`answer`): the peak
//! per stage and overall, GPU and CPU RAM, the stage timeline; or a LoRA training step.

mod answer;
pub mod card;
mod hub;
mod whatif;

use super::use_ctx;
use super::workload_form::WorkloadForm;
use crate::pipeline::{self, Answer};
use crate::state::pipeline::PipelineState;
use crate::state::Action;
use answer::{StagesAnswer, TrainAnswerView};
use whatif::{PipeLargest, PipeWhatIfs};
use std::rc::Rc;
use yew::prelude::*;

#[derive(Properties, PartialEq, Clone)]
pub struct PipelineProps {
    pub state: PipelineState,
}

#[function_component(PipelinePanel)]
pub fn pipeline_panel(p: &PipelineProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.pipe();
    let s = &p.state;
    let spec = use_memo((s.preset.clone(), s.hub.clone()), |_| pipeline::spec_of(s).map(Rc::new));
    // computed by the app's worker (the pipelines' lowering is not in the app's bundle: issue 23),
    // whose wasm starts loading when the panel shows; a pipeline that does not read is its own
    // error (not asked: it would not cross, `SavedPipeline`)
    use_effect_with((), |_| crate::worker::warm_up());
    let answer = {
        let read = spec.as_ref().as_ref().map(|_| ()).map_err(|e| e.clone());
        crate::hooks::use_answer_of((s.clone(), read), |(s, read)| async move {
            match read {
                Ok(()) => crate::worker::pipeline::answer(&s).await,
                Err(e) => Err(e),
            }
        })
    };
    // the address bar carries the panel's state (`#pipe.…`)
    use_effect_with(s.clone(), |s| crate::dom::replace_fragment(&pipeline::link::to_fragment(s), false));
    let form = match &*spec {
        Ok(sp) => {
            let fields = pipeline::fields(s, sp);
            let labels: Vec<&'static str> = fields.iter().map(|f| t.label(f.id)).collect();
            let on_commit = {
                let (d, s, sp) = (ctx.dispatch.clone(), s.clone(), sp.clone());
                Callback::from(move |(id, text): (&'static str, String)| {
                    d.dispatch(Action::SetPipeline(pipeline::with(&s, &sp, id, &text)?));
                    Ok(())
                })
            };
            html! { <WorkloadForm {fields} {labels} {on_commit} prefix="pipe" /> }
        }
        Err(e) => html! { <p class="error" role="alert">{ e }</p> },
    };
    let capacity = pipeline::capacity(s);
    let applied = use_state(|| None);
    // the what-ifs and the largest values that fit, once the answer is there
    let reverse = match (&*spec, answer.last.as_deref()) {
        (Ok(sp), Some(Ok(_))) => html! {
            <>
                <PipeWhatIfs state={s.clone()} {capacity} applied={applied.clone()} />
                if let Some(c) = capacity { <PipeLargest state={s.clone()} spec={sp.clone()} capacity={c} /> }
            </>
        },
        _ => html! {},
    };
    // until the current settings' answer arrives a status line stands in for it: no figure on
    // the page is of settings other than those shown (the form and the link change at once)
    let pending = (!answer.current).then(|| html! { <p class="muted small" role="status" data-testid="pipeline-pending">{ ctx.tr().computing }</p> });
    let shown = match answer.last.as_deref() {
        _ if !answer.current => html! {},
        None => html! {},
        Some(Err(e)) => html! { <p class="error" role="alert" data-testid="pipeline-error">{ e }</p> },
        Some(Ok(a @ Answer::Stages(_))) => html! { <StagesAnswer answer={Rc::new(a.clone())} {capacity} /> },
        Some(Ok(a @ Answer::Train(_))) => html! { <TrainAnswerView answer={Rc::new(a.clone())} {capacity} /> },
    };
    let body = html! { <div aria-busy={(!answer.current).to_string()}>{ for pending }{ shown }</div> };
    html! {
        <section class="panel pipeline" aria-labelledby="pipeline-h" data-testid="pipeline-panel" data-preset={s.hub.as_ref().map_or(s.preset.clone(), |h| h.hub.to_string())} data-mode={s.mode.name()}>
            <h2 id="pipeline-h">{ t.heading }</h2>
            <hub::PipeHub state={s.clone()} />
            { form }
            { body }
            { reverse }
        </section>
    }
}
