//! The "Hugging Face model" field: a model id (`Qwen/Qwen2.5-7B-Instruct`, `…@revision`) or a hub
//! URL. The lazily loaded module fetches its `config.json` from huggingface.co and imports it
//! ([`crate::extras::load_hub`]); a failure says what happened and offers the next step: an
//! access-token field for a gated model, a retry for a network failure, the paste box for a
//! `model_type` the importer does not know.

use super::Ctx;
use crate::dom;
use crate::extras;
use crate::i18n::Tr;
use crate::state::Action;
use std::rc::Rc;
use vramcalc_core::hub::{HubErrorKind, HubFailure};
use web_sys::HtmlInputElement;
use yew::prelude::*;

pub enum Status {
    Loading,
    Loaded,
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

/// The field's state, held by the model panel (a plain function, not a component: each component
/// type costs bundle size).
#[hook]
pub fn use_hub_field() -> UseStateHandle<Option<Rc<Status>>> {
    use_state(|| None::<Rc<Status>>)
}

/// The field (uncontrolled: its text is read on submit).
pub fn hub_field(ctx: &Ctx, status: UseStateHandle<Option<Rc<Status>>>) -> Html {
    let t = ctx.tr();
    let onsubmit = {
        let (status, d) = (status.clone(), ctx.dispatch.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            let (input, status, d) = (dom::input_value("hub-id"), status.clone(), d.clone());
            status.set(Some(Rc::new(Status::Loading)));
            wasm_bindgen_futures::spawn_local(async move {
                let next = match extras::load_hub(&input, &dom::hub_token()).await {
                    Ok(loaded) => {
                        d.dispatch(Action::LoadHub(Box::new(loaded)));
                        Status::Loaded
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
                <input id="hub-id" type="text" placeholder={t.hub_placeholder}
                    spellcheck="false" autocomplete="off" data-testid="hub-id" />
                <button type="submit" disabled={loading} data-testid="hub-load" data-status={status.as_ref().map(|s| match **s {
                    Status::Loading => "loading",
                    Status::Loaded => "loaded",
                    Status::Failed(_) => "failed",
                })}>{ t.hub_load }</button>
            </div>
            { match status.as_deref() {
                Some(Status::Failed(f)) => html! {
                    <div class="hub-failed">
                        <p class="error" role="alert" data-testid="hub-error" data-kind={f.kind.name()}>{ &f.message }</p>
                        { next_steps(t, f, retry, "hub-token") }
                    </div>
                },
                _ => html! {},
            } }
        </form>
    }
}
