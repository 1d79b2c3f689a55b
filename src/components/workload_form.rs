//! The settings form of the llama.cpp and pipeline panels: draws `crate::form::Field`s. A
//! field's text is committed as it is typed (`on_commit` answers whether it was a value); a
//! text that is not is kept in the field with the reason beside it, the settings unchanged.

use crate::form::{Field, Kind};
use std::collections::HashMap;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct FormProps {
    pub fields: Vec<Field>,
    /// Each field's label, in the order of `fields`.
    pub labels: Vec<&'static str>,
    /// `(field id, text)` → `Err(why)` when the text is not a value.
    pub on_commit: Callback<(&'static str, String), Result<(), String>>,
    /// Prefix of the controls' element ids (two forms on one page).
    pub prefix: &'static str,
}

#[function_component(WorkloadForm)]
pub fn workload_form(p: &FormProps) -> Html {
    let drafts = use_state(HashMap::<&'static str, (String, String)>::new);
    let commit = {
        let (drafts, cb) = (drafts.clone(), p.on_commit.clone());
        move |id: &'static str, text: String| {
            let mut m = (*drafts).clone();
            match cb.emit((id, text.clone())) {
                Ok(()) => {
                    if m.remove(id).is_some() {
                        drafts.set(m);
                    }
                }
                Err(e) => {
                    m.insert(id, (text, e));
                    drafts.set(m);
                }
            }
        }
    };
    let control = |(f, label): (&Field, &&'static str)| -> Html {
        let id = f.id;
        let dom_id = format!("{}-{id}", p.prefix);
        let draft = drafts.get(id);
        let err_id = format!("{dom_id}-error");
        let error = draft.map(|d| html! { <div class="error" id={err_id.clone()} role="alert" data-testid={format!("{id}-error")}>{ &d.1 }</div> });
        let commit = commit.clone();
        let input = match &f.kind {
            Kind::Select(options) => {
                let onchange = Callback::from(move |e: Event| commit(id, e.target_unchecked_into::<HtmlSelectElement>().value()));
                html! {
                    <select id={dom_id.clone()} data-testid={id} {onchange}>
                        { for options.iter().map(|(v, l)| html! { <option value={v.clone()} selected={*v == f.value}>{ l }</option> }) }
                    </select>
                }
            }
            Kind::Check => {
                let onchange = Callback::from(move |e: Event| commit(id, e.target_unchecked_into::<HtmlInputElement>().checked().to_string()));
                html! { <input type="checkbox" id={dom_id.clone()} data-testid={id} checked={f.value == "true"} {onchange} /> }
            }
            Kind::Number | Kind::Text => {
                let oninput = Callback::from(move |e: InputEvent| commit(id, e.target_unchecked_into::<HtmlInputElement>().value()));
                let value = draft.map_or(f.value.clone(), |d| d.0.clone());
                let (kind, mode) = if f.kind == Kind::Number { ("number", "numeric") } else { ("text", "text") };
                html! {
                    <input type={kind} inputmode={mode} min="0" id={dom_id.clone()} data-testid={id} {value} {oninput}
                        aria-invalid={draft.is_some().to_string()} aria-describedby={draft.is_some().then(|| err_id.clone())} />
                }
            }
        };
        let class = classes!(if f.kind == Kind::Check { "field check" } else { "field" }, draft.is_some().then_some("invalid"));
        html! {
            <div {class}>
                if f.kind == Kind::Check {
                    { input }
                    <label for={dom_id}>{ *label }</label>
                } else {
                    <label for={dom_id}>{ *label }</label>
                    { input }
                }
                { for error }
            </div>
        }
    };
    html! { <div class="form-grid">{ for p.fields.iter().zip(p.labels.iter()).map(control) }</div> }
}
