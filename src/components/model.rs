//! The model panel: presets (grouped by family) or an empty model, the input, the layer editor
//! and the paste box.

use super::layers::{LayersProps, RowMap};
use super::{use_ctx, Shared};
use crate::split::{self, Lazy};
use crate::state::{Action, Model};
use std::collections::BTreeSet;
use vramcalc_core::presets::{self, Family};
use vramcalc_core::spec::{InputDType, InputSpec};
use vramcalc_core::Error;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;
use crate::tree::NodePath;

#[derive(Properties, PartialEq)]
pub struct ModelProps {
    pub model: Model,
    pub collapsed: BTreeSet<NodePath>,
    pub selected: Vec<NodePath>,
    #[prop_or_default]
    pub rows: Option<Shared<RowMap>>,
    #[prop_or_default]
    pub error: Option<Error>,
}

/// `3, 224, 224` / `3x224x224` / `128` → dims (each ≥ 1).
pub fn parse_shape(text: &str) -> Option<Vec<u64>> {
    let dims: Option<Vec<u64>> = text
        .split(|c: char| c == ',' || c == 'x' || c == '×' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u64>().ok().filter(|&d| d >= 1))
        .collect();
    dims.filter(|d| !d.is_empty() && d.len() <= 8)
}

#[function_component(ModelPanel)]
pub fn model_panel(p: &ModelProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let d = ctx.dispatch.clone();
    // A preset is built by the core's importer (a published config) or constructor: the previous
    // model stays until it arrives; a module that fails to load is reported, not a panic.
    let preset_error = use_state(|| None::<String>);
    let current = p.model.preset.clone().unwrap_or_default();
    let on_preset = {
        let (d, preset_error, shown) = (d.clone(), preset_error.clone(), current.clone());
        Callback::from(move |e: Event| {
            let select = e.target_unchecked_into::<HtmlSelectElement>();
            let v = select.value();
            if v.is_empty() {
                return;
            }
            let (d, preset_error, shown) = (d.clone(), preset_error.clone(), shown.clone());
            wasm_bindgen_futures::spawn_local(async move {
                match Model::load_preset(&v).await {
                    Ok(m) => {
                        preset_error.set(None);
                        d.dispatch(Action::LoadPreset(m));
                    }
                    Err(e) => {
                        // The picker goes back to the model still shown.
                        select.set_value(&shown);
                        preset_error.set(Some(e));
                    }
                }
            });
        })
    };
    let on_empty = { let d = d.clone(); Callback::from(move |_| d.dispatch(Action::StartEmpty)) };
    let group = |family: Family, label: &'static str| {
        let items = presets::list().iter().filter(|i| i.family == family).collect::<Vec<_>>();
        if items.is_empty() {
            return html! {};
        }
        html! {
            <optgroup {label}>
                { for items.into_iter().map(|i| html! { <option value={i.id} selected={i.id == current}>{ i.title }</option> }) }
            </optgroup>
        }
    };

    // Input shape: text kept while invalid.
    let input = &p.model.spec.input;
    let shape_draft = use_state(|| None::<String>);
    let on_shape = {
        let (d, draft, input) = (d.clone(), shape_draft.clone(), input.clone());
        Callback::from(move |e: InputEvent| {
            let text = e.target_unchecked_into::<HtmlInputElement>().value();
            match parse_shape(&text) {
                Some(shape) => {
                    draft.set(None);
                    d.dispatch(Action::SetInput(InputSpec { shape, ..input.clone() }));
                }
                None => draft.set(Some(text)),
            }
        })
    };
    let on_dtype = {
        let (d, input) = (d.clone(), input.clone());
        Callback::from(move |e: Event| {
            let v = e.target_unchecked_into::<HtmlSelectElement>().value();
            let dtype = if v == "int64" { InputDType::Int64 } else { InputDType::Float32 };
            d.dispatch(Action::SetInput(InputSpec { dtype, ..input.clone() }));
        })
    };
    let shape_text = (*shape_draft).clone().unwrap_or_else(|| {
        input.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
    });
    let input_error = match &p.error {
        Some(e @ Error::Input(_)) => Some(e.to_string()),
        _ if shape_draft.is_some() => Some(t.input_shape_help.to_string()),
        _ => None,
    };
    let title = p.model.spec.name.clone().unwrap_or_else(|| t.custom_model.to_string());

    html! {
        <section class="panel model" aria-labelledby="model-h" data-testid="model-panel"
            data-preset={current.clone()}>
            <h2 id="model-h">{ t.model }{ ": " }<span class="model-name" data-testid="model-name">{ title }</span></h2>
            <div class="preset-row">
                <div class="field">
                    <label for="preset">{ t.preset }</label>
                    <select id="preset" onchange={on_preset} data-testid="preset-select">
                        <option value="" selected={current.is_empty()} disabled=true>{ t.custom_model }</option>
                        { group(Family::Cnn, t.family_cnn) }
                        { group(Family::Vision, t.family_vision) }
                        { group(Family::Encoder, t.family_encoder) }
                        { group(Family::Llm, t.family_llm) }
                        { group(Family::Moe, t.family_moe) }
                        { group(Family::Rnn, t.family_rnn) }
                    </select>
                </div>
                <button onclick={on_empty} data-testid="start-empty">{ t.start_empty }</button>
            </div>
            if let Some(e) = (*preset_error).clone() {
                <div class="error" role="alert" data-testid="preset-error">{ e }</div>
            }
            <div class="grid2">
                <div class={classes!("field", input_error.is_some().then_some("invalid"))}>
                    <label for="input-shape">{ t.input_shape }</label>
                    <input id="input-shape" type="text" value={shape_text} oninput={on_shape} data-testid="input-shape"
                        aria-invalid={input_error.is_some().to_string()} spellcheck="false" />
                    if let Some(e) = input_error {
                        <div class="error" role="alert" data-testid="input-shape-error">{ e }</div>
                    }
                </div>
                <div class="field">
                    <label for="input-dtype">{ t.input_dtype }</label>
                    <select id="input-dtype" onchange={on_dtype} data-testid="input-dtype">
                        <option value="float32" selected={input.dtype == InputDType::Float32}>{ t.input_float }</option>
                        <option value="int64" selected={input.dtype == InputDType::Int64}>{ t.input_tokens }</option>
                    </select>
                </div>
            </div>
            <Lazy<LayersProps> view={&split::LAYERS} props={LayersProps { spec: p.model.spec.clone(), config: p.model.config, collapsed: p.collapsed.clone(),
                selected: p.selected.clone(), rows: p.rows.clone(), error: p.error.clone() }} />
            <super::import::ImportPanel />
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::parse_shape;

    #[test]
    fn shapes() {
        assert_eq!(parse_shape("3, 224, 224"), Some(vec![3, 224, 224]));
        assert_eq!(parse_shape("3x32x32"), Some(vec![3, 32, 32]));
        assert_eq!(parse_shape("128"), Some(vec![128]));
        assert_eq!(parse_shape(""), None);
        assert_eq!(parse_shape("3, 0"), None);
        assert_eq!(parse_shape("a"), None);
    }
}
