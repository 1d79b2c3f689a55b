//! # vramcalc web app
//!
//! A Yew (CSR) front end of `vramcalc-core`: build or pick a model, set up training, and see the
//! peak memory of a training step, live. Every number comes from the core; this crate only keeps
//! state, derives views and draws them.
//!
//! | module | concern |
//! |---|---|
//! | `capacity` | typed capacities (a bare number is GiB) and how a listed card's total is shown |
//! | `prefs` | display preferences: language, byte unit (binary by default), theme |
//! | `presets` | a preset's spec without the importer (the published configs' built by `build.rs`) |
//! | `state` | the one `State: Reducible`, its `Action`s, undo/redo (no web-sys: tested natively) |
//! | `tree` | paths into the spec's block tree and structural edits |
//! | `fields` | inline editing of any layer's hyper-parameters via its JSON form |
//! | `fix` | the one-click repair a shape error suggests (error banner) |
//! | `analysis` | estimate, batch sweep, max batch, what-ifs (core calls, wrapped in `use_memo`) |
//! | `charts` | pure geometry for the SVG charts |
//! | `i18n` | English / 中文 strings |
//! | `share_link` | the state ↔ a share link (`#v1.…`), the load rule (link vs. saved work), embed parameters |
//! | `export` | the downloads' files: the per-layer CSV, the estimate's JSON, their names |
//! | `import` | the Hugging Face hub fetch and the paste box's reader (the import panel's logic) |
//! | `llm` | the LLM setup's fields and what they set; its answers (GPU sizing, vLLM serving) |
//! | `form` | the llama.cpp and pipeline panels' fields as data |
//! | `pipeline` | the image/video pipeline panel: fields, the core's stages or LoRA step, its share links (`#pipe.…`) |
//! | `local` | the llama.cpp panel: GGUF headers by `File.slice` or HTTP `Range`, llama.cpp's buffers per device |
//! | `reverse` | the reverse views: the largest value that fits, the cheapest fixes, what fits a GPU, the launch command, the measurement script |
//! | `worker` | the app's worker (`src/bin/worker.rs`): the importers on first use, typed requests over `postMessage` |
//! | `dom` | address bar, clipboard, downloads, standalone SVGs, the embed's height messages (web-sys) |
//! | `components`, `hooks`, `app` | the Yew view |

pub mod analysis;
pub mod capacity;
pub mod charts;

pub mod export;
pub mod fields;
pub mod fix;
pub mod form;
pub mod i18n;
pub mod import;
pub mod llm;
pub mod local;
pub mod pipeline;
pub mod prefs;
pub mod presets;
pub mod reverse;
pub mod share_link;
pub mod split;
pub mod state;
pub mod tree;
pub mod worker;

pub mod app;
pub mod components;
pub mod dom;
pub mod hooks;

pub use app::App;

/// For native tests.
#[cfg(all(test, not(target_arch = "wasm32")))]
pub mod test_util {
    /// Runs a future that never waits on anything outside it (no fetch, no timer) to the end.
    pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
