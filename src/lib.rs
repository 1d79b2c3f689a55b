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
//! | `state` | the one `State: Reducible`, its `Action`s, undo/redo (no web-sys: tested natively) |
//! | `tree` | paths into the spec's block tree and structural edits |
//! | `fields` | inline editing of any layer's hyper-parameters via its JSON form |
//! | `fix` | the one-click repair a shape error suggests (error banner) |
//! | `paste` | reading a pasted spec or Hugging Face `config.json` |
//! | `analysis` | estimate, batch sweep, max batch, what-ifs (core calls, wrapped in `use_memo`) |
//! | `charts` | pure geometry for the SVG charts |
//! | `i18n` | English / 中文 strings |
//! | `share_link` | the state ↔ a share link (`#v1.…`), the load rule (link vs. saved work), embed parameters |
//! | `export` | download file names (the CSV and JSON are written by the lazily loaded module) |
//! | `extras` | the lazily loaded second module: custom-model link codec, Hugging Face import, paste, downloads, the full core |
//! | `lazy` | the lazy route: what the app's core leaves out (MoE/MLA) is computed by that module, newest request wins |
//! | `dom` | address bar, clipboard, downloads, standalone SVGs, the embed's height messages (web-sys) |
//! | `components`, `hooks`, `app` | the Yew view |

pub mod analysis;
pub mod capacity;
pub mod charts;

pub mod extras;
pub mod fields;
pub mod fix;
pub mod i18n;
pub mod lazy;
pub mod prefs;
pub mod share_link;
pub mod state;
pub mod tree;

pub mod app;
pub mod components;
pub mod dom;
pub mod hooks;

pub use app::App;
