//! One hyper-parameter of a layer row, edited inline.

use crate::components::use_ctx;
use crate::fields::{set_field, Field, FieldValue};
use crate::state::Action;
use crate::tree::NodePath;
use vramcalc_core::spec::Layer;
use web_sys::HtmlInputElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct FieldProps {
    pub path: NodePath,
    pub layer: Layer,
    pub field: Field,
    /// Activation checkpointing is on: a block's `checkpoint` box shows its flag only then
    /// (issue 22 item 7: never ticked while the setup's box is off).
    #[prop_or_default]
    pub checkpointing: bool,
}

/// One hyper-parameter. Invalid text stays in the box with serde's message beside it.
#[function_component(FieldInput)]
pub fn field_input(p: &FieldProps) -> Html {
    let ctx = use_ctx();
    let draft = use_state(|| None::<(String, String)>);
    let id = format!("f-{}-{}", p.path, p.field.name);
    let name = p.field.name.clone();
    let apply = {
        let (d, path, layer, name, draft) = (ctx.dispatch.clone(), p.path.clone(), p.layer.clone(), name.clone(), draft.clone());
        move |v: FieldValue, text: String| match set_field(&layer, &name, &v) {
            Ok(l) => {
                draft.set(None);
                d.dispatch(Action::EditLayer { path: path.clone(), field: name.clone(), layer: l });
            }
            Err(e) => draft.set(Some((text, e))),
        }
    };
    let testid = format!("field-{}", p.field.name);
    match &p.field.value {
        FieldValue::Bool(b) => {
            let onchange = Callback::from(move |e: Event| {
                let v = e.target_unchecked_into::<HtmlInputElement>().checked();
                apply(FieldValue::Bool(v), String::new())
            });
            let inert = p.field.name == "checkpoint" && !p.checkpointing;
            html! {
                <span class={classes!("lf", "check", inert.then_some("muted"))}>
                    <input {id} type="checkbox" checked={*b && !inert} disabled={inert} {onchange} data-testid={testid}
                        title={inert.then_some(ctx.tr().checkpoint_off)} />
                    <label for={format!("f-{}-{}", p.path, name)}>{ &name }</label>
                    if let Some((_, e)) = &*draft { <span class="error" role="alert" data-testid="field-error">{ e }</span> }
                </span>
            }
        }
        FieldValue::Text(text) => {
            let oninput = Callback::from(move |e: InputEvent| {
                let v = e.target_unchecked_into::<HtmlInputElement>().value();
                apply(FieldValue::Text(v.clone()), v)
            });
            let value = draft.as_ref().map(|(t, _)| t.clone()).unwrap_or_else(|| text.clone());
            let size = value.chars().count().clamp(2, 14);
            html! {
                <span class={classes!("lf", draft.is_some().then_some("invalid"))}>
                    <label for={id.clone()}>{ &name }</label>
                    <input id={id.clone()} type="text" {value} size={size.to_string()} {oninput} data-testid={testid}
                        placeholder={p.field.optional.then_some("—")} aria-invalid={draft.is_some().to_string()}
                        spellcheck="false" autocomplete="off" />
                    if let Some((_, e)) = &*draft { <span class="error" role="alert" data-testid="field-error">{ e }</span> }
                </span>
            }
        }
    }
}
