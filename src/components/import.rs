//! The import panel (issue 12): a Hugging Face model id or hub URL, whose `config.json` the app
//! fetches from huggingface.co (`crate::import::hub`), and the paste box for a vramcalc JSON
//! spec or a `config.json` (`crate::import::paste`). A failure says what to do next: a token
//! field for a gated model, a retry after a network failure, the paste box for a `model_type` the
//! importer does not know.

use super::use_ctx;
use crate::import::{hub, hub_action, paste, pasted_action};
use vramcalc_core::hub::{HubError, HubErrorKind};
use web_sys::{HtmlInputElement, HtmlTextAreaElement};
use yew::prelude::*;

#[derive(Clone, PartialEq)]
enum HubState {
    Idle,
    Loading,
    Loaded,
    Failed(String, HubErrorKind),
}

#[function_component(ImportPanel)]
pub fn import_panel() -> Html {
    let ctx = use_ctx();
    let t = crate::i18n::import_tr(ctx.lang);
    let id = use_state(String::new);
    let token = use_state(|| None::<String>);
    let state = use_state(|| HubState::Idle);
    let text = use_state(String::new);
    let pasted = use_state(|| None::<Result<bool, String>>);
    let paste_open = use_state(|| false);
    let onsubmit = {
        let (id, token, state, d) = (id.clone(), token.clone(), state.clone(), ctx.dispatch.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            let (input, typed, state, d) = ((*id).clone(), (*token).clone().unwrap_or_default(), state.clone(), d.clone());
            state.set(HubState::Loading);
            wasm_bindgen_futures::spawn_local(async move {
                match hub::load(&input, &typed).await {
                    Ok((hub, spec, context, dtype)) => {
                        state.set(HubState::Loaded);
                        d.dispatch(hub_action(&hub, spec, context, dtype));
                    }
                    Err(e) => state.set(HubState::Failed(e.to_string(), HubError::kind(&e))),
                }
            });
        })
    };
    let on_id = {
        let id = id.clone();
        Callback::from(move |e: InputEvent| id.set(e.target_unchecked_into::<HtmlInputElement>().value()))
    };
    let on_token = {
        let token = token.clone();
        Callback::from(move |e: InputEvent| token.set(Some(e.target_unchecked_into::<HtmlInputElement>().value())))
    };
    let on_text = {
        let text = text.clone();
        Callback::from(move |e: InputEvent| text.set(e.target_unchecked_into::<HtmlTextAreaElement>().value()))
    };
    let reading = use_state(|| false);
    let on_paste = {
        let (text, pasted, d, reading) = (text.clone(), pasted.clone(), ctx.dispatch.clone(), reading.clone());
        Callback::from(move |_: MouseEvent| {
            let (text, pasted, d) = ((*text).clone(), pasted.clone(), d.clone());
            reading.set(true);
            pasted.set(None);
            // read by the worker (the importer is not in the app's bundle)
            let reading = reading.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let answer = paste::read(&text).await;
                reading.set(false);
                match answer {
                    Ok(p) => {
                        pasted.set(Some(Ok(matches!(p, paste::Pasted::Hf(..)))));
                        d.dispatch(pasted_action(p));
                    }
                    Err(e) => pasted.set(Some(Err(e))),
                }
            });
        })
    };
    let (details, area) = (use_node_ref(), use_node_ref());
    let open_paste = {
        let (paste_open, details, area) = (paste_open.clone(), details.clone(), area.clone());
        Callback::from(move |_: MouseEvent| {
            // opened and focused at once (the next step of an unsupported model)
            if let Some(d) = details.cast::<web_sys::HtmlDetailsElement>() {
                d.set_open(true);
            }
            if let Some(t) = area.cast::<web_sys::HtmlElement>() {
                let _ = t.focus();
            }
            paste_open.set(true);
        })
    };
    let on_toggle = {
        let paste_open = paste_open.clone();
        Callback::from(move |e: Event| paste_open.set(e.target_unchecked_into::<web_sys::HtmlDetailsElement>().open()))
    };
    let status = match &*state {
        HubState::Idle => "",
        HubState::Loading => "loading",
        HubState::Loaded => "loaded",
        HubState::Failed(..) => "failed",
    };
    let retry = html! { <button type="submit" data-testid="hub-retry">{ t.hub_retry }</button> };
    let gated = matches!(&*state, HubState::Failed(_, HubErrorKind::Gated)) || token.is_some();
    let placeholder = r#"{"input": {"shape": [3, 32, 32]}, "layers": [...]}  |  config.json"#;
    html! {
        <div class="import">
            <form class="hub" data-testid="hub" {onsubmit}>
                <label for="hub-id">{ t.hub_model }</label>
                <div class="hub-row">
                    <input id="hub-id" type="text" placeholder={t.hub_placeholder} spellcheck="false" autocomplete="off" data-testid="hub-id"
                        value={(*id).clone()} oninput={on_id} />
                    <button type="submit" data-testid="hub-load" data-status={status} disabled={*state == HubState::Loading}>{ t.hub_load }</button>
                </div>
                <div class="hub-status">
                    if let HubState::Failed(message, kind) = &*state {
                        <div class="hub-failed">
                            <p class="error" role="alert" data-testid="hub-error" data-kind={kind.name()}>{ message }</p>
                            if *kind == HubErrorKind::Network { { retry.clone() } }
                            if *kind == HubErrorKind::Unsupported {
                                <button type="button" data-testid="hub-paste" onclick={open_paste}>{ t.hub_paste }</button>
                            }
                        </div>
                    }
                    if gated {
                        <label class="field token"><span>{ t.hub_token }</span>
                            <input type="password" autocomplete="off" spellcheck="false" placeholder="hf_…" data-testid="hub-token"
                                value={(*token).clone().unwrap_or_default()} oninput={on_token} /></label>
                        if matches!(&*state, HubState::Failed(_, HubErrorKind::Gated)) { { retry } }
                    }
                </div>
            </form>
            <details class="paste" data-testid="paste" open={*paste_open} ontoggle={on_toggle} ref={details}>
                <summary>{ t.paste }</summary>
                <p class="muted small">{ t.paste_help }</p>
                <label for="paste-text" class="sr-only">{ t.paste }</label>
                <textarea id="paste-text" rows="6" data-testid="paste-text" spellcheck="false" {placeholder} ref={area}
                    value={(*text).clone()} oninput={on_text} />
                <button type="button" data-testid="paste-load" data-status={if *reading { "loading" } else { "" }} disabled={*reading} onclick={on_paste}>{ t.paste_load }</button>
                <div class="paste-status">
                    { match &*pasted {
                        Some(Ok(hf)) => html! { <p class="ok" role="status" data-testid="paste-ok">{ if *hf { t.pasted_hf } else { t.pasted_spec } }</p> },
                        Some(Err(e)) => html! { <p class="error" role="alert" data-testid="paste-error">{ e }</p> },
                        None => html! {},
                    } }
                </div>
            </details>
        </div>
    }
}
