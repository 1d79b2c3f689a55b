//! The notice after opening a shared link.

use crate::components::hub::token_field;
use crate::components::Ctx;
use vramcalc_core::hub::HubErrorKind;
use crate::i18n::fill;
use crate::share_link::Notice;
use crate::state::{Action, Saved};
use yew::prelude::*;

/// "You opened a shared link…" / "This link could not be opened: …", with "back to my saved model";
/// for a linked Hugging Face model that could not be fetched, why, and "Retry" (with the token
/// field if it is gated; the retry reloads the page, whose address still holds the link). A plain
/// function, not a component: each component type costs bundle size.
pub fn link_notice(ctx: &Ctx, notice: &Notice, saved: Option<Saved>, dismiss: Callback<()>) -> Html {
    let t = ctx.tr();
    let (text, kind, steps) = match notice {
        Notice::Opened => (t.link_opened.to_string(), "opened", html! {}),
        Notice::Broken(e) => (fill(t.link_broken, &[e]), "broken", html! {}),
        Notice::Unfetched(u) => {
            let hub = u.linked.model.hub.as_ref().map(|h| h.to_string()).unwrap_or_default();
            let onclick = Callback::from(|_| crate::dom::reload());
            let button = html! { <button {onclick} data-testid="link-retry">{ t.hub_retry }</button> };
            let steps = match u.error.kind {
                HubErrorKind::Gated => html! { <>{ token_field(t, "link-token") }{ button }</> },
                _ => button,
            };
            (fill(t.hub_unfetched, &[&hub, &u.error.message]), "unfetched", steps)
        }
    };
    let broken = kind != "opened";
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
            data-testid="link-notice" data-kind={kind}>
            <span data-testid="link-notice-text">{ text }</span>
            { steps }
            { for back }
            <button onclick={on_dismiss} data-testid="link-notice-dismiss">{ t.dismiss }</button>
        </div>
    }
}
