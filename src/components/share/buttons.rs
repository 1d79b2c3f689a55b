//! "Copy link" and "Embed".

use crate::components::use_ctx;
use crate::dom;
use crate::i18n::fill;
use crate::share_link::EMBED_PAGE;
use web_sys::HtmlInputElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct ShareProps {
    /// The newest link's fragment (`None`: too large for a link).
    pub fragment: Option<AttrValue>,
    /// `fragment` is the current state's (a change is not still being encoded).
    pub fresh: bool,
}

/// "Copy link" (clipboard, with the link in a field to select as a fallback) and "Embed".
#[function_component(ShareButtons)]
pub fn share_buttons(p: &ShareProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    // `None`: not copied yet; `Some(copied)` once tried.
    let copied = use_state(|| None::<bool>);
    let field = use_node_ref();
    let link = p.fragment.as_ref().map(|f| dom::app_link(f));
    // A click while the last edit's link is still being encoded copies that link once it is
    // ready, never the previous state's.
    let copy_when_fresh = use_state(|| false);
    let on_copy = {
        let (copied, link, fresh, wait) = (copied.clone(), link.clone(), p.fresh, copy_when_fresh.clone());
        Callback::from(move |_| match &link {
            Some(link) if fresh => {
                let copied = copied.clone();
                dom::copy_text(link, move |ok| copied.set(Some(ok)));
            }
            _ => wait.set(true),
        })
    };
    {
        let (copied, wait) = (copied.clone(), copy_when_fresh.clone());
        use_effect_with((link.clone(), p.fresh, *copy_when_fresh), move |(link, fresh, waiting)| {
            if *fresh && *waiting {
                wait.set(false);
                // `None`: the new state is too large for a link (the button then says so).
                if let Some(link) = link {
                    dom::copy_text(link, move |ok| copied.set(Some(ok)));
                }
            }
        });
    }
    // Selected, ready for Ctrl+C, when the clipboard refused.
    {
        let field = field.clone();
        use_effect_with(*copied, move |c| {
            if *c == Some(false) {
                if let Some(input) = field.cast::<HtmlInputElement>() {
                    let _ = input.focus();
                    input.select();
                }
            }
        });
    }
    let select_all = Callback::from(|e: FocusEvent| e.target_unchecked_into::<HtmlInputElement>().select());
    html! {
        <div class="share">
            <button onclick={on_copy} disabled={link.is_none()} data-testid="copy-link"
                title={if link.is_none() { t.link_too_large } else { "" }}>{ t.copy_link }</button>
            // The builder is a page of the embed bundle (`src/bin/embed.rs`), opened beside the app.
            if let Some(f) = &p.fragment {
                <a class="button" href={format!("{}{EMBED_PAGE}?builder#{f}", dom::app_base())} target="_blank" rel="noopener"
                    data-testid="open-embed">{ "</> " }{ t.embed }</a>
            } else {
                <button disabled=true data-testid="open-embed">{ "</> " }{ t.embed }</button>
            }
            if let (Some(c), Some(link)) = (*copied, &link) {
                <div class="linkbox" data-testid="share-link">
                    <span class={classes!("small", if c { "ok" } else { "muted" })} data-testid="copy-status" data-copied={c.to_string()}>
                        { if c { t.link_copied } else { t.link_select } }
                    </span>
                    <input type="text" readonly=true value={link.clone()} ref={field} data-testid="share-link-field"
                        aria-label={t.copy_link} onfocus={select_all} />
                    <span class="muted small" data-testid="share-link-length">{ fill(t.link_chars, &[&link.len().to_string()]) }</span>
                </div>
            }
        </div>
    }
}
