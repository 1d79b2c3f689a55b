//! The "Hugging Face model" field: a model id (`Qwen/Qwen2.5-7B-Instruct`, `…@revision`) or a hub
//! URL. The lazily loaded module fetches its `config.json` from huggingface.co and imports it
//! ([`crate::extras::load_hub`]); a failure says what happened and offers the next step: an
//! access-token field for a gated model, a retry for a network failure, the paste box for a
//! `model_type` the importer does not know.

use super::use_ctx;
use crate::dom;
use crate::extras;
use crate::i18n::{fill, Tr};
use crate::state::Action;
use std::rc::Rc;
use vramcalc_core::hub::{HubErrorKind, HubFailure};
use web_sys::HtmlInputElement;
use yew::prelude::*;

enum Status {
    Loading,
    Loaded(String),
    Failed(HubFailure),
}

/// The access-token field: typed into this tab's SessionStorage ([`dom::set_hub_token`]), never
/// into the app's state.
pub fn token_field(t: &Tr, testid: &'static str) -> Html {
    let oninput = Callback::from(|e: InputEvent| dom::set_hub_token(&e.target_unchecked_into::<HtmlInputElement>().value()));
    html! {
        <label class="field token">
            <span>{ t.hub_token }</span>
            <input type="password" autocomplete="off" spellcheck="false" placeholder="hf_…" {oninput} data-testid={testid} />
        </label>
    }
}

/// A hub failure's next steps (shared with the link notice).
pub fn next_steps(t: &Tr, f: &HubFailure, retry: Html, token_testid: &'static str) -> Html {
    match f.kind {
        HubErrorKind::Gated => html! { <>{ token_field(t, token_testid) }{ retry }</> },
        HubErrorKind::Network => retry,
        HubErrorKind::Unsupported => html! {
            <button type="button" onclick={Callback::from(|_| dom::open_paste())} data-testid="hub-paste">{ t.hub_paste }</button>
        },
        _ => html! {},
    }
}

#[function_component(HubField)]
pub fn hub_field() -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let text = use_state(String::new);
    let status = use_state(|| None::<Rc<Status>>);
    let oninput = {
        let text = text.clone();
        Callback::from(move |e: InputEvent| text.set(e.target_unchecked_into::<HtmlInputElement>().value()))
    };
    let onsubmit = {
        let (text, status, d) = (text.clone(), status.clone(), ctx.dispatch.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            let (input, status, d) = ((*text).clone(), status.clone(), d.clone());
            status.set(Some(Rc::new(Status::Loading)));
            wasm_bindgen_futures::spawn_local(async move {
                let next = match extras::load_hub(&input, &dom::hub_token()).await {
                    Ok(loaded) => {
                        let id = loaded.hub.to_string();
                        d.dispatch(Action::LoadHub(Box::new(loaded)));
                        Status::Loaded(id)
                    }
                    Err(f) => Status::Failed(f),
                };
                status.set(Some(Rc::new(next)));
            })
        })
    };
    let loading = matches!(status.as_deref(), Some(Status::Loading));
    let retry = html! { <button type="submit" data-testid="hub-retry">{ t.hub_retry }</button> };
    html! {
        <form class="hub" data-testid="hub" {onsubmit}>
            <label for="hub-id">{ t.hub_model }</label>
            <div class="hub-row">
                <input id="hub-id" type="text" value={(*text).clone()} {oninput} placeholder={t.hub_placeholder}
                    spellcheck="false" autocomplete="off" data-testid="hub-id" />
                <button type="submit" disabled={loading} data-testid="hub-load">{ t.hub_load }</button>
            </div>
            { match status.as_deref() {
                Some(Status::Loading) => html! { <p class="muted small" role="status" data-testid="hub-loading">{ t.hub_loading }</p> },
                Some(Status::Loaded(id)) => html! { <p class="ok" role="status" data-testid="hub-ok">{ fill(t.hub_loaded, &[id]) }</p> },
                Some(Status::Failed(f)) => html! {
                    <div class="hub-failed">
                        <p class="error" role="alert" data-testid="hub-error" data-kind={f.kind.name()}>{ &f.message }</p>
                        { next_steps(t, f, retry, "hub-token") }
                    </div>
                },
                None => html! {},
            } }
        </form>
    }
}
