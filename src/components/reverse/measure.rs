//! "Measure it yourself": the script that measures the estimated step on the user's GPU, and a
//! field for the peak it prints, compared with the estimate and kept in the share link (`mp=`).

use super::CopyButton;
use crate::components::use_ctx;
use crate::i18n::fill;
use crate::reverse::measure::{deviation, parse};
use crate::state::Action;
use web_sys::HtmlInputElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct MeasureProps {
    /// `reverse::measure::script` of the setup.
    pub script: Result<String, String>,
    /// The estimate's peak allocated.
    pub estimate: u64,
    pub measured: Option<u64>,
}

#[function_component(Measure)]
pub fn measure(p: &MeasureProps) -> Html {
    let ctx = use_ctx();
    let m = ctx.modes();
    // the text while it is not a figure
    let draft = use_state(|| None::<String>);
    let oninput = {
        let (d, draft) = (ctx.dispatch.clone(), draft.clone());
        Callback::from(move |e: InputEvent| {
            let text = e.target_unchecked_into::<HtmlInputElement>().value();
            match parse(&text) {
                Some(b) => {
                    draft.set(None);
                    d.dispatch(Action::SetMeasured(Some(b)));
                }
                None if text.trim().is_empty() => {
                    draft.set(None);
                    d.dispatch(Action::SetMeasured(None));
                }
                None => draft.set(Some(text)),
            }
        })
    };
    let value = draft.as_ref().cloned().unwrap_or_else(|| p.measured.map(|b| b.to_string()).unwrap_or_default());
    let clear = { let d = ctx.dispatch.clone(); Callback::from(move |_| d.dispatch(Action::SetMeasured(None))) };
    html! {
        <div class="measure" data-testid="measure">
            <h3>{ m.measure_h }</h3>
            <p class="small muted">{ m.measure_help }</p>
            { match &p.script {
                Ok(s) => html! {
                    <>
                        <CopyButton text={AttrValue::from(s.clone())} testid="copy-measure" />
                        <pre class="small" tabindex="0"><code data-testid="measure-script">{ s }</code></pre>
                    </>
                },
                Err(e) => html! { <p class="small muted" data-testid="measure-script-none">{ e }</p> },
            } }
            <div class={classes!("field", draft.is_some().then_some("invalid"))}>
                <label for="measured">{ m.measured }</label>
                <input id="measured" type="text" inputmode="numeric" {value} {oninput} data-testid="measured-input" aria-invalid={draft.is_some().to_string()} />
                if draft.is_some() { <div class="error" role="alert" data-testid="measured-error">{ m.measured_bad }</div> }
            </div>
            if let Some(b) = p.measured {
                <p class="small" data-testid="measured-vs" data-bytes={b.to_string()} data-deviation={deviation(p.estimate, b)}>
                    { fill(m.vs_measured, &[&ctx.bytes(p.estimate), &ctx.bytes(b), &deviation(p.estimate, b)]) }
                    { " " }<button class="link" onclick={clear} data-testid="measured-clear">{ m.clear }</button>
                </p>
            }
        </div>
    }
}
