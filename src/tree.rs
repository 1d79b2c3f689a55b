//! Addressing layers inside a spec's tree of blocks, and the structural edits the layer editor
//! makes (insert, move, duplicate, remove, group, ungroup). Every function returns `None`/`false`
//! for a path that does not exist: the UI can send stale paths and nothing may panic.
//!
//! Paths print in the core's format (`layers[3].body[1]`, `layers[2].branches[0][1]`) so error
//! messages and per-layer reports line up with editor rows.

use std::collections::BTreeSet;
use vramcalc_core::spec::{Layer, ModelSpec};
/// The core's layer path; the editor calls it a node path.
pub use vramcalc_core::path::{LayerPath as NodePath, ListPath, Slot, Step};

/// The block a group of rows becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    Residual,
    Repeat,
    Sequential,
}

impl GroupKind {
    pub const ALL: [GroupKind; 3] = [GroupKind::Residual, GroupKind::Repeat, GroupKind::Sequential];
    pub fn name(self) -> &'static str {
        match self {
            GroupKind::Residual => "residual",
            GroupKind::Repeat => "repeat",
            GroupKind::Sequential => "sequential",
        }
    }
}

/// The editor row of a resolved layer's path: every repetition of a `repeat` body maps to the
/// one row it came from (`layers[2].body#5[1]` → `layers[2].body[1]`).
pub fn normalize_core_path(path: &str) -> String {
    match path.parse::<NodePath>() {
        Ok(p) => p.without_repetitions().to_string(),
        Err(_) => path.to_string(),
    }
}

fn child_list_mut<'a>(layer: &'a mut Layer, slot: &Slot) -> Option<&'a mut Vec<Layer>> {
    match (layer, slot) {
        (Layer::Sequential { layers, .. }, Slot::Layers) => Some(layers),
        (Layer::Residual { body, .. }, Slot::Body) => Some(body),
        (Layer::Residual { shortcut: Some(s), .. }, Slot::Shortcut) => Some(s),
        (Layer::Repeat { body, .. }, Slot::Body) => Some(body),
        (Layer::Parallel { branches, .. }, Slot::Branch(b)) => branches.get_mut(*b),
        _ => None,
    }
}

fn child_list<'a>(layer: &'a Layer, slot: &Slot) -> Option<&'a Vec<Layer>> {
    layer.children().into_iter().find(|(s, _)| s == slot).map(|(_, l)| l)
}

pub fn node<'a>(spec: &'a ModelSpec, path: &NodePath) -> Option<&'a Layer> {
    let (first, rest) = path.0.split_first()?;
    if first.slot != Slot::Layers {
        return None;
    }
    let mut cur = spec.layers.get(first.index)?;
    for s in rest {
        cur = child_list(cur, &s.slot)?.get(s.index)?;
    }
    Some(cur)
}

pub fn node_mut<'a>(spec: &'a mut ModelSpec, path: &NodePath) -> Option<&'a mut Layer> {
    let (first, rest) = path.0.split_first()?;
    if first.slot != Slot::Layers {
        return None;
    }
    let mut cur = spec.layers.get_mut(first.index)?;
    for s in rest {
        cur = child_list_mut(cur, &s.slot)?.get_mut(s.index)?;
    }
    Some(cur)
}

pub fn list<'a>(spec: &'a ModelSpec, list: &ListPath) -> Option<&'a Vec<Layer>> {
    if list.parent.is_empty() {
        return (list.slot == Slot::Layers).then_some(&spec.layers);
    }
    child_list(node(spec, &NodePath(list.parent.clone()))?, &list.slot)
}

pub fn list_mut<'a>(spec: &'a mut ModelSpec, list: &ListPath) -> Option<&'a mut Vec<Layer>> {
    if list.parent.is_empty() {
        return (list.slot == Slot::Layers).then_some(&mut spec.layers);
    }
    let parent = node_mut(spec, &NodePath(list.parent.clone()))?;
    child_list_mut(parent, &list.slot)
}

/// Inserts at `index` (clamped), or at the end.
pub fn insert(spec: &mut ModelSpec, list: &ListPath, index: Option<usize>, layer: Layer) -> bool {
    let Some(v) = list_mut(spec, list) else { return false };
    let at = index.unwrap_or(v.len()).min(v.len());
    v.insert(at, layer);
    restructured(spec);
    true
}

/// After a structural edit the model's own layer names (`ModelSpec::names`, by path) no longer
/// describe it: rows show their paths from then on, never a name on another layer. (Undo brings
/// them back.)
fn restructured(spec: &mut ModelSpec) {
    spec.names.clear();
}

pub fn replace(spec: &mut ModelSpec, path: &NodePath, layer: Layer) -> bool {
    match node_mut(spec, path) {
        Some(n) => {
            *n = layer;
            true
        }
        None => false,
    }
}

pub fn remove(spec: &mut ModelSpec, path: &NodePath) -> Option<Layer> {
    let (list, i) = (path.list()?, path.index()?);
    let v = list_mut(spec, &list)?;
    let removed = (i < v.len()).then(|| v.remove(i))?;
    restructured(spec);
    Some(removed)
}

/// Moves a node by `delta` places within its list; returns its new path.
pub fn move_node(spec: &mut ModelSpec, path: &NodePath, delta: isize) -> Option<NodePath> {
    let (list, i) = (path.list()?, path.index()?);
    let v = list_mut(spec, &list)?;
    let j = i.checked_add_signed(delta)?;
    if i >= v.len() || j >= v.len() || i == j {
        return None;
    }
    let item = v.remove(i);
    v.insert(j, item);
    restructured(spec);
    Some(list.node(j))
}

pub fn duplicate(spec: &mut ModelSpec, path: &NodePath) -> bool {
    let Some(layer) = node(spec, path).cloned() else { return false };
    let (Some(list), Some(i)) = (path.list(), path.index()) else { return false };
    insert(spec, &list, Some(i + 1), layer)
}

/// Wraps `list[start..=end]` into a new block.
pub fn group(spec: &mut ModelSpec, list: &ListPath, start: usize, end: usize, kind: GroupKind) -> bool {
    let Some(v) = list_mut(spec, list) else { return false };
    if start > end || end >= v.len() {
        return false;
    }
    let body: Vec<Layer> = v.drain(start..=end).collect();
    let block = match kind {
        GroupKind::Residual => Layer::Residual { body, shortcut: None, inplace: false },
        GroupKind::Repeat => Layer::Repeat { times: 2, body },
        GroupKind::Sequential => Layer::Sequential { layers: body, checkpoint: false },
    };
    v.insert(start, block);
    restructured(spec);
    true
}

/// Replaces a block by its body. Only where nothing is lost: a sequential, a residual without a
/// shortcut, a repeat, or a parallel with one branch.
pub fn ungroup(spec: &mut ModelSpec, path: &NodePath) -> bool {
    let Some(layer) = node(spec, path) else { return false };
    if !can_ungroup(layer) {
        return false;
    }
    let Some(layer) = remove(spec, path) else { return false };
    let body = match layer {
        Layer::Sequential { layers, .. } => layers,
        Layer::Residual { body, .. } | Layer::Repeat { body, .. } => body,
        Layer::Parallel { mut branches, .. } => branches.pop().unwrap_or_default(),
        other => vec![other],
    };
    let (Some(list), Some(i)) = (path.list(), path.index()) else { return false };
    let Some(v) = list_mut(spec, &list) else { return false };
    let at = i.min(v.len());
    v.splice(at..at, body);
    restructured(spec);
    true
}

pub fn can_ungroup(layer: &Layer) -> bool {
    match layer {
        Layer::Sequential { .. } | Layer::Repeat { .. } => true,
        Layer::Residual { shortcut, .. } => shortcut.is_none(),
        Layer::Parallel { branches, .. } => branches.len() == 1,
        _ => false,
    }
}

/// The selected rows as `(list, first, last)` if they are adjacent siblings.
pub fn contiguous(selected: &[NodePath]) -> Option<(ListPath, usize, usize)> {
    let first = selected.first()?;
    let list = first.list()?;
    let mut idx = Vec::with_capacity(selected.len());
    for p in selected {
        if p.list()? != list {
            return None;
        }
        idx.push(p.index()?);
    }
    // Adjacent and distinct: exactly `len` different indices from min to min + len - 1 (no sort:
    // each sort instance adds kilobytes of wasm).
    let lo = *idx.iter().min()?;
    let mut seen = vec![false; idx.len()];
    for &i in &idx {
        match seen.get_mut(i - lo) {
            Some(s) if !*s => *s = true,
            _ => return None,
        }
    }
    Some((list, lo, lo + idx.len() - 1))
}

/// Paths of every block in `layers` (to fold a freshly loaded model).
pub fn block_paths(layers: &[Layer]) -> BTreeSet<NodePath> {
    fn walk(layers: &[Layer], list: &ListPath, out: &mut BTreeSet<NodePath>) {
        for (i, l) in layers.iter().enumerate() {
            if l.is_block() {
                let p = list.node(i);
                for (slot, children) in l.children() {
                    walk(children, &ListPath { parent: p.0.clone(), slot }, out);
                }
                out.insert(p);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(layers, &ListPath::top(), &mut out);
    out
}

/// One line of the layer editor.
#[derive(Debug, Clone, PartialEq)]
pub enum Row<'a> {
    Node { path: NodePath, layer: &'a Layer, depth: usize },
    /// The header of a block's child list (where "add layer" puts a layer into that block).
    List { list: ListPath, depth: usize, len: usize },
}

/// The editor's rows: nodes in order, with the children of blocks that are not folded.
pub fn rows<'a>(spec: &'a ModelSpec, collapsed: &BTreeSet<NodePath>) -> Vec<Row<'a>> {
    fn walk<'a>(layers: &'a [Layer], list: &ListPath, depth: usize, collapsed: &BTreeSet<NodePath>, out: &mut Vec<Row<'a>>) {
        for (i, l) in layers.iter().enumerate() {
            let p = list.node(i);
            out.push(Row::Node { path: p.clone(), layer: l, depth });
            if l.is_block() && !collapsed.contains(&p) {
                for (slot, children) in l.children() {
                    let cl = ListPath { parent: p.0.clone(), slot };
                    out.push(Row::List { list: cl.clone(), depth: depth + 1, len: children.len() });
                    walk(children, &cl, depth + 1, collapsed, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&spec.layers, &ListPath::top(), 0, collapsed, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::presets;

    #[test]
    fn repetitions_map_to_their_body_row() {
        assert_eq!(normalize_core_path("layers[2].body#11[1]"), "layers[2].body[1]");
        assert_eq!(normalize_core_path("layers[2].branches[0][1]"), "layers[2].branches[0][1]");
    }

    #[test]
    fn every_resolved_row_of_a_preset_maps_to_an_editor_node() {
        for id in ["resnet50", "bert-base", "vgg16"] {
            let spec = presets::build(id).unwrap();
            let est = vramcalc_core::estimate(&spec, &Default::default()).unwrap();
            let all: Vec<String> = rows(&spec, &BTreeSet::new())
                .into_iter()
                .filter_map(|r| match r {
                    Row::Node { path, .. } => Some(path.to_string()),
                    _ => None,
                })
                .collect();
            for l in &est.layers {
                let key = normalize_core_path(&l.info.path);
                assert!(all.contains(&key), "{id}: {key} has no editor row");
            }
        }
    }

    /// The model's own names (VGG-16's `features.<i>`) survive a field edit; a structural edit
    /// drops them, so a name never shows on another layer.
    #[test]
    fn a_structural_edit_drops_the_models_names() {
        use vramcalc_core::layer_names::full_name;
        let vgg = vramcalc_core::presets::build("vgg16").unwrap();
        let named = |s: &ModelSpec| full_name(s, &NodePath::top(2));
        assert_eq!(named(&vgg).as_deref(), Some("features.2"));
        let mut s = vgg.clone();
        assert!(replace(&mut s, &NodePath::top(1), Layer::example("gelu").unwrap()));
        assert_eq!(named(&s).as_deref(), Some("features.2"), "a field edit keeps them");
        let edits: [fn(&mut ModelSpec) -> bool; 6] = [
            |s| insert(s, &ListPath::top(), Some(0), Layer::example("relu").unwrap()),
            |s| remove(s, &NodePath::top(0)).is_some(),
            |s| move_node(s, &NodePath::top(0), 1).is_some(),
            |s| duplicate(s, &NodePath::top(0)),
            |s| group(s, &ListPath::top(), 0, 1, GroupKind::Sequential),
            |s| group(s, &ListPath::top(), 0, 1, GroupKind::Sequential) && ungroup(s, &NodePath::top(0)),
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut s = vgg.clone();
            assert!(edit(&mut s), "edit {i}");
            assert!(s.names.is_empty() && named(&s).is_none(), "edit {i}");
        }
    }

    #[test]
    fn folding_hides_children() {
        let spec = presets::build("resnet18").unwrap();
        let folded = block_paths(&spec.layers);
        let shown = rows(&spec, &folded);
        assert_eq!(shown.len(), spec.layers.len());
        assert!(rows(&spec, &BTreeSet::new()).len() > shown.len());
    }

    #[test]
    fn contiguous_selection() {
        let a = NodePath::top(1);
        let b = NodePath::top(2);
        let c = NodePath::top(4);
        assert_eq!(contiguous(&[b.clone(), a.clone()]), Some((ListPath::top(), 1, 2)));
        assert_eq!(contiguous(&[a.clone(), c]), None);
        assert_eq!(contiguous(&[a.clone(), NodePath::top(1).child(Slot::Body, 0)]), None);
        assert_eq!(contiguous(&[]), None);
    }
}
