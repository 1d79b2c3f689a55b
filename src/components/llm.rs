//! The LLM setup (issues 13–15, 23): fine-tuning (full, freeze, LoRA, QLoRA), generate mode's
//! settings, the weights' format, GPUs × strategy and autocast's weight cache, as controls on the
//! core's typed settings. Which fields apply and how a text reads are `crate::llm::setup`'s
//! (tested natively); text fields commit as they are typed, and a text that is not a value is
//! kept in the field with the reason beside it (the settings unchanged).

use super::use_ctx;
use crate::llm::setup::{self, Field, Kind};
use crate::state::Action;
use std::collections::HashMap;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::TrainConfig;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct LlmProps {
    /// `llm::setup::fields` of the model and setup.
    pub fields: Vec<Field>,
    pub config: TrainConfig,
    pub dist: DistConfig,
    /// The group's test id (`llm`; `llm-lengths` for generation's lengths beside the batch).
    pub testid: AttrValue,
}

#[function_component(LlmSetup)]
pub fn llm_setup(p: &LlmProps) -> Html {
    let ctx = use_ctx();
    let l = ctx.llm();
    // the text typed into a field while it is not a value, and why
    let drafts = use_state(HashMap::<&'static str, (String, String)>::new);
    let (c, d) = (p.config, p.dist);
    let commit = {
        let (dispatch, drafts) = (ctx.dispatch.clone(), drafts.clone());
        move |id: &'static str, text: String| match setup::with(&c, &d, id, &text) {
            Ok((c, d)) => {
                if drafts.contains_key(id) {
                    let mut m = (*drafts).clone();
                    m.remove(id);
                    drafts.set(m);
                }
                dispatch.dispatch(Action::SetJob(c, d));
            }
            Err(e) => {
                let mut m = (*drafts).clone();
                m.insert(id, (text, e));
                drafts.set(m);
            }
        }
    };
    let control = |f: &Field| -> Html {
        let id = f.id;
        let label = l.label(id);
        match &f.kind {
            Kind::Select(options) => {
                let commit = commit.clone();
                let onchange = Callback::from(move |e: Event| commit(id, e.target_unchecked_into::<HtmlSelectElement>().value()));
                html! {
                    <div class="field">
                        <label for={id}>{ label }</label>
                        <select {id} data-testid={id} {onchange}>
                            { for options.iter().map(|o| html! {
                                <option value={*o} selected={*o == f.value}>{ if o.is_empty() { "—" } else { o } }</option>
                            }) }
                        </select>
                    </div>
                }
            }
            Kind::Text => {
                let commit = commit.clone();
                let oninput = Callback::from(move |e: InputEvent| commit(id, e.target_unchecked_into::<HtmlInputElement>().value()));
                let draft = drafts.get(id);
                let value = draft.map_or_else(|| f.value.clone(), |d| d.0.clone());
                html! {
                    <div class={classes!("field", draft.is_some().then_some("invalid"))}>
                        <label for={id}>{ label }</label>
                        <input {id} type="text" {value} data-testid={id} {oninput} aria-invalid={draft.is_some().to_string()} />
                    </div>
                }
            }
            Kind::Checks(options) => {
                let ticked: Vec<&'static str> = f.ticked.clone();
                html! {
                    <div class="targets" role="group" aria-label={label} data-testid={id}>
                        { for options.iter().map(|o| {
                            let o: &'static str = o;
                            let commit = commit.clone();
                            let next = setup::toggle_target(&ticked, o);
                            let onchange = Callback::from(move |_: Event| commit(id, next.clone()));
                            let box_id = format!("{id}-{o}");
                            html! {
                                <div class="field check">
                                    <input id={box_id.clone()} type="checkbox" checked={ticked.contains(&o)} data-testid={format!("target-{o}")} {onchange} />
                                    <label for={box_id}>{ o }</label>
                                </div>
                            }
                        }) }
                    </div>
                }
            }
        }
    };
    let errors: Vec<_> = p.fields.iter().filter_map(|f| drafts.get(f.id).map(|d| (f.id, d.1.clone()))).collect();
    let adapters = p.fields.iter().any(|f| f.id == "lora-r");
    if p.fields.is_empty() {
        return html! {};
    }
    html! {
        <div class="llm" data-testid={p.testid.clone()} role="group" aria-label={ctx.tr().llm_setup}>
            <div class="grid2">{ for p.fields.iter().map(control) }</div>
            if adapters { <p class="muted small">{ l.peft_defaults }</p> }
            { for errors.into_iter().map(|(id, e)| html! {
                <p class="error small llm-error" role="alert" data-testid="llm-error">{ format!("{}: {e}", l.label(id)) }</p>
            }) }
        </div>
    }
}
