//! The pipeline panel's hub import: a diffusers repository's id (and an access token for a gated
//! one, kept in this tab), loaded by `crate::pipeline::hub::load`; the error says what to do.

use crate::components::use_ctx;
use crate::pipeline::{hub, with_hub};
use crate::state::pipeline::PipelineState;
use crate::state::Action;
use vramcalc_core::hub::HubError;
use web_sys::HtmlInputElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct HubProps {
    pub state: PipelineState,
}

#[function_component(PipeHub)]
pub fn pipe_hub(p: &HubProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.pipe();
    let (id, token) = (use_node_ref(), use_node_ref());
    let busy = use_state(|| false);
    let error = use_state(|| None::<HubError>);
    let onsubmit = {
        let (id, token, busy, error, d, s) = (id.clone(), token.clone(), busy.clone(), error.clone(), ctx.dispatch.clone(), p.state.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            let text = |r: &NodeRef| r.cast::<HtmlInputElement>().map(|i| i.value()).unwrap_or_default();
            let (input, tok) = (text(&id), text(&token));
            let (busy, error, d, s) = (busy.clone(), error.clone(), d.clone(), s.clone());
            busy.set(true);
            wasm_bindgen_futures::spawn_local(async move {
                match hub::load(&input, &tok).await {
                    Ok(h) => {
                        error.set(None);
                        d.dispatch(Action::SetPipeline(with_hub(&s, h)));
                    }
                    Err(e) => error.set(Some(e)),
                }
                busy.set(false);
            });
        })
    };
    html! {
        <form class="pipe-hub small" data-testid="pipe-hub" {onsubmit}>
            <label>{ t.hub_id }{ " " }
                <input ref={id} type="text" data-testid="pipe-hub-id" placeholder="stabilityai/stable-diffusion-xl-base-1.0" autocomplete="off" spellcheck="false" /></label>
            { " " }
            <label>{ t.hub_token }{ " " }<input ref={token} type="password" data-testid="pipe-hub-token" autocomplete="off" /></label>
            { " " }
            <button type="submit" data-testid="pipe-hub-load" disabled={*busy}>{ if *busy { t.hub_loading } else { t.hub_load } }</button>
            if let Some(e) = &*error {
                <p class="error" role="alert" data-testid="pipe-hub-error" data-kind={e.kind().name()}>{ e.to_string() }</p>
            }
        </form>
    }
}
