//! The notice after opening a shared link.

use crate::components::Ctx;
use crate::i18n::fill;
use crate::share_link::Notice;
use crate::state::{Action, Saved};
use yew::prelude::*;

/// "You opened a shared link…" / "This link could not be opened: …", with "back to my saved model".
/// A plain function, not a component: each component type costs bundle size.
pub fn link_notice(ctx: &Ctx, notice: &Notice, saved: Option<Saved>, dismiss: Callback<()>) -> Html {
    let t = ctx.tr();
    let (text, broken) = match notice {
        Notice::Opened => (t.link_opened.to_string(), false),
        Notice::Broken(e) => (fill(t.link_broken, &[e]), true),
    };
    let back = saved.map(|saved| {
        let (d, dismiss) = (ctx.dispatch.clone(), dismiss.clone());
        let onclick = Callback::from(move |_| {
            d.dispatch(Action::Restore(saved.clone()));
            dismiss.emit(());
        });
        html! { <button {onclick} data-testid="back-to-saved">{ t.back_to_saved }</button> }
    });
    let on_dismiss = Callback::from(move |_| dismiss.emit(()));
    html! {
        <div class={classes!("notice", broken.then_some("broken"))} role={if broken { "alert" } else { "status" }}
            data-testid="link-notice" data-kind={if broken { "broken" } else { "opened" }}>
            <span data-testid="link-notice-text">{ text }</span>
            { for back }
            <button onclick={on_dismiss} data-testid="link-notice-dismiss">{ t.dismiss }</button>
        </div>
    }
}
