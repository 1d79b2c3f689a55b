//! Sharing: the notice after opening a link, "Copy link", and the Embed dialog.

use super::{use_ctx, Ctx};
use crate::i18n::{tr, Lang};
use crate::dom;
use crate::i18n::fill;
use crate::share_link::{embed_height, embed_query, iframe_snippet, Control, Notice, EMBED_PAGE, LISTENER_JS};
use crate::state::{Action, Saved};
use wasm_bindgen::JsCast;
use web_sys::HtmlInputElement;
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

#[derive(Properties, PartialEq)]
pub struct EmbedBuilderProps {
    /// The state to embed (the page's fragment).
    pub fragment: AttrValue,
    pub lang: Lang,
}

/// The embed builder page (`embed.html?builder#v1.…`, opened by "Embed" beside the app): the
/// `<iframe>` snippet for the state, the controls to expose, a live preview, and the listener an
/// author pastes once. Part of the embed page's bundle, so the app's bundle does not carry it.
#[function_component(EmbedBuilder)]
pub fn embed_builder(p: &EmbedBuilderProps) -> Html {
    let t = tr(p.lang);
    crate::hooks::use_document_attributes(Default::default(), p.lang);
    let controls = use_state(Vec::<Control>::new);
    let copied = use_state(|| None::<&'static str>);
    let preview_height = use_state(|| None::<f64>);
    let base = dom::app_base();
    let snippet = iframe_snippet(&base, &controls, &p.fragment);
    let src = format!("{base}{EMBED_PAGE}{}#{}", embed_query(&controls), p.fragment);
    // The preview sizes itself the way an author's page does: from the card's height messages.
    {
        let preview_height = preview_height.clone();
        use_effect_with((), move |_| {
            let listener = web_sys::window().map(|w| {
                gloo::events::EventListener::new(&w, "message", move |e| {
                    if let Some(h) = e.dyn_ref::<web_sys::MessageEvent>().and_then(dom::height_message) {
                        preview_height.set(Some(h));
                    }
                })
            });
            move || drop(listener)
        });
    }
    let toggle = |c: Control| {
        let controls = controls.clone();
        Callback::from(move |_| {
            let mut v = (*controls).clone();
            if let Some(i) = v.iter().position(|x| *x == c) {
                v.remove(i);
            } else {
                v.push(c);
            }
            controls.set(v);
        })
    };
    let copy = |what: &'static str, text: String| {
        let copied = copied.clone();
        Callback::from(move |_| {
            let copied = copied.clone();
            dom::copy_text(&text, move |ok| copied.set(ok.then_some(what)));
        })
    };
    let label = |c: Control| match c {
        Control::Batch => t.batch,
        Control::Gpu => t.gpu,
        Control::Precision => t.precision,
    };
    let height = preview_height.unwrap_or(embed_height(&controls) as f64);
    html! {
        <main class="builder">
            <div class="dialog" aria-labelledby="embed-h" data-testid="embed-dialog">
                <div class="dialog-head">
                    <h1 id="embed-h">{ t.embed_title }</h1>
                </div>
                <p class="small">{ t.embed_help }</p>
                <fieldset class="controls-pick">
                    <legend class="small">{ t.embed_controls }</legend>
                    { for Control::ALL.into_iter().map(|c| html! {
                        <label class="inline">
                            <input type="checkbox" checked={controls.contains(&c)} onchange={toggle(c)}
                                data-testid={format!("embed-control-{}", c.id())} />
                            { label(c) }
                        </label>
                    }) }
                </fieldset>
                <textarea readonly=true rows="4" data-testid="embed-snippet" aria-label={t.embed} value={snippet.clone()} />
                <p>
                    <button onclick={copy("snippet", snippet)} data-testid="embed-copy">{ t.copy }</button>
                    if *copied == Some("snippet") { <span class="ok small">{ " " }{ t.copied }</span> }
                </p>
                <p class="small">{ t.embed_listener }</p>
                <pre class="listener" data-testid="embed-listener"><code>{ LISTENER_JS }</code></pre>
                <p>
                    <button onclick={copy("listener", LISTENER_JS.to_string())} data-testid="embed-copy-listener">{ t.copy }</button>
                    if *copied == Some("listener") { <span class="ok small">{ " " }{ t.copied }</span> }
                </p>
                <h3>{ t.preview }</h3>
                <iframe src={src} title="vramcalc" class="embed-preview" data-testid="embed-preview"
                    style={format!("height:{height}px")} loading="lazy"></iframe>
            </div>
        </main>
    }
}
