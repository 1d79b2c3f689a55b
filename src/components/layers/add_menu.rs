//! "Add layer": the searchable menu of the core's layer kinds.

use crate::components::use_ctx;
use crate::fields::fit_to_input;
use crate::state::Action;
use crate::tree::{ListPath, NodePath};
use vramcalc_core::spec::Layer;
use web_sys::{HtmlElement, HtmlInputElement};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct AddProps {
    pub list: ListPath,
    /// The shape the new layer will receive (to fit its input size).
    pub shape: Option<Vec<u64>>,
    pub testid: AttrValue,
    #[prop_or_default]
    pub compact: bool,
}

/// "Add layer": a button that opens a searchable list of every layer kind of the core.
#[function_component(AddLayerMenu)]
pub fn add_layer_menu(p: &AddProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let open = use_state(|| false);
    let query = use_state(String::new);
    let search = use_node_ref();
    {
        let search = search.clone();
        use_effect_with(*open, move |open| {
            if *open {
                if let Some(el) = search.cast::<HtmlElement>() {
                    let _ = el.focus();
                }
            }
        });
    }
    let q = query.to_ascii_lowercase().replace([' ', '-'], "_");
    let kinds: Vec<&'static str> = Layer::KINDS.iter().copied().filter(|k| k.contains(q.as_str())).collect();
    let add = {
        let (d, list, shape, open, query) = (ctx.dispatch.clone(), p.list.clone(), p.shape.clone(), open.clone(), query.clone());
        Callback::from(move |kind: &'static str| {
            if let Some(l) = Layer::example(kind) {
                let layer = match &shape {
                    Some(s) => fit_to_input(&l, s),
                    None => l,
                };
                d.dispatch(Action::AddLayer { list: list.clone(), index: None, layer });
            }
            open.set(false);
            query.set(String::new());
        })
    };
    let toggle = { let open = open.clone(); Callback::from(move |_| open.set(!*open)) };
    let oninput = { let query = query.clone(); Callback::from(move |e: InputEvent| query.set(e.target_unchecked_into::<HtmlInputElement>().value())) };
    let onkeydown = {
        let (add, first, open) = (add.clone(), kinds.first().copied(), open.clone());
        Callback::from(move |e: KeyboardEvent| match e.key().as_str() {
            "Enter" => {
                e.prevent_default();
                if let Some(k) = first {
                    add.emit(k);
                }
            }
            "Escape" => open.set(false),
            _ => {}
        })
    };
    let list_id = format!("kinds-{}-{}", NodePath(p.list.parent.clone()), p.testid);
    html! {
        <div class={classes!("add-layer", p.compact.then_some("compact"))}>
            <button onclick={toggle} aria-expanded={open.to_string()} data-testid={p.testid.clone()}
                aria-label={t.add_layer}>{ "+ " }{ if p.compact { "" } else { t.add_layer } }</button>
            if *open {
                <div class="menu">
                    <input ref={search} type="search" placeholder={t.search_kinds} aria-label={t.search_kinds}
                        value={(*query).clone()} {oninput} {onkeydown} data-testid="add-layer-search" aria-controls={list_id.clone()} />
                    <ul id={list_id} class="kinds" role="listbox" aria-label={t.add_layer}>
                        { for kinds.iter().map(|&k| {
                            let add = add.clone();
                            html! { <li><button onclick={Callback::from(move |_| add.emit(k))} data-testid={format!("add-kind-{k}")}>{ k }</button></li> }
                        }) }
                        if kinds.is_empty() { <li class="muted">{ t.no_match }</li> }
                    </ul>
                </div>
            }
        </div>
    }
}
