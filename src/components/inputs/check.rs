//! A checkbox with its label.

use web_sys::HtmlInputElement;
use yew::prelude::*;

pub struct CheckProps {
    pub id: AttrValue,
    pub label: AttrValue,
    pub checked: bool,
    pub testid: AttrValue,
    pub on_change: Callback<bool>,
}

/// A plain view function: no state, so no component (its lifecycle code) in the bundle.
pub fn check_field(p: CheckProps) -> Html {
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
