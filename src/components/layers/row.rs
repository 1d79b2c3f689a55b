//! One layer's row: kind, path, output shape, share of saved activations, the row's actions
//! (reorder, duplicate, ungroup, delete, add shortcut/branch) and its hyper-parameters inline.

use super::field::FieldInput;
use crate::analysis::RowReport;
use crate::components::{percent, use_ctx};
use crate::fields::fields;
use crate::state::{Action, SpecRc};
use crate::tree::{self, can_ungroup, NodePath};
use vramcalc_core::spec::Layer;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct RowProps {
    /// The model, shared: the row reads its layer and name from it, so a batch change (which
    /// redraws every row's figures) copies and compares no layer (a ResNet block's body).
    pub spec: SpecRc,
    pub path: NodePath,
    pub depth: usize,
    pub collapsed: bool,
    pub selected: bool,
    pub report: Option<RowReport>,
    /// Saved bytes of the whole model (for the share).
    pub total: u64,
    pub first: bool,
    pub last: bool,
    pub error: Option<String>,
    /// Shows its hyper-parameters and actions; closed, the row is one line (kind, output shape,
    /// parameters, share of saved memory) and one Tab stop.
    pub open: bool,
    pub on_toggle: Callback<String>,
    /// Activation checkpointing is on (a block's `checkpoint` box means nothing without it).
    #[prop_or_default]
    pub checkpointing: bool,
}

#[function_component(LayerRow)]
pub fn layer_row(p: &RowProps) -> Html {
    let ctx = use_ctx();
    // the list's rows are the spec's (`tree::rows`), so the path names a layer
    let Some(layer) = tree::node(&p.spec, &p.path) else { return Html::default() };
    // the model's own name for the layer (`model.layers`, `features.0`), if it has one
    let name = vramcalc_core::layer_names::full_name(&p.spec, &p.path);
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
                    crate::dom::focus_row_later(l.node(j).to_string());
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
                    crate::dom::focus_row_later(l.node(j).to_string());
                }
            }
        })
    };
    let on_select = act(Action::ToggleSelected);
    let key = p.path.to_string();
    let kind = layer.kind();
    let block = layer.is_block();
    let extra = match layer {
        Layer::Residual { shortcut: None, .. } => Some((t.add_shortcut, "add-shortcut")),
        Layer::Parallel { .. } => Some((t.add_branch, "add-branch")),
        _ => None,
    };
    let extra = extra.map(|(label, id)| {
        let (d, spec, path) = (d.clone(), p.spec.clone(), path.clone());
        // the block with one more (empty) shortcut or branch, built on the click, not per render
        let onclick = Callback::from(move |_| {
            if let Some(layer) = tree::node(&spec, &path).and_then(with_new_branch) {
                d.dispatch(Action::EditLayer { path: path.clone(), field: "structure".into(), layer });
            }
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
    let label = name.as_deref().unwrap_or(&key);
    let handle_label = format!("{kind} {label}: {}", if p.open { t.collapse } else { t.expand });
    html! {
        <li class={classes!("layer-row", block.then_some("block"), p.error.is_some().then_some("has-error"), p.selected.then_some("selected"))}
            style={format!("--depth:{}", p.depth)} data-testid="layer-row" data-path={key.clone()} data-kind={kind} data-open={p.open.to_string()} {onkeydown}>
            <div class="row-head">
                if p.open || p.selected {
                    <input type="checkbox" checked={p.selected} onclick={on_select} aria-label={format!("{} {key}", t.select)} data-testid="layer-select" />
                }
                if block {
                    <button class="toggle" onclick={act(Action::ToggleCollapsed)} aria-expanded={(!p.collapsed).to_string()}
                        aria-label={if p.collapsed { t.expand } else { t.collapse }} data-testid="layer-toggle">
                        { if p.collapsed { "▸" } else { "▾" } }
                    </button>
                }
                <button class="row-handle" aria-label={handle_label} title={t.reorder_hint} aria-expanded={p.open.to_string()}
                    onclick={{ let (cb, k) = (p.on_toggle.clone(), key.clone()); Callback::from(move |_| cb.emit(k.clone())) }}>
                    <span class="kind">{ kind }</span>
                </button>
                <code class="path" title={name.is_some().then(|| key.clone())}>{ label }</code>
                if let Some(r) = &p.report {
                    <span class="shape" data-testid="layer-shape" title={t.output}>{ format!("→ {}", r.output_shape) }</span>
                    if r.params > 0 {
                        <span class="params muted">{ format!("{} {}", vramcalc_core::thousands(r.params), t.params) }</span>
                    }
                }
                { for share }
                if p.open { <span class="row-actions">
                    <button onclick={mover(-1)} disabled={p.first} aria-label={t.move_up} title={t.move_up} data-testid="layer-up">{ "↑" }</button>
                    <button onclick={mover(1)} disabled={p.last} aria-label={t.move_down} title={t.move_down} data-testid="layer-down">{ "↓" }</button>
                    <button onclick={act(Action::DuplicateLayer)} aria-label={t.duplicate} title={t.duplicate} data-testid="layer-duplicate">
                        <svg viewBox="0 0 16 16" width="13" height="13" aria-hidden="true" class="icon">
                            <rect x="1.5" y="4.5" width="9" height="10" rx="1.5" /><path d="M5.5 4.5V2.5a1 1 0 0 1 1-1h7a1 1 0 0 1 1 1v8a1 1 0 0 1-1 1h-3" />
                        </svg>
                    </button>
                    if block && can_ungroup(layer) {
                        <button onclick={act(Action::Ungroup)} aria-label={t.ungroup} title={t.ungroup} data-testid="layer-ungroup">{ "⇤" }</button>
                    }
                    { for extra }
                    <button class="danger" onclick={act(Action::DeleteLayer)} aria-label={t.delete} title={t.delete} data-testid="layer-delete">{ "✕" }</button>
                </span> }
            </div>
            if p.open {
                <div class="row-fields">
                    { for fields(layer).into_iter().map(|f| {
                        let key = f.name.clone();
                        html! { <FieldInput {key} path={p.path.clone()} layer={layer.clone()} field={f} checkpointing={p.checkpointing} /> }
                    }) }
                </div>
            }
            if let Some(e) = &p.error {
                <div class="error" role="alert" data-testid="layer-error">{ e }</div>
            }
        </li>
    }
}

/// A residual block with an empty shortcut, or a parallel block with one more empty branch
/// (the row's "add shortcut" and "add branch"); `None` for any other layer.
fn with_new_branch(layer: &Layer) -> Option<Layer> {
    match layer {
        Layer::Residual { body, shortcut: None, inplace } => Some(Layer::Residual { body: body.clone(), shortcut: Some(Vec::new()), inplace: *inplace }),
        Layer::Parallel { branches, join } => {
            let mut branches = branches.clone();
            branches.push(Vec::new());
            Some(Layer::Parallel { branches, join: *join })
        }
        _ => None,
    }
}
