//! The paste box for a JSON spec or a Hugging Face `config.json`.

use super::use_ctx;
use crate::paste::{parse, Pasted};
use crate::state::Action;
use web_sys::HtmlTextAreaElement;
use yew::prelude::*;

#[function_component(PasteBox)]
pub fn paste_box() -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let text = use_state(String::new);
    // Ok(what was loaded) or Err(message).
    let outcome = use_state(|| None::<Result<Pasted, String>>);
    let oninput = {
        let text = text.clone();
        Callback::from(move |e: InputEvent| text.set(e.target_unchecked_into::<HtmlTextAreaElement>().value()))
    };
    let load = {
        let (text, outcome, d) = (text.clone(), outcome.clone(), ctx.dispatch.clone());
        Callback::from(move |_| {
            let (text, outcome, d) = ((*text).clone(), outcome.clone(), d.clone());
            wasm_bindgen_futures::spawn_local(async move {
                match parse(&text).await {
                    Ok((spec, kind)) => {
                        d.dispatch(match kind {
                            Pasted::HfConfig { context } => Action::ImportHf(spec, context),
                            Pasted::Spec => Action::LoadSpec(spec),
                        });
                        outcome.set(Some(Ok(kind)));
                    }
                    Err(e) => outcome.set(Some(Err(e))),
                }
            })
        })
    };
    html! {
        <details class="paste" data-testid="paste">
            <summary>{ t.paste }</summary>
            <p class="muted small">{ t.paste_help }</p>
            <label for="paste-text" class="sr-only">{ t.paste }</label>
            <textarea id="paste-text" rows="6" value={(*text).clone()} {oninput} data-testid="paste-text"
                spellcheck="false" placeholder="{\"input\": {\"shape\": [3, 32, 32]}, \"layers\": [...]}  |  config.json" />
            <button onclick={load} data-testid="paste-load">{ t.paste_load }</button>
            { match &*outcome {
                Some(Ok(Pasted::Spec)) => html! { <p class="ok" role="status" data-testid="paste-ok">{ t.pasted_spec }</p> },
                Some(Ok(Pasted::HfConfig { .. })) => html! { <p class="ok" role="status" data-testid="paste-ok">{ t.pasted_hf }</p> },
                Some(Err(e)) => html! { <p class="error" role="alert" data-testid="paste-error">{ e }</p> },
                None => html! {},
            } }
        </details>
    }
}
