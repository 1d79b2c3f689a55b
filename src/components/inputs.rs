//! Labelled form controls. Each keeps what the user typed while it is invalid and shows why next
//! to the field; valid values are sent up immediately (live estimate on every keystroke).

use yew::prelude::*;
use web_sys::{HtmlInputElement, HtmlSelectElement};

fn input_value(e: &InputEvent) -> String {
    e.target_unchecked_into::<HtmlInputElement>().value()
}

#[derive(Properties, PartialEq)]
pub struct NumberProps {
    pub id: AttrValue,
    pub label: AttrValue,
    pub value: u64,
    #[prop_or(1)]
    pub min: u64,
    #[prop_or(u64::MAX)]
    pub max: u64,
    pub testid: AttrValue,
    pub on_change: Callback<u64>,
    /// A problem the core reported for this value.
    #[prop_or_default]
    pub error: Option<String>,
    /// Shown when the text is not a whole number in range.
    pub invalid_text: AttrValue,
    #[prop_or_default]
    pub help: Option<AttrValue>,
}

#[function_component(NumberField)]
pub fn number_field(p: &NumberProps) -> Html {
    let draft = use_state(|| None::<String>);
    let oninput = {
        let (draft, cb, min, max) = (draft.clone(), p.on_change.clone(), p.min, p.max);
        Callback::from(move |e: InputEvent| {
            let text = input_value(&e);
            match text.trim().parse::<u64>() {
                Ok(v) if v >= min && v <= max => {
                    draft.set(None);
                    cb.emit(v);
                }
                _ => draft.set(Some(text)),
            }
        })
    };
    let error = if draft.is_some() { Some(p.invalid_text.to_string()) } else { p.error.clone() };
    let value = (*draft).clone().unwrap_or_else(|| p.value.to_string());
    let err_id = format!("{}-error", p.id);
    html! {
        <div class={classes!("field", error.is_some().then_some("invalid"))}>
            <label for={p.id.clone()}>{ &p.label }</label>
            <input id={p.id.clone()} type="number" inputmode="numeric" min={p.min.to_string()}
                value={value} {oninput} data-testid={p.testid.clone()}
                aria-invalid={error.is_some().to_string()}
                aria-describedby={error.is_some().then(|| err_id.clone())} />
            if let Some(h) = &p.help { <small class="help">{ h }</small> }
            if let Some(e) = error {
                <div class="error" id={err_id} role="alert" data-testid={format!("{}-error", p.testid)}>{ e }</div>
            }
        </div>
    }
}

#[derive(Properties, PartialEq)]
pub struct SelectProps {
    pub id: AttrValue,
    pub label: AttrValue,
    /// `(value, label)`.
    pub options: Vec<(String, String)>,
    pub value: String,
    pub testid: AttrValue,
    pub on_change: Callback<String>,
}

#[function_component(SelectField)]
pub fn select_field(p: &SelectProps) -> Html {
    let onchange = {
        let cb = p.on_change.clone();
        Callback::from(move |e: Event| cb.emit(e.target_unchecked_into::<HtmlSelectElement>().value()))
    };
    html! {
        <div class="field">
            <label for={p.id.clone()}>{ &p.label }</label>
            <select id={p.id.clone()} {onchange} data-testid={p.testid.clone()}>
                { for p.options.iter().map(|(v, l)| html! {
                    <option value={v.clone()} selected={*v == p.value}>{ l }</option>
                }) }
            </select>
        </div>
    }
}

#[derive(Properties, PartialEq)]
pub struct CheckProps {
    pub id: AttrValue,
    pub label: AttrValue,
    pub checked: bool,
    pub testid: AttrValue,
    pub on_change: Callback<bool>,
}

#[function_component(CheckField)]
pub fn check_field(p: &CheckProps) -> Html {
    let onchange = {
        let cb = p.on_change.clone();
        Callback::from(move |e: Event| cb.emit(e.target_unchecked_into::<HtmlInputElement>().checked()))
    };
    html! {
        <div class="field check">
            <input id={p.id.clone()} type="checkbox" checked={p.checked} {onchange} data-testid={p.testid.clone()} />
            <label for={p.id.clone()}>{ &p.label }</label>
        </div>
    }
}

/// `(value, label)` options from a core enum's `ALL` and `name()`.
pub fn enum_options<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> Vec<(String, String)> {
    all.iter().map(|&v| (name(v).to_string(), name(v).to_string())).collect()
}
