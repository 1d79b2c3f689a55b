//! A whole-number field.

use web_sys::HtmlInputElement;
use yew::prelude::*;

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
