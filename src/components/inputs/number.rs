//! A whole-number field.

use web_sys::HtmlInputElement;
use yew::prelude::*;

fn input_value(e: &InputEvent) -> String {
    e.target_unchecked_into::<HtmlInputElement>().value()
}

/// A whole number ≥ 1. A plain view function: the text typed while invalid (`draft`) is kept by
/// the panel that shows the field (no component's lifecycle code in the bundle).
pub struct NumberProps {
    pub id: &'static str,
    pub label: &'static str,
    pub value: u64,
    pub testid: &'static str,
    pub on_change: Callback<u64>,
    /// A problem the core reported for this value.
    pub error: Option<String>,
    /// Shown when the text is not a whole number ≥ 1.
    pub invalid_text: &'static str,
}

pub fn number_field(p: NumberProps, draft: &UseStateHandle<Option<String>>) -> Html {
    let oninput = {
        let (draft, cb) = (draft.clone(), p.on_change.clone());
        Callback::from(move |e: InputEvent| {
            let text = input_value(&e);
            match text.trim().parse::<u64>() {
                Ok(v) if v >= 1 => {
                    draft.set(None);
                    cb.emit(v);
                }
                _ => draft.set(Some(text)),
            }
        })
    };
    let error = if draft.is_some() { Some(p.invalid_text.to_string()) } else { p.error.clone() };
    let value = (**draft).clone().unwrap_or_else(|| p.value.to_string());
    let err_id = format!("{}-error", p.id);
    html! {
        <div class={classes!("field", error.is_some().then_some("invalid"))}>
            <label for={p.id}>{ p.label }</label>
            <input id={p.id} type="number" inputmode="numeric" min="1"
                value={value} {oninput} data-testid={p.testid}
                aria-invalid={error.is_some().to_string()}
                aria-describedby={error.is_some().then(|| err_id.clone())} />
            if let Some(e) = error {
                <div class="error" id={err_id} role="alert" data-testid={format!("{}-error", p.testid)}>{ e }</div>
            }
        </div>
    }
}
