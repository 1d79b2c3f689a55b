//! A checkbox with its label.

use web_sys::HtmlInputElement;
use yew::prelude::*;

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
