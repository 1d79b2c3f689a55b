//! A drop-down of `(value, label)` options.

use web_sys::HtmlSelectElement;
use yew::prelude::*;

pub struct SelectProps {
    pub id: AttrValue,
    pub label: AttrValue,
    /// `(value, label)`.
    pub options: Vec<(String, String)>,
    pub value: String,
    pub testid: AttrValue,
    pub on_change: Callback<String>,
}

/// A plain view function: no state, so no component (its lifecycle code) in the bundle.
pub fn select_field(p: SelectProps) -> Html {
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
