//! The layer editor: one row per layer with its hyper-parameters inline, output shape and share of
//! saved activations; add (searchable menu), reorder (buttons, Alt+↑/↓), duplicate, delete,
//! group into blocks, fold blocks. Core errors show at the row they name.

use super::{percent, use_ctx, Shared};
use crate::analysis::{input_shape_for, RowReport};
use crate::fields::{fields, fit_to_input, set_field, Field, FieldValue};
use crate::state::Action;
use crate::tree::{self, can_ungroup, GroupKind, ListPath, NodePath, Row, Slot};
use std::collections::{BTreeSet, HashMap};
use vramcalc_core::spec::{Layer, ModelSpec};
use vramcalc_core::{Error, TrainConfig};
use wasm_bindgen::JsCast;
use web_sys::{HtmlElement, HtmlInputElement};
use yew::prelude::*;

pub type RowMap = (HashMap<String, RowReport>, u64);

#[derive(Properties, PartialEq)]
pub struct LayersProps {
    pub spec: ModelSpec,
    pub config: TrainConfig,
    pub collapsed: BTreeSet<NodePath>,
    pub selected: Vec<NodePath>,
    /// Per-row figures from the last good estimate.
    #[prop_or_default]
    pub rows: Option<Shared<RowMap>>,
    #[prop_or_default]
    pub error: Option<Error>,
}

/// Focuses the row handle at `path` once the next render has placed it.
fn focus_row_later(path: String) {
    gloo::timers::callback::Timeout::new(0, move || {
        let sel = format!("[data-path=\"{path}\"] .row-handle");
        if let Some(el) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.query_selector(&sel).ok().flatten())
            .and_then(|e| e.dyn_into::<HtmlElement>().ok())
        {
            let _ = el.focus();
        }
    })
    .forget();
}

#[function_component(Layers)]
pub fn layers(p: &LayersProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let d = ctx.dispatch.clone();
    let err = match &p.error {
        Some(Error::Layer { path, .. }) => Some((tree::normalize_core_path(path), p.error.as_ref().map(|e| e.to_string()).unwrap_or_default())),
        _ => None,
    };
    let empty = HashMap::new();
    let (map, total) = match &p.rows {
        Some(r) => (&r.0 .0, r.0 .1),
        None => (&empty, 0),
    };
    let groupable = tree::contiguous(&p.selected).is_some();
    let group_buttons = GroupKind::ALL.iter().map(|&k| {
        let d = d.clone();
        let onclick = Callback::from(move |_| d.dispatch(Action::GroupSelected(k)));
        html! { <button {onclick} disabled={!groupable} data-testid={format!("group-{}", k.name())}>{ k.name() }</button> }
    });
    let rows = tree::rows(&p.spec, &p.collapsed);
    let shape_for = |list: &ListPath, index: Option<usize>| input_shape_for(&p.spec, &p.config, list, index, map);

    let items = rows.into_iter().map(|row| match row {
        Row::Node { path, layer, depth } => {
            let key = path.to_string();
            let (list, index) = (path.list(), path.index().unwrap_or(0));
            let len = list.as_ref().and_then(|l| tree::list(&p.spec, l)).map(|v| v.len()).unwrap_or(0);
            let collapsed = p.collapsed.contains(&path);
            let error = err.as_ref().and_then(|(ep, msg)| {
                let inside = collapsed && ep.starts_with(&format!("{key}."));
                (*ep == key || inside).then(|| msg.clone())
            });
            html! {
                <LayerRow key={key.clone()} path={path.clone()} layer={layer.clone()} {depth} {collapsed}
                    selected={p.selected.contains(&path)} report={map.get(&key).cloned()} {total}
                    first={index == 0} last={index + 1 >= len} {error} />
            }
        }
        Row::List { list, depth, len } => {
            let label = match list.slot {
                Slot::Layers => "layers".to_string(),
                Slot::Body => "body".to_string(),
                Slot::Shortcut => "shortcut".to_string(),
                Slot::Branch(b) => format!("{} {b}", t.branch),
            };
            let key = format!("{}/{label}", NodePath(list.parent.clone()));
            let shape = shape_for(&list, None);
            html! {
                <li key={key.clone()} class="list-head" style={format!("--depth:{depth}")} data-list={key.clone()}>
                    <span class="list-label">{ label }{ format!(" ({len})") }</span>
                    <AddLayerMenu list={list.clone()} {shape} testid="add-layer-into" compact=true />
                </li>
            }
        }
    });
    let top = ListPath::top();
    html! {
        <div class="layers" data-testid="layers">
            <div class="layers-bar">
                <h3>{ t.layers }{ format!(" ({})", p.spec.layers.len()) }</h3>
                <div class="group-bar" role="group" aria-label={t.group_into}>
                    <span class="muted">{ t.group_into }</span>
                    { for group_buttons }
                </div>
            </div>
            <p class="muted small">{ t.group_hint }{ " " }{ t.reorder_hint }</p>
            if p.spec.layers.is_empty() {
                <p class="empty" data-testid="no-layers">{ t.no_layers }</p>
            }
            <ol class="layer-list">{ for items }</ol>
            <AddLayerMenu list={top.clone()} shape={shape_for(&top, None)} testid="add-layer" />
        </div>
    }
}

#[derive(Properties, PartialEq)]
pub struct RowProps {
    pub path: NodePath,
    pub layer: Layer,
    pub depth: usize,
    pub collapsed: bool,
    pub selected: bool,
    pub report: Option<RowReport>,
    /// Saved bytes of the whole model (for the share).
    pub total: u64,
    pub first: bool,
    pub last: bool,
    pub error: Option<String>,
}

#[function_component(LayerRow)]
pub fn layer_row(p: &RowProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let d = ctx.dispatch.clone();
    let path = p.path.clone();
    let act = |a: fn(NodePath) -> Action| {
        let (d, path) = (d.clone(), path.clone());
        Callback::from(move |_: MouseEvent| d.dispatch(a(path.clone())))
    };
    let mover = |delta: isize| {
        let (d, path) = (d.clone(), path.clone());
        Callback::from(move |_: MouseEvent| {
            if let (Some(l), Some(i)) = (path.list(), path.index()) {
                d.dispatch(Action::MoveLayer { path: path.clone(), delta });
                if let Some(j) = i.checked_add_signed(delta) {
                    focus_row_later(l.node(j).to_string());
                }
            }
        })
    };
    let onkeydown = {
        let (d, path, first, last) = (d.clone(), path.clone(), p.first, p.last);
        Callback::from(move |e: KeyboardEvent| {
            if !e.alt_key() {
                return;
            }
            let delta = match e.key().as_str() {
                "ArrowUp" if !first => -1,
                "ArrowDown" if !last => 1,
                _ => return,
            };
            e.prevent_default();
            if let (Some(l), Some(i)) = (path.list(), path.index()) {
                d.dispatch(Action::MoveLayer { path: path.clone(), delta });
                if let Some(j) = i.checked_add_signed(delta) {
                    focus_row_later(l.node(j).to_string());
                }
            }
        })
    };
    let on_select = act(Action::ToggleSelected);
    let key = p.path.to_string();
    let kind = p.layer.kind();
    let block = p.layer.is_block();
    let extra = match &p.layer {
        Layer::Residual { body, shortcut: None, inplace } => {
            let n = Layer::Residual { body: body.clone(), shortcut: Some(Vec::new()), inplace: *inplace };
            Some((t.add_shortcut, "add-shortcut", n))
        }
        Layer::Parallel { branches, join } => {
            let mut b = branches.clone();
            b.push(Vec::new());
            Some((t.add_branch, "add-branch", Layer::Parallel { branches: b, join: *join }))
        }
        _ => None,
    };
    let extra = extra.map(|(label, id, layer)| {
        let (d, path) = (d.clone(), path.clone());
        let onclick = Callback::from(move |_| {
            d.dispatch(Action::EditLayer { path: path.clone(), field: "structure".into(), layer: layer.clone() })
        });
        html! { <button {onclick} data-testid={id}>{ label }</button> }
    });
    let share = p.report.as_ref().map(|r| {
        let pct = if p.total > 0 { r.saved_bytes as f64 * 100.0 / p.total as f64 } else { 0.0 };
        html! {
            <span class="mem" data-testid="layer-share" title={format!("{} {} {}", ctx.bytes(r.saved_bytes), percent(r.saved_bytes, p.total), t.share_of_activations)}>
                <span class="share-bar" aria-hidden="true"><span style={format!("width:{:.1}%", pct.clamp(0.0, 100.0))}></span></span>
                { format!("{} · {}", ctx.bytes(r.saved_bytes), percent(r.saved_bytes, p.total)) }
            </span>
        }
    });
    let handle_label = format!("{key} ({kind})");
    html! {
        <li class={classes!("layer-row", block.then_some("block"), p.error.is_some().then_some("has-error"), p.selected.then_some("selected"))}
            style={format!("--depth:{}", p.depth)} data-testid="layer-row" data-path={key.clone()} data-kind={kind} {onkeydown}>
            <div class="row-head">
                <input type="checkbox" checked={p.selected} onclick={on_select} aria-label={format!("{} {key}", t.select)} data-testid="layer-select" />
                if block {
                    <button class="toggle" onclick={act(Action::ToggleCollapsed)} aria-expanded={(!p.collapsed).to_string()}
                        aria-label={if p.collapsed { t.expand } else { t.collapse }} data-testid="layer-toggle">
                        { if p.collapsed { "▸" } else { "▾" } }
                    </button>
                }
                <button class="row-handle" aria-label={handle_label} title={t.reorder_hint}>
                    <span class="kind">{ kind }</span>
                </button>
                <code class="path">{ &key }</code>
                if let Some(r) = &p.report {
                    <span class="shape" data-testid="layer-shape" title={t.output}>{ format!("→ {}", r.output_shape) }</span>
                    if r.params > 0 {
                        <span class="params muted">{ format!("{} {}", vramcalc_core::thousands(r.params), t.params) }</span>
                    }
                }
                { for share }
                <span class="row-actions">
                    <button onclick={mover(-1)} disabled={p.first} aria-label={t.move_up} title={t.move_up} data-testid="layer-up">{ "↑" }</button>
                    <button onclick={mover(1)} disabled={p.last} aria-label={t.move_down} title={t.move_down} data-testid="layer-down">{ "↓" }</button>
                    <button onclick={act(Action::DuplicateLayer)} aria-label={t.duplicate} title={t.duplicate} data-testid="layer-duplicate">
                        <svg viewBox="0 0 16 16" width="13" height="13" aria-hidden="true" class="icon">
                            <rect x="1.5" y="4.5" width="9" height="10" rx="1.5" /><path d="M5.5 4.5V2.5a1 1 0 0 1 1-1h7a1 1 0 0 1 1 1v8a1 1 0 0 1-1 1h-3" />
                        </svg>
                    </button>
                    if block && can_ungroup(&p.layer) {
                        <button onclick={act(Action::Ungroup)} aria-label={t.ungroup} title={t.ungroup} data-testid="layer-ungroup">{ "⇤" }</button>
                    }
                    { for extra }
                    <button class="danger" onclick={act(Action::DeleteLayer)} aria-label={t.delete} title={t.delete} data-testid="layer-delete">{ "✕" }</button>
                </span>
            </div>
            <div class="row-fields">
                { for fields(&p.layer).into_iter().map(|f| {
                    let key = f.name.clone();
                    html! { <FieldInput {key} path={p.path.clone()} layer={p.layer.clone()} field={f} /> }
                }) }
            </div>
            if let Some(e) = &p.error {
                <div class="error" role="alert" data-testid="layer-error">{ e }</div>
            }
        </li>
    }
}

#[derive(Properties, PartialEq)]
pub struct FieldProps {
    pub path: NodePath,
    pub layer: Layer,
    pub field: Field,
}

/// One hyper-parameter. Invalid text stays in the box with serde's message beside it.
#[function_component(FieldInput)]
pub fn field_input(p: &FieldProps) -> Html {
    let ctx = use_ctx();
    let draft = use_state(|| None::<(String, String)>);
    let id = format!("f-{}-{}", p.path, p.field.name);
    let name = p.field.name.clone();
    let apply = {
        let (d, path, layer, name, draft) = (ctx.dispatch.clone(), p.path.clone(), p.layer.clone(), name.clone(), draft.clone());
        move |v: FieldValue, text: String| match set_field(&layer, &name, &v) {
            Ok(l) => {
                draft.set(None);
                d.dispatch(Action::EditLayer { path: path.clone(), field: name.clone(), layer: l });
            }
            Err(e) => draft.set(Some((text, e))),
        }
    };
    let testid = format!("field-{}", p.field.name);
    match &p.field.value {
        FieldValue::Bool(b) => {
            let onchange = Callback::from(move |e: Event| {
                let v = e.target_unchecked_into::<HtmlInputElement>().checked();
                apply(FieldValue::Bool(v), String::new())
            });
            html! {
                <span class="lf check">
                    <input {id} type="checkbox" checked={*b} {onchange} data-testid={testid} />
                    <label for={format!("f-{}-{}", p.path, name)}>{ &name }</label>
                    if let Some((_, e)) = &*draft { <span class="error" role="alert" data-testid="field-error">{ e }</span> }
                </span>
            }
        }
        FieldValue::Text(text) => {
            let oninput = Callback::from(move |e: InputEvent| {
                let v = e.target_unchecked_into::<HtmlInputElement>().value();
                apply(FieldValue::Text(v.clone()), v)
            });
            let value = draft.as_ref().map(|(t, _)| t.clone()).unwrap_or_else(|| text.clone());
            let size = value.chars().count().clamp(2, 14);
            html! {
                <span class={classes!("lf", draft.is_some().then_some("invalid"))}>
                    <label for={id.clone()}>{ &name }</label>
                    <input id={id.clone()} type="text" {value} size={size.to_string()} {oninput} data-testid={testid}
                        placeholder={p.field.optional.then_some("—")} aria-invalid={draft.is_some().to_string()}
                        spellcheck="false" autocomplete="off" />
                    if let Some((_, e)) = &*draft { <span class="error" role="alert" data-testid="field-error">{ e }</span> }
                </span>
            }
        }
    }
}

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
