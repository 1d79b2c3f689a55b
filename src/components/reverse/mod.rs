//! The reverse views (issue 26) on the typed state: the largest value that fits for the mode
//! (`largest`), the cheapest fixes inside the what-if panel (`fixes`), what fits the GPU
//! (`fits`), the command that runs the setup (`launch`) and measuring it yourself (`measure`).
//! Their logic is `crate::reverse` (tested natively); each computation runs after the page is
//! drawn, and the long ones yield to the page between steps.

pub mod fits;
pub mod fixes;
pub mod largest;
pub mod launch;
pub mod measure;

pub use fits::FitsTable;
pub use fixes::{use_fixes, Fixes};
pub use largest::Largest;
pub use launch::Launch;
pub use measure::Measure;

use yew::prelude::*;

/// A copy button for `text` (`data-testid` `{testid}`), saying "Copied" once copied.
#[function_component(CopyButton)]
pub fn copy_button(p: &CopyProps) -> Html {
    let ctx = super::use_ctx();
    let done = use_state(|| false);
    let onclick = {
        let (text, done) = (p.text.clone(), done.clone());
        Callback::from(move |_| {
            let done = done.clone();
            crate::dom::copy_text(&text, move |ok| done.set(ok));
        })
    };
    html! {
        <button class="copy" data-testid={p.testid.clone()} {onclick}>{ if *done { ctx.modes().copied } else { ctx.modes().copy } }</button>
    }
}

#[derive(Properties, PartialEq)]
pub struct CopyProps {
    pub text: AttrValue,
    pub testid: AttrValue,
}
