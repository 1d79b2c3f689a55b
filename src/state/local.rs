//! The llama.cpp panel's state (issue 24): where the GGUF header comes from, the header once
//! read, and llama.cpp's settings. Plain data (no web-sys): the reducer is tested natively. The
//! header is the only part of a file kept (metadata and tensor infos, never weights); a local
//! file is named, never stored or linked.
//!
//! `Workload` is the app's minimal switch between the PyTorch panels, this one and the image
//! pipeline's (marked for the lead to merge into the setup's mode switch).

use std::rc::Rc;
use vramcalc_core::gguf::Header;
use vramcalc_core::llama_cpp::ollama::Ollama;
use vramcalc_core::llama_cpp::Params;

/// What the app shows: the PyTorch panels (every other mode), llama.cpp, or an image pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Workload {
    #[default]
    PyTorch,
    LlamaCpp,
    Pipeline,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::PyTorch, Workload::LlamaCpp, Workload::Pipeline];
    pub fn id(self) -> &'static str {
        match self {
            Workload::PyTorch => "pytorch",
            Workload::LlamaCpp => "llama-cpp",
            Workload::Pipeline => "pipeline",
        }
    }
}

/// A file on the Hugging Face hub: `https://huggingface.co/<repo>/resolve/<revision>/<path>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HubFile {
    pub repo: String,
    pub revision: String,
    pub path: String,
}

/// Where the header came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GgufSource {
    /// A file on this computer, read through `File.slice` (its name and size only).
    File { name: String, size: u64 },
    Hub(HubFile),
    /// No file: a built-in model's `config.json` typed as `llama-quantize` types it.
    Quant { model: String, quant: String },
}

/// Reading a header.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Load {
    #[default]
    Idle,
    Loading(GgufSource),
    /// Why the last read failed (the reader's error, with its offset and field).
    Failed(GgufSource, String),
}

/// Which program runs the GGUF: llama.cpp itself, or Ollama or LM Studio on top of it (their
/// settings by their own names: `vramcalc_core::llama_cpp::ollama`, `local::lmstudio`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum LocalEngine {
    #[default]
    LlamaCpp,
    Ollama,
    /// LM Studio: llama.cpp's settings under LM Studio's defaults and names (`local::lmstudio`).
    LmStudio,
}

impl LocalEngine {
    pub const ALL: [LocalEngine; 3] = [LocalEngine::LlamaCpp, LocalEngine::Ollama, LocalEngine::LmStudio];
    pub fn id(self) -> &'static str {
        match self {
            LocalEngine::LlamaCpp => "llama-cpp",
            LocalEngine::Ollama => "ollama",
            LocalEngine::LmStudio => "lm-studio",
        }
    }

    /// The program's own name.
    pub fn name(self) -> &'static str {
        match self {
            LocalEngine::LlamaCpp => "llama.cpp",
            LocalEngine::Ollama => "Ollama",
            LocalEngine::LmStudio => "LM Studio",
        }
    }
}

/// The settings (the core's own [`Params`] as llama.cpp's flags name them, and its [`Ollama`]
/// by Ollama's names) and the machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LocalSettings {
    pub engine: LocalEngine,
    pub params: Params,
    pub ollama: Ollama,
    /// The GPUs, one `vramcalc_core::GPUS` id per card (mixed cards allowed; empty: CPU only).
    pub cards: Vec<String>,
    /// System RAM the host's buffers are checked against.
    pub host_ram: Option<u64>,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings { engine: LocalEngine::default(), params: Params::default(), ollama: Ollama::default(), cards: vec!["rtx-4090".into()], host_ram: Some(64 << 30) }
    }
}

/// The most undo steps the panel keeps.
const UNDO_LIMIT: usize = 100;

/// Undo and redo of the settings (the header is not an edit: a file cannot be read again
/// without the user). Typing in one field is one step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LocalHistory {
    undo: Vec<LocalSettings>,
    redo: Vec<LocalSettings>,
    /// The field the last edit typed in.
    last: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LocalState {
    /// The model whose header is read, with the header.
    pub model: Option<(GgufSource, Rc<Header>)>,
    pub load: Load,
    pub settings: LocalSettings,
    pub history: LocalHistory,
}

pub enum LocalAction {
    /// A read started (a later answer for another source is dropped).
    Loading(GgufSource),
    Loaded(GgufSource, Rc<Header>),
    Failed(GgufSource, String),
    /// New settings, one undo step.
    Set(LocalSettings),
    /// New settings typed in field `id`: edits of one field in a row are one undo step.
    Edit(&'static str, LocalSettings),
}

impl LocalState {
    pub fn apply(&mut self, a: LocalAction) {
        match a {
            LocalAction::Loading(src) => self.load = Load::Loading(src),
            LocalAction::Loaded(src, h) => {
                // an answer for a source the user has since replaced is stale
                if matches!(&self.load, Load::Loading(s) if *s != src) {
                    return;
                }
                self.load = Load::Idle;
                self.model = Some((src, h));
            }
            LocalAction::Failed(src, e) => {
                if matches!(&self.load, Load::Loading(s) if *s != src) {
                    return;
                }
                self.load = Load::Failed(src, e);
            }
            LocalAction::Set(s) => self.edit(None, s),
            LocalAction::Edit(id, s) => self.edit(Some(id), s),
        }
    }

    fn edit(&mut self, field: Option<&'static str>, next: LocalSettings) {
        if next == self.settings {
            return;
        }
        let h = &mut self.history;
        let continues = field.is_some() && field == h.last;
        let before = std::mem::replace(&mut self.settings, next);
        if !continues {
            if h.undo.len() >= UNDO_LIMIT {
                h.undo.remove(0);
            }
            h.undo.push(before);
        }
        h.redo.clear();
        h.last = field;
    }

    pub fn can_undo(&self) -> bool {
        !self.history.undo.is_empty()
    }

    pub fn can_redo(&self) -> bool {
        !self.history.redo.is_empty()
    }

    pub fn undo(&mut self) {
        if let Some(prev) = self.history.undo.pop() {
            self.history.redo.push(std::mem::replace(&mut self.settings, prev));
            self.history.last = None;
        }
    }

    pub fn redo(&mut self) {
        if let Some(next) = self.history.redo.pop() {
            self.history.undo.push(std::mem::replace(&mut self.settings, next));
            self.history.last = None;
        }
    }

    /// What LocalStorage keeps of the panel: its share link (the hub file or built-in model,
    /// never a local file, and the settings) and whether it is shown; `None` when there is
    /// nothing to keep.
    pub fn saved(&self, shown: bool) -> Option<SavedLocal> {
        let src = self.model.as_ref().map(|m| &m.0);
        let untouched = self.settings == LocalSettings::default() && !matches!(src, Some(GgufSource::Hub(_) | GgufSource::Quant { .. }));
        (shown || !untouched).then(|| SavedLocal { link: crate::local::link::to_fragment(src, &self.settings), shown })
    }

    /// The panel as a link or saved work describes it: the settings, the built-in model's header
    /// (built here), a hub file to read (the panel reads it), or why the model cannot be built.
    pub fn open(fragment: &str) -> Result<LocalState, String> {
        let (src, settings) = crate::local::link::from_fragment(fragment)?;
        let mut state = LocalState { settings, ..LocalState::default() };
        match src {
            Some(GgufSource::Quant { model, quant }) => {
                let h = crate::local::synth(&model, &quant).map_err(|e| format!("link model: {e}"))?;
                state.model = Some((GgufSource::Quant { model, quant }, Rc::new(h)));
            }
            Some(src) => state.load = Load::Loading(src),
            None => {}
        }
        Ok(state)
    }
}

/// The panel in LocalStorage (beside the PyTorch model in `state::Saved`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SavedLocal {
    /// The `#gguf.…` link of the panel (`local::link`).
    pub link: String,
    /// Whether the llama.cpp workload was shown.
    #[serde(default)]
    pub shown: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(n: &str) -> GgufSource {
        GgufSource::File { name: n.into(), size: 1 }
    }

    fn header() -> Rc<Header> {
        Rc::new(Header { version: 3, metadata: vec![], tensors: vec![], alignment: 32, header_end: 24, data_offset: 24, data_size: 0 })
    }

    #[test]
    fn a_stale_answer_is_dropped_and_a_failure_keeps_the_last_model() {
        let mut s = LocalState::default();
        s.apply(LocalAction::Loading(src("a")));
        s.apply(LocalAction::Loaded(src("a"), header()));
        assert_eq!(s.model.as_ref().map(|m| &m.0), Some(&src("a")));
        assert_eq!(s.load, Load::Idle);
        s.apply(LocalAction::Loading(src("b")));
        s.apply(LocalAction::Loading(src("c")));
        s.apply(LocalAction::Loaded(src("b"), header()));
        assert_eq!(s.model.as_ref().map(|m| &m.0), Some(&src("a")), "b was replaced by c before it came");
        s.apply(LocalAction::Failed(src("c"), "GGUF header invalid".into()));
        assert_eq!(s.load, Load::Failed(src("c"), "GGUF header invalid".into()));
        assert_eq!(s.model.as_ref().map(|m| &m.0), Some(&src("a")));
    }

    fn c(ctx: u64) -> LocalSettings {
        LocalSettings { params: Params { n_ctx: ctx, ..Params::default() }, ..LocalSettings::default() }
    }

    #[test]
    fn typing_in_one_field_is_one_undo_step_and_redo_walks_back() {
        let mut s = LocalState::default();
        for ctx in [8, 81, 819, 8192] {
            s.apply(LocalAction::Edit("c", c(ctx)));
        }
        s.apply(LocalAction::Set(LocalSettings { cards: vec![], ..c(8192) }));
        s.apply(LocalAction::Edit("c", LocalSettings { cards: vec![], ..c(1024) }));
        assert_eq!(s.settings.params.n_ctx, 1024);
        s.undo();
        assert_eq!((s.settings.params.n_ctx, s.settings.cards.len()), (8192, 0));
        s.undo();
        assert_eq!((s.settings.params.n_ctx, s.settings.cards.len()), (8192, 1), "the cards' change was its own step");
        s.undo();
        assert_eq!(s.settings, LocalSettings::default(), "the typing in -c was one step");
        assert!(!s.can_undo() && s.can_redo());
        s.redo();
        s.redo();
        s.redo();
        assert_eq!(s.settings.params.n_ctx, 1024);
        // an edit after an undo drops what could be redone; no change is no step
        s.undo();
        s.apply(LocalAction::Edit("np", LocalSettings { params: Params { n_parallel: 2, ..s.settings.params.clone() }, ..s.settings.clone() }));
        assert!(!s.can_redo());
        let n = s.history.undo.len();
        s.apply(LocalAction::Set(s.settings.clone()));
        assert_eq!(s.history.undo.len(), n);
    }

    #[test]
    fn saved_work_keeps_the_hub_file_or_model_and_the_settings_never_a_local_file() {
        let mut s = LocalState::default();
        assert_eq!(s.saved(false), None, "nothing to keep");
        s.apply(LocalAction::Set(c(8192)));
        s.apply(LocalAction::Loading(src("secret.gguf")));
        s.apply(LocalAction::Loaded(src("secret.gguf"), header()));
        let saved = s.saved(true).unwrap();
        assert!(saved.shown && !saved.link.contains("secret"), "{saved:?}");
        let back = LocalState::open(&saved.link).unwrap();
        assert_eq!((back.settings, back.model.is_none()), (c(8192), true));
        let hub = GgufSource::Hub(HubFile { repo: "a/b".into(), revision: "main".into(), path: "x.gguf".into() });
        s.apply(LocalAction::Loading(hub.clone()));
        s.apply(LocalAction::Loaded(hub.clone(), header()));
        let back = LocalState::open(&s.saved(false).unwrap().link).unwrap();
        assert_eq!(back.load, Load::Loading(hub), "the panel reads the hub file again");
        let q = LocalState::open("gguf.model=qwen3-8b,quant=Q4_K_M").unwrap();
        assert!(matches!(&q.model, Some((GgufSource::Quant { .. }, h)) if h.tensors.len() > 100));
    }
}
