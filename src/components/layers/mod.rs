//! The layer editor: one row per layer with its hyper-parameters inline, output shape and share of
//! saved activations; add (searchable menu), reorder (buttons, Alt+↑/↓), duplicate, delete,
//! group into blocks, fold blocks. Core errors show at the row they name.
//!
//! One component per file: [`Layers`] (the list, here), [`LayerRow`], [`FieldInput`], [`AddLayerMenu`].

mod add_menu;
mod field;
mod row;

pub use add_menu::{AddLayerMenu, AddProps};
pub use field::{FieldInput, FieldProps};
pub use row::{LayerRow, RowProps};

use crate::analysis::{input_shape_for, RowReport};
use crate::components::{use_ctx, Shared};
use crate::state::{Action, SpecRc};
use crate::tree::{self, GroupKind, ListPath, NodePath, Row, Slot};
use std::collections::{BTreeSet, HashMap};
use vramcalc_core::{Error, TrainConfig};
use yew::prelude::*;

/// Models with at most this many rows open with every row's fields shown.
const OPEN_UP_TO: usize = 12;

/// Per-row figures by row path, and the saved bytes of the whole model.
pub type RowMap = (HashMap<String, RowReport>, u64);

#[derive(Properties, PartialEq, Clone)]
pub struct LayersProps {
    pub spec: SpecRc,
    pub config: TrainConfig,
    pub collapsed: BTreeSet<NodePath>,
    pub selected: Vec<NodePath>,
    /// Per-row figures from the last good estimate.
    #[prop_or_default]
    pub rows: Option<Shared<RowMap>>,
    #[prop_or_default]
    pub error: Option<Error>,
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
    // Which rows are open: a small model's rows by default, a large one's closed (one line and
    // one Tab stop each); a click on a row's name toggles it, "collapse all" closes every row and
    // folds every block. A row with an error is always open.
    // `(every row's state, the rows toggled from it)`; `None`: open if the model is small.
    let open = use_state(|| (None::<bool>, Vec::<String>::new()));
    let nodes = rows.iter().filter(|r| matches!(r, Row::Node { .. })).count();
    let default_open = open.0.unwrap_or(nodes <= OPEN_UP_TO);
    let on_toggle = {
        let open = open.clone();
        Callback::from(move |key: String| {
            let (mode, mut toggled) = (*open).clone();
            match toggled.iter().position(|k| *k == key) {
                Some(i) => drop(toggled.swap_remove(i)),
                None => toggled.push(key),
            }
            open.set((mode, toggled));
        })
    };
    let collapse_all = {
        let (open, d, spec, collapsed) = (open.clone(), d.clone(), p.spec.clone(), p.collapsed.clone());
        Callback::from(move |_| {
            open.set((Some(false), Vec::new()));
            for b in tree::block_paths(&spec.layers).into_iter().filter(|b| !collapsed.contains(b)) {
                d.dispatch(Action::ToggleCollapsed(b));
            }
        })
    };
    let shape_for = |list: &ListPath, index: Option<usize>| input_shape_for(&p.spec, &p.config, list, index, map);

    let items = rows.into_iter().map(|row| match row {
        Row::Node { path, depth, .. } => {
            let key = path.to_string();
            let (list, index) = (path.list(), path.index().unwrap_or(0));
            let len = list.as_ref().and_then(|l| tree::list(&p.spec, l)).map(|v| v.len()).unwrap_or(0);
            let collapsed = p.collapsed.contains(&path);
            let error = err.as_ref().and_then(|(ep, msg)| {
                let inside = collapsed && ep.starts_with(&format!("{key}."));
                (*ep == key || inside).then(|| msg.clone())
            });
            html! {
                <LayerRow key={key.clone()} spec={p.spec.clone()} path={path.clone()} {depth} {collapsed}
                    selected={p.selected.contains(&path)} report={map.get(&key).cloned()} {total}
                    first={index == 0} last={index + 1 >= len} open={error.is_some() || default_open != open.1.contains(&key)}
                    {error} on_toggle={on_toggle.clone()} checkpointing={p.config.checkpointing} />
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
            <p class="muted small">{ t.group_hint }{ " " }{ t.reorder_hint }{ " " }
                <button class="link" onclick={collapse_all} data-testid="collapse-all">{ t.collapse_all }</button></p>
            if p.spec.layers.is_empty() {
                <p class="empty" data-testid="no-layers">{ t.no_layers }</p>
            }
            <ol class="layer-list">{ for items }</ol>
            <AddLayerMenu list={top.clone()} shape={shape_for(&top, None)} testid="add-layer" />
        </div>
    }
}
