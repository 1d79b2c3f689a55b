//! The app's one state and its reducer (Yew's `function_todomvc` style).
//!
//! Free of web-sys so the reducer is tested with plain `cargo test -p vramcalc-web`. The estimate is
//! never stored here: components derive it from [`Model`] with `use_memo`.
//!
//! Every action is total: a path that no longer exists or an index out of range leaves the state
//! unchanged instead of panicking. Presets are built before their action is dispatched
//! ([`Model::load_preset`]).

use crate::i18n::Lang;
use crate::import::checkpoint::HubCheckpoint;
pub use crate::prefs::{Prefs, Theme};
use crate::tree::{self, GroupKind, ListPath, NodePath};
pub use mode::{Engine, Length, SetupMode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use vramcalc_core::distributed::DistConfig;
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;
use vramcalc_core::spec::{InputSpec, Layer, ModelSpec};
use vramcalc_core::{presets, ByteUnit, TrainConfig, GPUS};
use yew::Reducible;

// The embed card's own small state (issue 23, load times).
pub mod card;
// The llama.cpp panel's state and the workload switch (issue 24).
pub mod local;
// The image/video pipeline panel's state (issue 27).
pub mod pipeline;
// The model's spec, shared between copies of the state.
mod spec;
pub use spec::SpecRc;

/// How many edits undo remembers (the oldest is forgotten first).
pub const UNDO_LIMIT: usize = 100;
/// The preset a first visit opens.
pub const DEFAULT_PRESET: &str = "resnet50";
/// The sequence length a Hugging Face import starts at (its context if shorter): a common
/// fine-tuning length, where the model's full context (2048 for TinyLlama) would start a first
/// look at a batch of 32 in the hundreds of GB. Said next to the result ([`State::assumed_seq`]).
pub const IMPORT_SEQ_LEN: u64 = 512;

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

/// What undo/redo and persistence cover: the model, its training setup (fine-tuning, generation
/// and weight format included: the core's own `TrainConfig`), the multi-GPU job and the GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "SavedModel")]
pub struct Model {
    pub spec: SpecRc,
    /// The preset the spec started from, if any (kept through edits, for the title).
    #[serde(default)]
    pub preset: Option<String>,
    /// Whether `spec` is still exactly `preset`'s (no edit since it was loaded): such a model's
    /// link names the preset (`p=`) instead of carrying the spec. Cleared by every spec edit, so
    /// the preset need not be rebuilt to compare. States saved before this field read `false`
    /// (their links carry the spec), except the default preset's ([`State::from_saved`]).
    #[serde(default)]
    pub unedited: bool,
    /// The Hugging Face model the spec was read from (`id` or `id@revision`): while `unedited`,
    /// its link names it (`h=`) and reopens by fetching the config again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    pub config: TrainConfig,
    #[serde(default)]
    pub gpu: GpuChoice,
    /// The multi-GPU job (default: one GPU), as the CLI's `--gpus`, `--strategy`, … set it.
    #[serde(default, skip_serializing_if = "DistConfig::is_default")]
    pub dist: DistConfig,
    /// Who runs the setup (vLLM serves; PyTorch's step otherwise): with `config`, the setup's
    /// mode ([`Model::mode`]).
    #[serde(default, skip_serializing_if = "Engine::is_default")]
    pub engine: Engine,
    /// A peak the user measured on their own GPU (bytes), shown beside the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_peak: Option<u64>,
    /// The image/video pipeline panel's settings (issue 27), in undo and saved work.
    #[serde(default, skip_serializing_if = "pipeline::PipelineState::is_default")]
    pub pipeline: pipeline::PipelineState,
}

/// A [`Model`] as LocalStorage may hold it: work saved before the settings were typed kept the
/// LLM settings beside the config as the core's serde wrote them (`"llm": {"finetune",
/// "generate", "weights", "dist"}`); they are read into the config and the job.
#[derive(Deserialize)]
struct SavedModel {
    spec: SpecRc,
    #[serde(default)]
    preset: Option<String>,
    #[serde(default)]
    unedited: bool,
    #[serde(default)]
    hub: Option<String>,
    config: Value,
    #[serde(default)]
    gpu: GpuChoice,
    #[serde(default)]
    dist: Option<DistConfig>,
    #[serde(default)]
    llm: Map<String, Value>,
    #[serde(default)]
    engine: Engine,
    #[serde(default)]
    measured_peak: Option<u64>,
    #[serde(default)]
    pipeline: pipeline::PipelineState,
}

impl From<SavedModel> for Model {
    fn from(s: SavedModel) -> Model {
        let mut config = s.config;
        let mut dist = s.dist;
        for (key, value) in s.llm {
            if key == "dist" {
                dist = dist.or_else(|| serde_json::from_value(value).ok());
            } else if let Value::Object(c) = &mut config {
                c.entry(key).or_insert(value);
            }
        }
        // an unreadable setup is the default one (as an unreadable save is the default state)
        let config = serde_json::from_value(config).unwrap_or_default();
        Model { spec: s.spec, preset: s.preset, unedited: s.unedited, hub: s.hub, config, gpu: s.gpu, dist: dist.unwrap_or_default(), engine: s.engine, measured_peak: s.measured_peak, pipeline: s.pipeline }
    }
}

impl Model {
    /// Preset `id`'s model (built elsewhere) with the default training setup.
    pub fn of_preset(id: &str, spec: ModelSpec) -> Model {
        Model { spec: spec.into(), preset: Some(id.to_string()), unedited: true, hub: None, config: TrainConfig::default(), gpu: GpuChoice::default(), dist: DistConfig::default(), engine: Engine::default(), measured_peak: None, pipeline: Default::default() }
    }

    /// The setup's mode, read from the settings and the engine.
    pub fn mode(&self) -> SetupMode {
        SetupMode::of(&self.config, self.engine)
    }

    /// A preset with the default training setup (a published model's from its `config.json`,
    /// imported at compile time: `crate::presets::preset`, so the app links no importer for
    /// it). The error names an unknown id.
    pub async fn load_preset(id: &str) -> Result<Model, String> {
        if presets::info(id).is_none() {
            return Err(format!("unknown preset `{id}`"));
        }
        Ok(Model::of_preset(id, crate::presets::preset(id).map_err(|e| e.to_string())?))
    }

    /// The `torch_dtype` of the published config the model is (a preset from `config.json`).
    pub fn torch_dtype(&self) -> Option<String> {
        let text = presets::hf_config(self.preset.as_deref()?)?;
        let v: Value = serde_json::from_str(text).ok()?;
        v["torch_dtype"].as_str().or(v["dtype"].as_str()).map(String::from)
    }

    /// A preset built synchronously (tests only: the app loads presets with [`Model::load_preset`]).
    #[cfg(test)]
    pub fn preset(id: &str) -> Option<Model> {
        Some(Model::of_preset(id, crate::presets::preset(id).ok()?))
    }

    /// An image model with no layers yet.
    pub fn empty() -> Model {
        Model {
            spec: SpecRc::new(ModelSpec {
                version: vramcalc_core::spec::SPEC_VERSION,
                name: Some("custom".into()),
                input: InputSpec { shape: vec![3, 224, 224], dtype: Default::default(), vocab_size: None },
                layers: Vec::new(),
                loss: Default::default(),
                names: Default::default(),
                unquantised: None,
            }),
            preset: None,
            unedited: false,
            hub: None,
            config: TrainConfig::default(),
            gpu: GpuChoice::default(),
            dist: DistConfig::default(),
            engine: Engine::default(),
            measured_peak: None,
            pipeline: Default::default(),
        }
    }
}

/// The default preset's spec: its constructor is called directly (not through
/// `presets::build`, which would link every preset into the main bundle).
fn default_spec() -> Option<ModelSpec> {
    presets::resnet(DEFAULT_PRESET)
}

impl Default for Model {
    fn default() -> Self {
        default_spec().map_or_else(Model::empty, |spec| Model::of_preset(DEFAULT_PRESET, spec))
    }
}

/// What LocalStorage keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub version: u32,
    pub model: Model,
    #[serde(default)]
    pub prefs: Prefs,
    /// The llama.cpp panel (issue 24): its link and whether it was shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<local::SavedLocal>,
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
    /// The pipeline panel's settings, by which changed.
    Pipeline(Vec<&'static str>),
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
    /// `(sequence length, context)` a Hugging Face import assumed, until the user sets one.
    pub assumed_seq: Option<(u64, u64)>,
    /// Which workload is shown (the minimal switch of issues 24 and 27) and the llama.cpp
    /// panel's state: not saved, not in undo (the pipeline panel's is the model's).
    pub workload: local::Workload,
    pub local: local::LocalState,
    /// The stored checkpoint of the hub model last loaded (read after its config): not saved,
    /// not in undo; shown only while that model is the one on screen ([`State::checkpoint`]).
    pub hub_checkpoint: Option<HubCheckpoint>,
    history: History,
    last_edit: Option<EditKind>,
}

impl Default for State {
    fn default() -> Self {
        State::new(Model::default(), Prefs::default())
    }
}

pub enum Action {
    /// A preset's model ([`Model::load_preset`]); the user's training setup and GPU are kept.
    LoadPreset(Model),
    StartEmpty,
    /// A spec from the paste box (read and checked by `crate::import::paste`).
    LoadSpec(ModelSpec),
    /// A Hugging Face import, the context its `config.json` gives and the hub id it came from
    /// (none for a pasted config): runs at [`IMPORT_SEQ_LEN`] (or the importer's length, if
    /// shorter), and says so.
    /// The config's `torch_dtype` (or `dtype`), if it names one, sets the starting precision
    /// as the CLI's `--hf-config` does.
    ImportHf(ModelSpec, Option<u64>, Option<String>, Option<String>),
    SetBatch(u64),
    SetSeqLen(Option<u64>),
    /// Any other training setting (precision, optimizer, what-ifs, …).
    SetConfig(TrainConfig),
    /// The training setup and the multi-GPU job together (the LLM setup, a what-if of the job).
    SetJob(TrainConfig, DistConfig),
    SetGpu(GpuChoice),
    /// The setup panel's mode ([`SetupMode::apply`]); one that does not apply to the model
    /// (serving a CNN) is ignored.
    SetMode(SetupMode),
    /// A peak measured on the user's GPU (`None`: cleared).
    SetMeasured(Option<u64>),
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
    /// Opens every block around the row at this path (`layers[2].body[1]`), so it can be shown.
    Reveal(String),
    ToggleSelected(NodePath),
    Undo,
    Redo,
    SetLang(Lang),
    SetUnit(ByteUnit),
    SetTheme(Theme),
    /// Back to the saved work (after opening a shared link): its model and preferences.
    Restore(Saved),
    /// The workload switch (issues 24, 27).
    SetWorkload(local::Workload),
    /// The llama.cpp panel.
    Local(local::LocalAction),
    /// The pipeline panel's settings.
    SetPipeline(pipeline::PipelineState),
    /// A hub model's stored checkpoint, read after its config (`crate::import::checkpoint`).
    HubCheckpoint(HubCheckpoint),
}

impl State {
    /// The stored checkpoint of the model on screen, if it is the hub model it was read for.
    pub fn checkpoint(&self) -> Option<&HubCheckpoint> {
        self.hub_checkpoint.as_ref().filter(|c| self.model.hub.as_deref() == Some(c.hub.as_str()))
    }

    pub fn new(model: Model, prefs: Prefs) -> State {
        let collapsed = tree::block_paths(&model.spec.layers);
        State {
            model,
            prefs,
            collapsed,
            selected: Vec::new(),
            assumed_seq: None,
            workload: local::Workload::default(),
            local: local::LocalState::default(),
            hub_checkpoint: None,
            history: History::default(),
            last_edit: None,
        }
    }

    /// The preferences [`State::from_saved`] restores, without building its model (a link
    /// replaces the model: building the saved or default one was work the link threw away).
    pub fn saved_prefs(saved: Option<&Saved>) -> Prefs {
        saved.filter(|s| s.version == SAVED_VERSION).map_or_else(Prefs::default, |s| s.prefs)
    }

    /// Restores from LocalStorage's JSON; anything unreadable gives the default state.
    pub fn from_saved(saved: Option<Saved>) -> State {
        match saved {
            Some(mut s) if s.version == SAVED_VERSION => {
                // Saved before `unedited` existed: the default preset can still be recognised.
                let m = &mut s.model;
                if !m.unedited && m.preset.as_deref() == Some(DEFAULT_PRESET) && default_spec().as_ref() == Some(&m.spec) {
                    m.unedited = true;
                }
                let mut state = State::new(s.model, s.prefs);
                state.restore_local(s.local.as_ref());
                state
            }
            _ => State::default(),
        }
    }

    pub fn saved(&self) -> Saved {
        Saved { version: SAVED_VERSION, model: self.model.clone(), prefs: self.prefs, local: self.local.saved(self.workload == local::Workload::LlamaCpp) }
    }

    /// The llama.cpp panel as saved (an unreadable one stays as it is).
    fn restore_local(&mut self, saved: Option<&local::SavedLocal>) {
        if let Some(l) = saved {
            if let Ok(panel) = local::LocalState::open(&l.link) {
                self.local = panel;
                if l.shown {
                    self.workload = local::Workload::LlamaCpp;
                }
            }
        }
    }

    /// Undo and redo act on the panel shown (the llama.cpp panel keeps its own steps).
    pub fn can_undo(&self) -> bool {
        if self.workload == local::Workload::LlamaCpp {
            return self.local.can_undo();
        }
        !self.history.undo.is_empty()
    }
    pub fn can_redo(&self) -> bool {
        if self.workload == local::Workload::LlamaCpp {
            return self.local.can_redo();
        }
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
    fn replace_model(&mut self, mut model: Model) {
        // a new model of the PyTorch workload keeps the pipeline panel's settings
        model.pipeline = self.model.pipeline.clone();
        self.replace_all(model);
    }

    /// [`State::replace_model`] with the pipeline's settings too (saved work restored).
    fn replace_all(&mut self, model: Model) {
        self.collapsed = tree::block_paths(&model.spec.layers);
        self.selected.clear();
        self.commit(model, None);
    }

    /// A pasted model: the user's setup and GPU are kept; the sequence length is the model's.
    fn load_spec(&mut self, spec: ModelSpec) {
        self.assumed_seq = None;
        let config = TrainConfig { seq_len: None, ..self.model.config };
        let m = Model { spec: spec.into(), preset: None, unedited: false, hub: None, config, gpu: self.model.gpu.clone(), dist: self.model.dist, ..Model::empty() };
        self.replace_model(m);
    }

    fn edit_spec(&mut self, kind: Option<EditKind>, f: impl FnOnce(&mut ModelSpec) -> bool) {
        let mut model = self.model.clone();
        if f(model.spec.make_mut()) {
            model.unedited = false;
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
            Action::LoadPreset(mut m) => {
                s.assumed_seq = None;
                // Keep the user's training setup and GPU; the sequence length belongs to the model.
                m.config = TrainConfig { seq_len: None, ..s.model.config };
                // A language model picked after another kind starts as LLMs are run (issue 22
                // item 5): batch 1, at most 2048 tokens, its config's torch_dtype.
                if !vramcalc_core::defaults::is_language_model(&s.model.spec) {
                    if let Some(c) = vramcalc_core::defaults::starting_setup(&m.spec, m.torch_dtype().as_deref(), &m.config) {
                        m.config = c;
                    }
                }
                m.gpu = s.model.gpu.clone();
                m.dist = s.model.dist;
                s.replace_model(m);
            }
            Action::StartEmpty => {
                s.assumed_seq = None;
                let mut m = Model::empty();
                m.config = TrainConfig { seq_len: None, ..s.model.config };
                m.gpu = s.model.gpu.clone();
                m.dist = s.model.dist;
                s.replace_model(m);
            }
            Action::LoadSpec(spec) => s.load_spec(spec),
            Action::SetBatch(b) => {
                let mut m = s.model.clone();
                m.config.batch = b;
                s.commit(m, Some(EditKind::Batch));
            }
            Action::ImportHf(spec, context, hub, dtype) => {
                let seq = spec.seq_len(None).map(|l| l.min(IMPORT_SEQ_LEN));
                let from_other = !vramcalc_core::defaults::is_language_model(&s.model.spec);
                // the checkpoint's torch_dtype, as the CLI's --hf-config reads it (and a preset's)
                let start = vramcalc_core::defaults::starting_setup(&spec, dtype.as_deref(), &s.model.config).filter(|_| from_other);
                s.load_spec(spec);
                if let Some(c) = start {
                    // batch 1 and the checkpoints' bf16 (issue 22 item 5); the length as below
                    (s.model.config.batch, s.model.config.precision, s.model.config.grad_accum) = (c.batch, c.precision, c.grad_accum);
                }
                s.model.config.seq_len = seq;
                s.model.unedited = hub.is_some();
                s.model.hub = hub;
                s.assumed_seq = seq.map(|l| (l, context.unwrap_or(l)));
            }
            Action::SetSeqLen(l) => {
                s.assumed_seq = None;
                let mut m = s.model.clone();
                m.config.seq_len = l;
                s.commit(m, Some(EditKind::SeqLen));
            }
            Action::SetConfig(c) => {
                let mut m = s.model.clone();
                m.config = c;
                s.commit(m, None);
            }
            Action::SetJob(c, d) => {
                let mut m = s.model.clone();
                (m.config, m.dist) = (c, d);
                s.commit(m, None);
            }
            Action::SetMode(mode) => {
                if mode.applies_to(&s.model.spec) {
                    let mut m = s.model.clone();
                    (m.config, m.engine) = (mode.apply(&m.spec, &m.config), mode.engine());
                    s.commit(m, None);
                }
            }
            Action::SetMeasured(b) => {
                let mut m = s.model.clone();
                m.measured_peak = b.filter(|&b| b > 0);
                s.commit(m, None);
            }
            Action::SetGpu(g) => {
                let kind = matches!(g, GpuChoice::Custom(_)).then_some(EditKind::Capacity);
                let mut m = s.model.clone();
                m.gpu = g;
                s.commit(m, kind);
            }
            Action::SetInput(mut input) => {
                // One truth: the input shape shows the sequence length the model runs at, and
                // typing its first dimension sets that length (a preset stays a preset).
                let (mut m, old) = (s.model.clone(), &s.model.spec.input);
                if (m.config.seq_len.is_some() || (m.config.mode == vramcalc_core::Mode::Generate && m.config.generate.prompt_len.is_some())) && s.model.spec.is_sequence_input() && input.dtype == old.dtype
                    && !old.shape.is_empty() && input.shape.len() == old.shape.len()
                {
                    // the length the model runs at: the prompt when generating with one
                    m.config = mode::with_running_len(&m.config, input.shape[0]);
                    input.shape[0] = old.shape[0];
                    s.assumed_seq = None;
                }
                if input != m.spec.input {
                    (m.spec.make_mut().input, m.unedited) = (input, false);
                    s.selected.clear();
                }
                s.commit(m, Some(EditKind::Input));
            }
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
            Action::Reveal(path) => {
                // each block around it: the path up to each `.`
                for (i, _) in path.match_indices('.') {
                    if let Ok(block) = path[..i].parse::<NodePath>() {
                        s.collapsed.remove(&block);
                    }
                }
            }
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
            Action::Undo if s.workload == local::Workload::LlamaCpp => s.local.undo(),
            Action::Redo if s.workload == local::Workload::LlamaCpp => s.local.redo(),
            Action::Undo => s.travel(History::undo),
            Action::Redo => s.travel(History::redo),
            Action::SetLang(l) => s.prefs.lang = l,
            Action::SetUnit(u) => s.prefs.unit = u,
            Action::SetTheme(t) => s.prefs.theme = t,
            Action::Restore(saved) => {
                s.replace_all(saved.model);
                s.prefs = saved.prefs;
                s.restore_local(saved.local.as_ref());
            }
            Action::SetWorkload(w) => s.workload = w,
            Action::HubCheckpoint(c) => s.hub_checkpoint = Some(c),
            Action::Local(a) => s.local.apply(a),
            Action::SetPipeline(p) => {
                let kind = EditKind::Pipeline(s.model.pipeline.changed(&p));
                let model = Model { pipeline: p, ..s.model.clone() };
                s.commit(model, Some(kind));
            }
        }
        Rc::new(s)
    }
}

pub mod mode;

#[cfg(test)]
mod mode_tests;
#[cfg(test)]
mod ux_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// Work saved while the LLM settings were untyped (`"llm": {…}` beside the config) opens with
    /// them in the typed config and job; saved again, it has no `llm` left.
    #[test]
    fn work_saved_with_untyped_llm_settings_reads_them_typed() {
        let mut v = serde_json::to_value(Saved { version: SAVED_VERSION, model: Model::preset("gpt2").unwrap(), prefs: Prefs::default(), local: None }).unwrap();
        v["model"]["llm"] = serde_json::json!({ "finetune": { "method": "lora", "lora_r": 16 }, "dist": { "gpus": 4, "strategy": "zero3" } });
        let saved: Saved = serde_json::from_value(v).unwrap();
        let m = &saved.model;
        assert_eq!((m.config.finetune.method, m.config.finetune.lora_r), (vramcalc_core::finetune::Method::Lora, 16));
        assert_eq!((m.dist.gpus, m.dist.strategy), (4, vramcalc_core::distributed::Strategy::Zero3));
        let again = serde_json::to_value(&saved).unwrap();
        assert!(again["model"].get("llm").is_none() && again["model"]["dist"]["gpus"] == 4, "{again}");
        assert_eq!(serde_json::from_value::<Saved>(again).unwrap(), saved);
    }

    /// A hub model's stored checkpoint shows while that model is on screen, not after another
    /// model is loaded.
    #[test]
    fn a_hub_checkpoint_belongs_to_its_model() {
        use crate::import::checkpoint::{Source, Stored};
        let spec = crate::presets::preset("gpt2").unwrap();
        let s = reduce(State::default(), Action::ImportHf(spec, Some(1024), Some("openai-community/gpt2".into()), None));
        let stored = Stored { bytes: 248_894_656, source: Source::Header };
        let other = HubCheckpoint { hub: "Qwen/Qwen2.5-0.5B".into(), stored: Ok(stored.clone()) };
        assert!(reduce(s.clone(), Action::HubCheckpoint(other)).checkpoint().is_none(), "an answer for an earlier model is not shown");
        let s = reduce(s, Action::HubCheckpoint(HubCheckpoint { hub: "openai-community/gpt2".into(), stored: Ok(stored.clone()) }));
        assert_eq!(s.checkpoint().map(|c| &c.stored), Some(&Ok(stored)));
        let s = reduce(s, Action::LoadPreset(Model::preset("vgg11").unwrap()));
        assert!(s.checkpoint().is_none());
    }

    /// The llama.cpp panel is in the saved work (an edit survives a reload) and in undo while it
    /// is shown; the PyTorch model's undo is its own.
    #[test]
    fn the_llama_cpp_panel_is_saved_and_undone_like_the_model() {
        use local::{LocalAction, LocalSettings, Workload};
        let mut s = State::default();
        s = (*Rc::new(s).reduce(Action::SetWorkload(Workload::LlamaCpp))).clone();
        s = (*Rc::new(s).reduce(Action::Local(LocalAction::Set(LocalSettings { cards: vec!["rtx-3090".into(), "rtx-3090".into()], ..LocalSettings::default() })))).clone();
        assert!(s.can_undo());
        let saved: Saved = serde_json::from_str(&serde_json::to_string(&s.saved()).unwrap()).unwrap();
        let back = State::from_saved(Some(saved.clone()));
        assert_eq!((back.workload, &back.local.settings), (Workload::LlamaCpp, &s.local.settings));
        s = (*Rc::new(s).reduce(Action::Undo)).clone();
        assert_eq!(s.local.settings, LocalSettings::default());
        assert!(!s.can_undo() && s.can_redo());
        s = (*Rc::new(s).reduce(Action::Redo)).clone();
        assert_eq!(s.local.settings.cards.len(), 2);
        // on the PyTorch panel, undo is the model's and leaves the llama.cpp settings
        s = (*Rc::new(s).reduce(Action::SetWorkload(Workload::PyTorch))).clone();
        assert!(!s.can_undo());
        s = (*Rc::new(s).reduce(Action::SetBatch(7))).clone();
        s = (*Rc::new(s).reduce(Action::Undo)).clone();
        assert_eq!((s.model.config.batch, s.local.settings.cards.len()), (32, 2));
        // work saved before the panel was saved opens as before
        let mut v = serde_json::to_value(&saved).unwrap();
        v.as_object_mut().unwrap().remove("local");
        let old = State::from_saved(Some(serde_json::from_value(v).unwrap()));
        assert_eq!((old.workload, old.local.settings), (Workload::PyTorch, LocalSettings::default()));
    }

    /// Picking a language model after a CNN starts it as LLMs run: batch 1, 2048 tokens, its
    /// config's torch_dtype (issue 22 item 5).
    #[test]
    fn a_language_model_picked_after_a_cnn_starts_at_batch_1_in_its_dtype() {
        let s = (*Rc::new(State::default()).reduce(Action::LoadPreset(Model::preset("llama-3.1-8b").unwrap()))).clone();
        let c = s.model.config;
        assert_eq!((c.batch, c.seq_len, c.precision), (1, Some(2048), vramcalc_core::Precision::Bf16));
        // from one LLM to another, the user's setup stays
        let s = (*Rc::new(s).reduce(Action::SetBatch(4))).clone();
        let s = (*Rc::new(s).reduce(Action::LoadPreset(Model::preset("gpt2").unwrap()))).clone();
        assert_eq!(s.model.config.batch, 4);
    }
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
        let s = reduce(s, Action::LoadPreset(Model::preset("vgg16").unwrap()));
        assert!(!s.can_redo(), "a new edit clears redo");
        assert_eq!(s.model.preset.as_deref(), Some("vgg16"));
    }

    #[test]
    fn preset_keeps_settings_and_unknown_preset_is_ignored() {
        let s = reduce(State::default(), Action::SetBatch(7));
        let s = reduce(s, Action::LoadPreset(Model::preset("vgg16").unwrap()));
        assert_eq!(s.model.config.batch, 7);
        let before = s.model.clone();
        assert!(Model::preset("no-such-model").is_none());
        let err = crate::test_util::block_on(Model::load_preset("no-such-model")).unwrap_err();
        assert!(err.contains("unknown preset `no-such-model`"), "{err}");
        assert_eq!(s.model, before);
    }

    #[test]
    fn add_move_duplicate_delete_group() {
        let top = ListPath::top();
        let mut s = reduce(State::default(), Action::StartEmpty);
        s.model.spec.make_mut().input.shape = vec![16];
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
    fn unedited_is_cleared_by_spec_edits_only_and_comes_back_with_undo() {
        let s = reduce(State::default(), Action::LoadPreset(Model::preset("vgg16").unwrap()));
        assert!(s.model.unedited);
        let s = reduce(s, Action::SetBatch(9));
        assert!(s.model.unedited, "settings are not edits of the spec");
        let s = reduce(s, Action::DeleteLayer(NodePath::top(0)));
        assert!(!s.model.unedited);
        assert_eq!(s.model.preset.as_deref(), Some("vgg16"), "kept for the title");
        let s = reduce(s, Action::Undo);
        assert!(s.model.unedited);
        assert!(!reduce(s, Action::StartEmpty).model.unedited);
    }

    #[test]
    fn states_saved_before_unedited_still_load() {
        let old = |model: &Model| {
            let mut v = serde_json::to_value(Saved { version: SAVED_VERSION, model: model.clone(), prefs: Prefs::default(), local: None }).unwrap();
            v["model"].as_object_mut().unwrap().remove("unedited");
            serde_json::from_value::<Saved>(v).unwrap()
        };
        // the default preset is recognised; another preset's link then carries its spec
        assert!(State::from_saved(Some(old(&Model::default()))).model.unedited);
        let vgg = State::from_saved(Some(old(&Model::preset("vgg16").unwrap())));
        assert_eq!((vgg.model.preset.as_deref(), vgg.model.unedited), (Some("vgg16"), false));
        let edited = reduce(State::default(), Action::DeleteLayer(NodePath::top(0)));
        assert!(!State::from_saved(Some(old(&edited.model))).model.unedited);
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

    #[test]
    fn reveal_opens_the_blocks_around_a_row() {
        let s = reduce(State::default(), Action::LoadPreset(Model::preset("resnet18").unwrap()));
        let inner: NodePath = "layers[4].layers[0]".parse().unwrap();
        assert!(s.collapsed.contains(&"layers[4]".parse().unwrap()), "blocks start collapsed");
        let s = reduce(s, Action::Reveal("layers[4].layers[0].body[1]".into()));
        assert!(!s.collapsed.contains(&"layers[4]".parse().unwrap()) && !s.collapsed.contains(&inner));
        assert!(s.collapsed.contains(&"layers[5]".parse().unwrap()), "others stay collapsed");
    }

}
