//! Where the GGUF header comes from: a local file (read by `File.slice`, never uploaded), a
//! file on the hub (read by HTTP `Range`), or a built-in model and a quant name (no file).

use crate::components::use_ctx;
use crate::local::{fetch, quant_models, read, synth, QUANTS};
use crate::state::local::{GgufSource, HubFile, Load, LocalAction};
use crate::state::Action;
use std::rc::Rc;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct SourceProps {
    /// The source of the header shown.
    pub model: Option<GgufSource>,
    pub load: Load,
}

#[derive(Clone, Copy, PartialEq)]
enum Tab {
    File,
    Hub,
    Quant,
}

fn finish(d: &crate::components::Dispatch, src: GgufSource, r: Result<read::Read, String>) {
    d.dispatch(Action::Local(match r {
        Ok(r) => LocalAction::Loaded(src, Rc::new(r.header)),
        Err(e) => LocalAction::Failed(src, e),
    }));
}

/// Reads a hub file's header by `Range` and reports it.
fn read_hub(d: crate::components::Dispatch, f: HubFile) {
    wasm_bindgen_futures::spawn_local(async move {
        let r = read::read_header(
            |s, e| {
                let f = f.clone();
                async move { fetch::hub_range(&f, s, e).await }
            },
            read::FIRST_READ,
        )
        .await;
        finish(&d, GgufSource::Hub(f), r);
    });
}

#[function_component(SourcePicker)]
pub fn source_picker(p: &SourceProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.local();
    let tab = use_state(|| Tab::File);
    let hub_text = use_state(String::new);
    let hub_error = use_state(|| None::<String>);
    let quant_model = use_state(|| "qwen3-8b".to_string());
    let quant = use_state(|| "Q4_K_M".to_string());
    let models = use_memo((), |_| quant_models());

    let on_file = {
        let d = ctx.dispatch.clone();
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            let Some(file) = input.files().and_then(|l| l.item(0)) else { return };
            let src = GgufSource::File { name: file.name(), size: file.size() as u64 };
            d.dispatch(Action::Local(LocalAction::Loading(src.clone())));
            let d = d.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let r = read::read_header(
                    |s, e| {
                        let f = file.clone();
                        async move { fetch::file_range(&f, s, e).await }
                    },
                    read::FIRST_READ,
                )
                .await;
                finish(&d, src, r);
            });
        })
    };
    let on_hub = {
        let (d, text, err) = (ctx.dispatch.clone(), hub_text.clone(), hub_error.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            match HubFile::parse(&text) {
                Err(e) => err.set(Some(e)),
                Ok(f) => {
                    err.set(None);
                    d.dispatch(Action::Local(LocalAction::Loading(GgufSource::Hub(f.clone()))));
                    read_hub(d.clone(), f);
                }
            }
        })
    };
    // a link's hub file (`share_link::start` left it loading): read it once the panel is shown
    {
        let (d, load) = (ctx.dispatch.clone(), p.load.clone());
        use_effect_with((), move |_| {
            if let Load::Loading(GgufSource::Hub(f)) = load {
                read_hub(d, f);
            }
        });
    }
    let on_quant = {
        let (d, m, q) = (ctx.dispatch.clone(), quant_model.clone(), quant.clone());
        Callback::from(move |_| {
            let src = GgufSource::Quant { model: (*m).clone(), quant: (*q).clone() };
            d.dispatch(Action::Local(LocalAction::Loading(src.clone())));
            d.dispatch(Action::Local(match synth(&m, &q) {
                Ok(h) => LocalAction::Loaded(src, Rc::new(h)),
                Err(e) => LocalAction::Failed(src, e),
            }));
        })
    };
    let tab_button = |which: Tab, label: &'static str, id: &'static str| {
        let selected = *tab == which;
        let tab = tab.clone();
        let onclick = Callback::from(move |_| tab.set(which));
        html! { <button type="button" role="tab" aria-selected={selected.to_string()} data-testid={id} {onclick}>{ label }</button> }
    };
    let status = match (&p.load, &p.model) {
        (Load::Loading(_), _) => "loading",
        (Load::Failed(..), _) => "failed",
        (Load::Idle, Some(_)) => "loaded",
        (Load::Idle, None) => "idle",
    };
    let select = |id: &'static str, label: &'static str, options: Vec<&'static str>, state: UseStateHandle<String>| {
        let value = (*state).clone();
        let onchange = Callback::from(move |e: Event| state.set(e.target_unchecked_into::<HtmlSelectElement>().value()));
        html! {
            <div class="field">
                <label for={id}>{ label }</label>
                <select {id} data-testid={id} {onchange}>
                    { for options.into_iter().map(|o| html! { <option value={o} selected={o == value}>{ o }</option> }) }
                </select>
            </div>
        }
    };
    html! {
        <div class="gguf-source" data-testid="gguf-source" data-status={status}>
            <div class="tabs" role="tablist">
                { tab_button(Tab::File, t.source_file, "gguf-tab-file") }
                { tab_button(Tab::Hub, t.source_hub, "gguf-tab-hub") }
                { tab_button(Tab::Quant, t.source_quant, "gguf-tab-quant") }
            </div>
            if *tab == Tab::File {
                <div class="field">
                    <input type="file" accept=".gguf" id="gguf-file" data-testid="gguf-file" aria-label={t.source_file} onchange={on_file} />
                    <p class="muted small">{ t.file_note }</p>
                </div>
            }
            if *tab == Tab::Hub {
                <form class="field" onsubmit={on_hub}>
                    <label for="gguf-hub">{ t.hub_label }</label>
                    <input id="gguf-hub" type="text" data-testid="gguf-hub" placeholder={t.hub_placeholder} value={(*hub_text).clone()}
                        oninput={{ let h = hub_text.clone(); Callback::from(move |e: InputEvent| h.set(e.target_unchecked_into::<HtmlInputElement>().value())) }} />
                    <button type="submit" data-testid="gguf-hub-load">{ t.read_header }</button>
                    if let Some(e) = &*hub_error {
                        <div class="error" role="alert" data-testid="gguf-hub-invalid">{ e }</div>
                    }
                </form>
            }
            if *tab == Tab::Quant {
                <div class="row">
                    { select("gguf-quant-model", t.model_label, (*models).clone(), quant_model.clone()) }
                    { select("gguf-quant", t.quant_label, QUANTS.to_vec(), quant.clone()) }
                    <button type="button" data-testid="gguf-quant-use" onclick={on_quant}>{ t.use_quant }</button>
                </div>
            }
            if let Load::Loading(_) = &p.load {
                <p class="muted small" aria-live="polite">{ t.reading }</p>
            }
            if let Load::Failed(_, e) = &p.load {
                <p class="error" role="alert" data-testid="gguf-error">{ e }</p>
            }
        </div>
    }
}
