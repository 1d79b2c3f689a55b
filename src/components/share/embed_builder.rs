//! The embed builder page.

use crate::dom;
use crate::i18n::{tr, Lang};
use crate::share_link::{embed_height, embed_query, iframe_snippet, Control, EMBED_PAGE, LISTENER_JS};
use wasm_bindgen::JsCast;
use yew::prelude::*;

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
