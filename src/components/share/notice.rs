//! The notice after opening a shared link.

use crate::components::Ctx;
use crate::i18n::fill;
use crate::share_link::Notice;
use crate::state::{Action, Saved};
use yew::prelude::*;

/// "You opened a shared link…" / "This link could not be opened: …", with "back to my saved model"
/// and, when a hub model could not be fetched, "Retry".
/// A plain function, not a component: each component type costs bundle size.
pub fn link_notice(ctx: &Ctx, notice: &Notice, saved: Option<Saved>, dismiss: Callback<()>) -> Html {
    let t = ctx.tr();
    let (text, broken) = match notice {
        Notice::Opened => (t.link_opened.to_string(), false),
        Notice::Broken(e) | Notice::Unfetched(e, _) => (fill(t.link_broken, &[e]), true),
    };
    let retry = match notice {
        Notice::Unfetched(_, link) => Some(retry_button(t.retry, link)),
        _ => None,
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
            { for retry }
            { for back }
            <button onclick={on_dismiss} data-testid="link-notice-dismiss">{ t.dismiss }</button>
        </div>
    }
}

/// Opens `link` again (a hub model's config is fetched again): the address bar shows the
/// default model's link meanwhile.
pub fn retry_button(label: &'static str, link: &str) -> Html {
    let hash = format!("#{link}");
    let onclick = Callback::from(move |_| {
        if let Some(w) = web_sys::window() {
            let _ = w.location().set_hash(&hash);
            let _ = w.location().reload();
        }
    });
    html! { <button {onclick} data-testid="link-retry">{ label }</button> }
}
