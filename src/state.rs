//! The app's one state and its reducer (Yew's `function_todomvc` style).
//!
//! Free of web-sys so the reducer is tested with plain `cargo test -p vramcalc-web`. The estimate is
//! never stored here: components derive it from [`Model`] with `use_memo`.
//!
//! Every action is total: a path that no longer exists, an index out of range or a preset that
//! fails to build leaves the state unchanged instead of panicking.

use crate::i18n::Lang;
use crate::tree::{self, GroupKind, ListPath, NodePath};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;
use vramcalc_core::spec::{InputSpec, Layer, ModelSpec};
use vramcalc_core::hub::{HubLoaded, HubRef};
use vramcalc_core::{presets, ByteUnit, TrainConfig, GPUS};
use yew::Reducible;

/// How many edits undo remembers (the oldest is forgotten first).
pub const UNDO_LIMIT: usize = 100;
/// The preset a first visit opens.
pub const DEFAULT_PRESET: &str = "resnet50";

/// The GPU the estimate is compared against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuChoice {
    /// An id of [`vramcalc_core::GPUS`].
    Listed(String),
    /// A capacity the user typed, in bytes.
    Custom(u64),
}

impl GpuChoice {
    /// Capacity in bytes (an unknown id falls back to the first listed card's capacity).
    pub fn capacity(&self) -> u64 {
        match self {
            GpuChoice::Listed(id) => vramcalc_core::memory::device::gpu(id)
                .or(GPUS.first())
                .map(|g| g.bytes)
                .unwrap_or(0),
            GpuChoice::Custom(b) => *b,
        }
    }
}

impl Default for GpuChoice {
    fn default() -> Self {
        GpuChoice::Listed("rtx-4090".into())
    }
}

/// What undo/redo and persistence cover: the model, its training setup and the GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub spec: ModelSpec,
    /// The preset the spec started from, if any (kept through edits, for the title).
    #[serde(default)]
    pub preset: Option<String>,
    pub config: TrainConfig,
    #[serde(default)]
    pub gpu: GpuChoice,
    /// The Hugging Face model the spec was loaded from, while it is unedited: its share link then
    /// carries the id, not the spec. Any edit of the spec clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<HubRef>,
}

impl Model {
    /// A preset with the default training setup; `None` for an unknown id.
    pub fn preset(id: &str) -> Option<Model> {
        let spec = presets::build(id).ok()?;
        Some(Model { spec, preset: Some(id.to_string()), config: TrainConfig::default(), gpu: GpuChoice::default(), hub: None })
    }

    /// An image model with no layers yet.
    pub fn empty() -> Model {
        Model {
            spec: ModelSpec {
                version: vramcalc_core::spec::SPEC_VERSION,
                name: Some("custom".into()),
                input: InputSpec { shape: vec![3, 224, 224], dtype: Default::default(), vocab_size: None },
                layers: Vec::new(),
                loss: Default::default(),
            },
            preset: None,
            config: TrainConfig::default(),
            gpu: GpuChoice::default(),
            hub: None,
        }
    }
}

impl Default for Model {
    fn default() -> Self {
        Model::preset(DEFAULT_PRESET).unwrap_or_else(Model::empty)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    /// Follows `prefers-color-scheme`.
    #[default]
    Auto,
    Light,
    Dark,
}

impl Theme {
    pub const ALL: [Theme; 3] = [Theme::Auto, Theme::Light, Theme::Dark];
    pub fn name(self) -> &'static str {
        match self {
            Theme::Auto => "auto",
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }
}

/// Display preferences: persisted, not part of undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Prefs {
    #[serde(default)]
    pub lang: Lang,
    #[serde(default)]
    pub unit: ByteUnit,
    #[serde(default)]
    pub theme: Theme,
}

/// What LocalStorage keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub version: u32,
    pub model: Model,
    #[serde(default)]
    pub prefs: Prefs,
}

pub const SAVED_VERSION: u32 = 1;

/// Which kind of edit the last action was, so a slider drag or typing in one field is one undo step.
#[derive(Debug, Clone, PartialEq, Eq)]
enum EditKind {
    Batch,
    SeqLen,
    Field(NodePath, String),
    Capacity,
    Input,
}

/// Undo and redo as shared snapshots of the [`Model`]. Yew keeps the previous state while the
/// reducer builds the next from a clone, so each action copies these stacks: with `Rc`s that is
/// a copy of pointers, never of models.
#[derive(Debug, Clone, Default, PartialEq)]
struct History {
    /// Oldest first, at most [`UNDO_LIMIT`].
    undo: VecDeque<Rc<Model>>,
    /// The last undone last. Never longer than `undo` was, so it needs no bound of its own.
    redo: Vec<Rc<Model>>,
}

impl History {
    /// Remembers the model before a new edit; what was undone can no longer be redone.
    fn record(&mut self, before: Model) {
        self.push_undo(Rc::new(before));
        self.redo.clear();
    }

    fn push_undo(&mut self, model: Rc<Model>) {
        if self.undo.len() >= UNDO_LIMIT {
            self.undo.pop_front();
        }
        self.undo.push_back(model);
    }

    /// Puts the last snapshot in `current`, whose model becomes the next redo; false if none.
    /// The snapshot is cloned out of its `Rc`: the previous state's history still shares it.
    fn undo(&mut self, current: &mut Model) -> bool {
        let Some(prev) = self.undo.pop_back() else { return false };
        let undone = std::mem::replace(current, Model::clone(&prev));
        self.redo.push(Rc::new(undone));
        true
    }

    /// Puts the last undone snapshot back in `current`; false if none.
    fn redo(&mut self, current: &mut Model) -> bool {
        let Some(next) = self.redo.pop() else { return false };
        let before = std::mem::replace(current, Model::clone(&next));
        self.push_undo(Rc::new(before));
        true
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub model: Model,
    pub prefs: Prefs,
    /// Block rows shown folded (core-format paths such as `layers[4]`).
    pub collapsed: BTreeSet<NodePath>,
    /// Rows ticked for grouping.
    pub selected: Vec<NodePath>,
    history: History,
    last_edit: Option<EditKind>,
}

impl Default for State {
    fn default() -> Self {
        State::new(Model::default(), Prefs::default())
    }
}

pub enum Action {
    LoadPreset(String),
    StartEmpty,
    /// A spec from the paste box (already parsed and checked by [`crate::paste`]).
    LoadSpec(ModelSpec),
    /// A model loaded from the Hugging Face hub by id.
    LoadHub(Box<HubLoaded>),
    SetBatch(u64),
    SetSeqLen(Option<u64>),
    /// Any other training setting (precision, optimizer, what-ifs, …).
    SetConfig(TrainConfig),
    SetGpu(GpuChoice),
    SetInput(InputSpec),
    AddLayer { list: ListPath, index: Option<usize>, layer: Layer },
    /// A layer whose field `field` was edited (fields of one row coalesce in undo).
    EditLayer { path: NodePath, field: String, layer: Layer },
    MoveLayer { path: NodePath, delta: isize },
    DuplicateLayer(NodePath),
    DeleteLayer(NodePath),
    /// Wraps the selected sibling rows into a block.
    GroupSelected(GroupKind),
    Ungroup(NodePath),
    ToggleCollapsed(NodePath),
    ToggleSelected(NodePath),
    Undo,
    Redo,
    SetLang(Lang),
    SetUnit(ByteUnit),
    SetTheme(Theme),
    /// Back to the saved work (after opening a shared link): its model and preferences.
    Restore(Saved),
}

impl State {
    pub fn new(model: Model, prefs: Prefs) -> State {
        let collapsed = tree::block_paths(&model.spec.layers);
        State { model, prefs, collapsed, selected: Vec::new(), history: History::default(), last_edit: None }
    }

    /// Restores from LocalStorage's JSON; anything unreadable gives the default state.
    pub fn from_saved(saved: Option<Saved>) -> State {
        match saved {
            Some(s) if s.version == SAVED_VERSION => State::new(s.model, s.prefs),
            _ => State::default(),
        }
    }

    pub fn saved(&self) -> Saved {
        Saved { version: SAVED_VERSION, model: self.model.clone(), prefs: self.prefs }
    }

    pub fn can_undo(&self) -> bool {
        !self.history.undo.is_empty()
    }
    pub fn can_redo(&self) -> bool {
        !self.history.redo.is_empty()
    }

    /// The selected rows, if they are adjacent siblings (what grouping needs).
    pub fn groupable(&self) -> Option<(ListPath, usize, usize)> {
        tree::contiguous(&self.selected)
    }

    /// Replaces the model, recording the previous one for undo unless this edit continues the last.
    fn commit(&mut self, model: Model, kind: Option<EditKind>) {
        if model == self.model {
            self.last_edit = kind;
            return;
        }
        let continues = kind.is_some() && kind == self.last_edit;
        let before = std::mem::replace(&mut self.model, model);
        if continues {
            self.history.redo.clear();
        } else {
            self.history.record(before);
        }
        self.last_edit = kind;
    }

    /// Undo or redo; the next edit then starts a new undo step.
    fn travel(&mut self, step: fn(&mut History, &mut Model) -> bool) {
        if step(&mut self.history, &mut self.model) {
            self.selected.clear();
            self.last_edit = None;
        }
    }

    /// A new model from elsewhere (preset, paste): fresh folding and selection.
    fn replace_model(&mut self, model: Model) {
        self.collapsed = tree::block_paths(&model.spec.layers);
        self.selected.clear();
        self.commit(model, None);
    }

    /// A pasted or fetched spec, with the user's training setup and GPU.
    fn load(&mut self, spec: ModelSpec, hub: Option<HubRef>) {
        let config = TrainConfig { seq_len: None, ..self.model.config };
        self.replace_model(Model { spec, preset: None, config, gpu: self.model.gpu.clone(), hub });
    }

    fn edit_spec(&mut self, kind: Option<EditKind>, f: impl FnOnce(&mut ModelSpec) -> bool) {
        let mut model = self.model.clone();
        if f(&mut model.spec) {
            // An edited hub model is a custom model: its link carries the spec.
            model.hub = None;
            self.selected.clear();
            self.commit(model, kind);
        }
    }
}

impl Reducible for State {
    type Action = Action;

    fn reduce(self: Rc<Self>, action: Action) -> Rc<Self> {
        let mut s = (*self).clone();
        match action {
            Action::LoadPreset(id) => {
                if let Some(mut m) = Model::preset(&id) {
                    // Keep the user's training setup and GPU; the sequence length belongs to the model.
                    m.config = TrainConfig { seq_len: None, ..s.model.config };
                    m.gpu = s.model.gpu.clone();
                    s.replace_model(m);
                }
            }
            Action::StartEmpty => {
                let mut m = Model::empty();
                m.config = TrainConfig { seq_len: None, ..s.model.config };
                m.gpu = s.model.gpu.clone();
                s.replace_model(m);
            }
            Action::LoadSpec(spec) => s.load(spec, None),
            Action::LoadHub(loaded) => {
                let HubLoaded { hub, spec } = *loaded;
                s.load(spec, Some(hub))
            }
            Action::SetBatch(b) => {
                let mut m = s.model.clone();
                m.config.batch = b;
                s.commit(m, Some(EditKind::Batch));
            }
            Action::SetSeqLen(l) => {
                let mut m = s.model.clone();
                m.config.seq_len = l;
                s.commit(m, Some(EditKind::SeqLen));
            }
            Action::SetConfig(c) => {
                let mut m = s.model.clone();
                m.config = c;
                s.commit(m, None);
            }
            Action::SetGpu(g) => {
                let kind = matches!(g, GpuChoice::Custom(_)).then_some(EditKind::Capacity);
                let mut m = s.model.clone();
                m.gpu = g;
                s.commit(m, kind);
            }
            Action::SetInput(input) => s.edit_spec(Some(EditKind::Input), |spec| {
                spec.input = input;
                true
            }),
            Action::AddLayer { list, index, layer } => s.edit_spec(None, |spec| tree::insert(spec, &list, index, layer)),
            Action::EditLayer { path, field, layer } => {
                let kind = EditKind::Field(path.clone(), field);
                s.edit_spec(Some(kind), |spec| tree::replace(spec, &path, layer))
            }
            Action::MoveLayer { path, delta } => {
                let mut moved = None;
                s.edit_spec(None, |spec| {
                    moved = tree::move_node(spec, &path, delta);
                    moved.is_some()
                });
                if let Some(to) = moved {
                    // Keep the folding with the row that moved.
                    if s.collapsed.remove(&path) {
                        s.collapsed.insert(to);
                    }
                }
            }
            Action::DuplicateLayer(path) => s.edit_spec(None, |spec| tree::duplicate(spec, &path)),
            Action::DeleteLayer(path) => s.edit_spec(None, |spec| tree::remove(spec, &path).is_some()),
            Action::GroupSelected(kind) => {
                if let Some((list, start, end)) = s.groupable() {
                    s.edit_spec(None, |spec| tree::group(spec, &list, start, end, kind));
                }
            }
            Action::Ungroup(path) => s.edit_spec(None, |spec| tree::ungroup(spec, &path)),
            Action::ToggleCollapsed(path) => {
                if !s.collapsed.remove(&path) {
                    s.collapsed.insert(path);
                }
            }
            Action::ToggleSelected(path) => {
                if let Some(i) = s.selected.iter().position(|p| *p == path) {
                    s.selected.remove(i);
                } else {
                    s.selected.push(path);
                }
            }
            Action::Undo => s.travel(History::undo),
            Action::Redo => s.travel(History::redo),
            Action::SetLang(l) => s.prefs.lang = l,
            Action::SetUnit(u) => s.prefs.unit = u,
            Action::SetTheme(t) => s.prefs.theme = t,
            Action::Restore(saved) => {
                s.replace_model(saved.model);
                s.prefs = saved.prefs;
            }
        }
        Rc::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Slot;

    fn reduce(s: State, a: Action) -> State {
        (*Rc::new(s).reduce(a)).clone()
    }

    fn linear(i: u64, o: u64) -> Layer {
        serde_json::from_value(serde_json::json!({"kind": "linear", "in_features": i, "out_features": o})).unwrap()
    }

    /// A setting change that is its own undo step (`SetConfig` never coalesces).
    fn set_batch_step(s: State, batch: u64) -> State {
        let config = TrainConfig { batch, ..s.model.config };
        reduce(s, Action::SetConfig(config))
    }

    fn undo_batches(s: &State) -> Vec<u64> {
        s.history.undo.iter().map(|m| m.config.batch).collect()
    }

    #[test]
    fn undo_and_redo_walk_the_edits_in_order() {
        let mut s = State::default();
        for b in [1, 2, 3] {
            s = set_batch_step(s, b);
        }
        let mut seen = Vec::new();
        while s.can_undo() {
            s = reduce(s, Action::Undo);
            seen.push(s.model.config.batch);
        }
        assert_eq!(seen, [2, 1, 32], "undo goes back one edit at a time, newest first");
        let mut seen = Vec::new();
        while s.can_redo() {
            s = reduce(s, Action::Redo);
            seen.push(s.model.config.batch);
        }
        assert_eq!(seen, [1, 2, 3]);
        assert_eq!(undo_batches(&s), [32, 1, 2]);
    }

    #[test]
    fn the_undo_bound_forgets_the_oldest_edit() {
        let mut s = State::default();
        let extra = 5;
        for b in 1..=(UNDO_LIMIT + extra) as u64 {
            s = set_batch_step(s, b);
        }
        assert_eq!(s.history.undo.len(), UNDO_LIMIT);
        // The default batch (32) and the first edits are gone; the oldest left is edit `extra`.
        assert_eq!(s.history.undo.front().map(|m| m.config.batch), Some(extra as u64));
        let mut undos = 0;
        while s.can_undo() {
            s = reduce(s, Action::Undo);
            undos += 1;
        }
        assert_eq!((undos, s.model.config.batch), (UNDO_LIMIT, extra as u64));
        // Redoing everything stays within the bound.
        while s.can_redo() {
            s = reduce(s, Action::Redo);
        }
        assert_eq!((s.history.undo.len(), s.model.config.batch), (UNDO_LIMIT, (UNDO_LIMIT + extra) as u64));
    }

    #[test]
    fn a_new_edit_clears_redo() {
        let s = set_batch_step(set_batch_step(State::default(), 1), 2);
        let s = reduce(reduce(s, Action::Undo), Action::Undo);
        assert_eq!(s.history.redo.len(), 2);
        let s = reduce(s, Action::SetBatch(7));
        assert!(!s.can_redo());
        assert_eq!(undo_batches(&s), [32]);
        // A change that is no change is not an edit: redo survives it.
        let s = reduce(s, Action::Undo);
        let s = reduce(s, Action::SetBatch(32));
        assert!(s.can_redo());
    }

    #[test]
    fn snapshots_are_shared_between_states_not_cloned() {
        let mut s = State::default();
        for b in [1, 2, 3] {
            s = set_batch_step(s, b);
        }
        let before = Rc::new(s);
        let shared = |a: &State, b: &State| a.history.undo.iter().zip(&b.history.undo).all(|(x, y)| Rc::ptr_eq(x, y));
        // An action that is not an edit copies the stacks' pointers.
        let after = before.clone().reduce(Action::SetLang(Lang::Zh));
        assert_eq!(after.history.undo.len(), 3);
        assert!(shared(&before, &after));
        // So does an edit: the old snapshots stay the same allocations, one is added.
        let edited = after.clone().reduce(Action::SetBatch(9));
        assert_eq!(edited.history.undo.len(), 4);
        assert!(shared(&after, &edited));
        // Undo and redo keep the rest of both stacks shared too.
        let undone = edited.clone().reduce(Action::Undo);
        assert!(shared(&edited, &undone));
        let later = undone.clone().reduce(Action::SetLang(Lang::En));
        assert!(Rc::ptr_eq(&undone.history.redo[0], &later.history.redo[0]));
        let redone = later.clone().reduce(Action::Redo);
        assert_eq!((redone.model.config.batch, redone.history.undo.len()), (9, 4));
        assert!(shared(&later, &redone));
    }

    #[test]
    fn default_state_is_a_preset() {
        let s = State::default();
        assert_eq!(s.model.preset.as_deref(), Some(DEFAULT_PRESET));
        assert!(!s.model.spec.layers.is_empty());
        assert!(!s.can_undo());
    }

    #[test]
    fn batch_edits_coalesce_and_undo_redo() {
        let s = State::default();
        let s = reduce(s, Action::SetBatch(10));
        let s = reduce(s, Action::SetBatch(100));
        assert_eq!(s.model.config.batch, 100);
        let s = reduce(s, Action::Undo);
        assert_eq!(s.model.config.batch, 32, "a run of batch edits is one undo step");
        assert!(s.can_redo());
        let s = reduce(s, Action::Redo);
        assert_eq!(s.model.config.batch, 100);
        let s = reduce(s, Action::Undo);
        let s = reduce(s, Action::LoadPreset("vgg16".into()));
        assert!(!s.can_redo(), "a new edit clears redo");
        assert_eq!(s.model.preset.as_deref(), Some("vgg16"));
    }

    #[test]
    fn preset_keeps_settings_and_unknown_preset_is_ignored() {
        let s = reduce(State::default(), Action::SetBatch(7));
        let s = reduce(s, Action::LoadPreset("vgg16".into()));
        assert_eq!(s.model.config.batch, 7);
        let before = s.model.clone();
        let s = reduce(s, Action::LoadPreset("no-such-model".into()));
        assert_eq!(s.model, before);
    }

    #[test]
    fn add_move_duplicate_delete_group() {
        let top = ListPath::top();
        let mut s = reduce(State::default(), Action::StartEmpty);
        s.model.spec.input.shape = vec![16];
        s = reduce(s, Action::AddLayer { list: top.clone(), index: None, layer: linear(16, 8) });
        s = reduce(s, Action::AddLayer { list: top.clone(), index: None, layer: linear(8, 4) });
        assert_eq!(s.model.spec.layers.len(), 2);
        let first = NodePath::top(0);
        s = reduce(s, Action::MoveLayer { path: first.clone(), delta: 1 });
        assert_eq!(s.model.spec.layers[1], linear(16, 8));
        // moving past the end is a no-op
        let before = s.model.clone();
        s = reduce(s, Action::MoveLayer { path: NodePath::top(1), delta: 1 });
        assert_eq!(s.model, before);
        s = reduce(s, Action::DuplicateLayer(first.clone()));
        assert_eq!(s.model.spec.layers.len(), 3);
        assert_eq!(s.model.spec.layers[0], s.model.spec.layers[1]);
        s = reduce(s, Action::DeleteLayer(first.clone()));
        assert_eq!(s.model.spec.layers.len(), 2);
        s = reduce(s, Action::ToggleSelected(NodePath::top(0)));
        s = reduce(s, Action::ToggleSelected(NodePath::top(1)));
        s = reduce(s, Action::GroupSelected(GroupKind::Residual));
        assert_eq!(s.model.spec.layers.len(), 1);
        assert!(matches!(&s.model.spec.layers[0], Layer::Residual { body, .. } if body.len() == 2));
        assert!(s.selected.is_empty());
        let inner = NodePath::top(0).child(Slot::Body, 1);
        s = reduce(s, Action::DeleteLayer(inner));
        assert!(matches!(&s.model.spec.layers[0], Layer::Residual { body, .. } if body.len() == 1));
        s = reduce(s, Action::Ungroup(NodePath::top(0)));
        assert_eq!(s.model.spec.layers.len(), 1);
        assert_eq!(s.model.spec.layers[0].kind(), "linear");
    }

    #[test]
    fn actions_on_missing_paths_do_nothing() {
        let s = State::default();
        let bad = NodePath::top(999).child(Slot::Body, 3);
        for a in [
            Action::DeleteLayer(bad.clone()),
            Action::DuplicateLayer(bad.clone()),
            Action::MoveLayer { path: bad.clone(), delta: -1 },
            Action::Ungroup(bad.clone()),
            Action::EditLayer { path: bad.clone(), field: "x".into(), layer: linear(1, 1) },
            Action::GroupSelected(GroupKind::Repeat),
        ] {
            let after = reduce(s.clone(), a);
            assert_eq!(after.model, s.model);
        }
    }

    #[test]
    fn saved_round_trips_through_json() {
        let s = reduce(State::default(), Action::SetBatch(3));
        let s = reduce(s, Action::SetLang(Lang::Zh));
        let json = serde_json::to_string(&s.saved()).unwrap();
        let back: Saved = serde_json::from_str(&json).unwrap();
        let r = State::from_saved(Some(back));
        assert_eq!(r.model, s.model);
        assert_eq!(r.prefs.lang, Lang::Zh);
        assert_eq!(State::from_saved(None).model, State::default().model);
    }
}
