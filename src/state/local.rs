//! The llama.cpp panel's state (issue 24): where the GGUF header comes from, the header once
//! read, and llama.cpp's settings. Plain data (no web-sys): the reducer is tested natively. The
//! header is the only part of a file kept (metadata and tensor infos, never weights); a local
//! file is named, never stored or linked.
//!
//! `Workload` is the app's minimal switch between the PyTorch panels, this one and the image
//! pipeline's (marked for the lead to merge into the setup's mode switch).

use std::rc::Rc;
use vramcalc_core::gguf::Header;
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFile {
    pub repo: String,
    pub revision: String,
    pub path: String,
}

/// Where the header came from.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// llama.cpp's settings (the core's own [`Params`], as its flags name them) and the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSettings {
    pub params: Params,
    /// The card (`vramcalc_core::GPUS` id; `None`: CPU only) and how many of it.
    pub gpu: Option<String>,
    pub n_gpus: u64,
    /// System RAM the host's buffers are checked against.
    pub host_ram: Option<u64>,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings { params: Params::default(), gpu: Some("rtx-4090".into()), n_gpus: 1, host_ram: Some(64 << 30) }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LocalState {
    /// The model whose header is read, with the header.
    pub model: Option<(GgufSource, Rc<Header>)>,
    pub load: Load,
    pub settings: LocalSettings,
}

pub enum LocalAction {
    /// A read started (a later answer for another source is dropped).
    Loading(GgufSource),
    Loaded(GgufSource, Rc<Header>),
    Failed(GgufSource, String),
    Set(LocalSettings),
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
            LocalAction::Set(s) => self.settings = s,
        }
    }
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
}
