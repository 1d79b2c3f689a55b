//! English and 中文 strings. One struct, [`Tr`], with one constant per language (`en.rs`, `zh.rs`),
//! so a missing translation is a compile error.
//! Technical names (layer kinds, `fp32`, `adamw`, paths) stay as the core writes them.
//! Placeholders are `{}` and are filled with [`fill`].
//!
//! To add a string: a field in [`Tr`], then its text in both languages. To add a language: a
//! [`Lang`] variant and a file like `zh.rs`.

mod en;
pub mod import;
pub mod llm;
pub mod local;
pub mod pipeline;
pub mod modes;
mod zh;

pub use en::EN;
pub use zh::ZH;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Zh];
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Zh => "中文",
        }
    }
    pub fn parse(s: &str) -> Option<Lang> {
        Lang::ALL.into_iter().find(|l| l.code() == s)
    }
}

/// Replaces each `{}` in order.
pub fn fill(template: &str, args: &[&str]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    for a in args {
        match rest.find("{}") {
            Some(i) => {
                out.push_str(&rest[..i]);
                out.push_str(a);
                rest = &rest[i + 2..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// Every text the app shows, in one language. Labels of core values (breakdown categories, phases,
/// what-if tricks) are the methods below.
pub struct Tr {
    pub tagline: &'static str,
    pub undo: &'static str,
    pub redo: &'static str,
    pub units: &'static str,
    pub language: &'static str,
    pub theme: &'static str,
    pub theme_auto: &'static str,
    pub theme_light: &'static str,
    pub theme_dark: &'static str,

    pub model: &'static str,
    pub preset: &'static str,
    pub custom_model: &'static str,
    pub start_empty: &'static str,
    pub family_cnn: &'static str,
    pub family_vision: &'static str,
    pub family_encoder: &'static str,
    pub family_llm: &'static str,
    pub family_moe: &'static str,
    pub family_rnn: &'static str,
    pub input_shape: &'static str,
    pub input_shape_help: &'static str,
    pub input_dtype: &'static str,
    pub input_float: &'static str,
    pub input_tokens: &'static str,
    pub layers: &'static str,
    pub add_layer: &'static str,
    pub search_kinds: &'static str,
    pub no_match: &'static str,
    pub no_layers: &'static str,
    pub move_up: &'static str,
    pub move_down: &'static str,
    pub duplicate: &'static str,
    pub delete: &'static str,
    pub expand: &'static str,
    pub collapse: &'static str,
    pub ungroup: &'static str,
    pub select: &'static str,
    pub group_into: &'static str,
    pub group_hint: &'static str,
    pub add_shortcut: &'static str,
    pub add_branch: &'static str,
    pub branch: &'static str,
    pub output: &'static str,
    pub params: &'static str,
    pub saved: &'static str,
    pub share_of_activations: &'static str,
    pub reorder_hint: &'static str,


    pub setup: &'static str,
    pub gpu: &'static str,
    pub custom_capacity: &'static str,
    pub capacity: &'static str,
    pub capacity_help: &'static str,
    pub batch: &'static str,
    pub seq_len: &'static str,
    pub mode: &'static str,
    pub mode_train: &'static str,
    pub mode_infer: &'static str,
    pub mode_generate: &'static str,
    /// The LLM setup panel's heading (its fields' labels: `llm::LlmTr`).
    pub llm_setup: &'static str,
    pub trainable: &'static str,
    /// A layer whose weights all freeze (the per-layer table's mark).
    pub frozen: &'static str,
    pub kv_cache: &'static str,
    pub precision: &'static str,
    pub optimizer: &'static str,
    pub optimizer_impl: &'static str,
    pub grad_accum: &'static str,
    pub checkpointing: &'static str,
    pub inplace_relu: &'static str,
    pub inplace_model: &'static str,
    pub inplace_all: &'static str,
    pub inplace_none: &'static str,
    pub attention: &'static str,
    pub advanced: &'static str,
    pub device: &'static str,
    pub autocast_device: &'static str,
    pub must_be_whole: &'static str,

    pub results: &'static str,
    pub peak: &'static str,
    /// Chart marker labels: `peak 3.2 GB`, `max 553`.
    pub chart_peak: &'static str,
    pub chart_max: &'static str,
    pub peak_help: &'static str,
    pub device_total: &'static str,
    pub device_total_help: &'static str,
    pub fits: &'static str,
    pub does_not_fit: &'static str,
    pub on_gpu: &'static str,
    pub parameters: &'static str,
    pub peak_at: &'static str,
    pub rule_of_thumb: &'static str,
    pub rule_of_thumb_help: &'static str,
    pub vs_rule: &'static str,
    pub breakdown: &'static str,
    pub cat_parameters: &'static str,
    pub cat_buffers: &'static str,
    pub cat_gradients: &'static str,
    pub cat_optimizer_state: &'static str,
    pub cat_activations: &'static str,
    pub cat_temporaries: &'static str,
    pub cat_input: &'static str,
    pub cat_overhead: &'static str,
    pub cat_weight_casts: &'static str,
    /// Why autocast's weight copies are there (one sentence, beside the breakdown).
    pub weight_casts_why: &'static str,
    pub cat_kv_cache: &'static str,
    pub checkpoint_off: &'static str,
    pub timeline: &'static str,
    pub timeline_generate: &'static str,
    pub timeline_infer: &'static str,
    pub phase_forward: &'static str,
    pub phase_backward: &'static str,
    pub phase_optimizer: &'static str,
    pub batch_chart: &'static str,
    pub max_batch: &'static str,
    pub no_batch_fits: &'static str,
    pub per_layer: &'static str,
    pub col_layer: &'static str,
    pub col_kind: &'static str,
    pub col_output: &'static str,
    pub col_params: &'static str,
    pub col_values: &'static str,
    pub col_saved: &'static str,
    pub show_all: &'static str,
    pub show_fewer: &'static str,
    pub what_if: &'static str,
    pub what_if_help: &'static str,
    /// Shown while a link's model is still being read (a hub link's fetch: the embed card).
    pub computing: &'static str,
    /// A part of the page whose code is loaded on its own (`split::Lazy`) could not be fetched.
    pub part_not_loaded: &'static str,
    pub trick_halve_batch: &'static str,
    pub trick_amp: &'static str,
    pub trick_checkpointing: &'static str,
    pub trick_inplace_relu: &'static str,
    pub trick_grad_accum: &'static str,
    pub trick_sgd: &'static str,
    pub trick_shorter_seq: &'static str,
    pub saves: &'static str,
    pub adds: &'static str,
    pub stale: &'static str,
    pub no_result: &'static str,
    pub use_batch: &'static str,
    pub share_region: &'static str,
    pub collapse_all: &'static str,
    pub go_to_row: &'static str,
    pub fix_field: &'static str,
    pub applied: &'static str,
    pub setup_infer: &'static str,
    pub rule_help_infer: &'static str,
    pub import_assumed: &'static str,
    pub gpu_source: &'static str,
    pub or_fix: &'static str,
    pub stale_tag: &'static str,

    pub copy_link: &'static str,
    pub link_copied: &'static str,
    pub link_select: &'static str,
    pub link_chars: &'static str,
    pub link_too_large: &'static str,
    pub link_opened: &'static str,
    pub link_broken: &'static str,
    pub back_to_saved: &'static str,
    pub dismiss: &'static str,
    pub retry: &'static str,
    pub embed: &'static str,
    pub embed_title: &'static str,
    pub embed_help: &'static str,
    pub embed_controls: &'static str,
    pub embed_listener: &'static str,
    pub copy: &'static str,
    pub copied: &'static str,
    pub preview: &'static str,
    pub open_in_app: &'static str,
    pub export_csv: &'static str,
    pub export_json: &'static str,
    pub export_charts: &'static str,
    pub downloads: &'static str,
}

/// The strings of `lang`.
pub fn tr(lang: Lang) -> &'static Tr {
    match lang {
        Lang::En => &EN,
        Lang::Zh => &ZH,
    }
}

/// The import panel's texts in `lang`.
pub fn import_tr(lang: Lang) -> &'static import::ImportTr {
    match lang {
        Lang::En => &import::IMPORT_EN,
        Lang::Zh => &import::IMPORT_ZH,
    }
}

/// The llama.cpp panel's and the workload switch's texts in `lang`.
pub fn local_tr(lang: Lang) -> &'static local::LocalTr {
    match lang {
        Lang::En => &local::LOCAL_EN,
        Lang::Zh => &local::LOCAL_ZH,
    }
}

/// The image/video pipeline panel's texts in `lang`.
pub fn pipeline_tr(lang: Lang) -> &'static pipeline::PipelineTr {
    match lang {
        Lang::En => &pipeline::PIPELINE_EN,
        Lang::Zh => &pipeline::PIPELINE_ZH,
    }
}

/// The modes' and the reverse views' texts in `lang`.
pub fn modes_tr(lang: Lang) -> &'static modes::ModesTr {
    match lang {
        Lang::En => &modes::MODES_EN,
        Lang::Zh => &modes::MODES_ZH,
    }
}

/// The LLM setup's texts in `lang`.
pub fn llm_tr(lang: Lang) -> &'static llm::LlmTr {
    match lang {
        Lang::En => &llm::LLM_EN,
        Lang::Zh => &llm::LLM_ZH,
    }
}

impl Tr {
    /// Label of a breakdown key of the core (`parameters`, `activations`, …) or of the capacity
    /// bars (`peak`, `device_total`). An unknown key gives "": the one place that maps the core's
    /// category names, to take the core's `Category` enum instead of a string.
    pub fn category(&self, c: vramcalc_core::Category) -> &'static str {
        use vramcalc_core::Category::*;
        match c {
            Parameters => self.cat_parameters,
            Buffers => self.cat_buffers,
            Gradients => self.cat_gradients,
            OptimizerState => self.cat_optimizer_state,
            Activations => self.cat_activations,
            Temporaries => self.cat_temporaries,
            Input => self.cat_input,
        }
    }

    /// A bar's label.
    pub fn part(&self, p: crate::charts::bars::Part) -> &'static str {
        use crate::charts::bars::Part;
        match p {
            Part::Category(c) => self.category(c),
            Part::WeightCasts => self.cat_weight_casts,
            Part::KvCache => self.cat_kv_cache,
            Part::Overhead => self.cat_overhead,
            Part::Peak => self.peak,
            Part::DeviceTotal => self.device_total,
        }
    }

    /// Label of a phase of the training step (timeline chart).
    pub fn phase(&self, p: vramcalc_core::Phase) -> &'static str {
        match p {
            vramcalc_core::Phase::Forward => self.phase_forward,
            vramcalc_core::Phase::Backward => self.phase_backward,
            vramcalc_core::Phase::Optimizer => self.phase_optimizer,
        }
    }

    /// Label of a what-if trick.
    pub fn trick(&self, t: vramcalc_core::whatif::Trick) -> &'static str {
        use vramcalc_core::whatif::Trick::*;
        match t {
            HalveBatch => self.trick_halve_batch,
            Amp => self.trick_amp,
            Checkpointing => self.trick_checkpointing,
            InplaceRelu => self.trick_inplace_relu,
            GradAccum4 => self.trick_grad_accum,
            Sgd => self.trick_sgd,
            ShorterSeq => self.trick_shorter_seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_placeholders() {
        assert_eq!(fill("Fits, {} to spare", &["2 GB"]), "Fits, 2 GB to spare");
        assert_eq!(fill("on {} ({})", &["A", "B"]), "on A (B)");
        assert_eq!(fill("no args {}", &[]), "no args {}");
        assert_eq!(fill("{}", &["a", "b"]), "a");
    }

    #[test]
    fn languages_parse() {
        for l in Lang::ALL {
            assert_eq!(Lang::parse(l.code()), Some(l));
        }
        assert_ne!(tr(Lang::Zh).peak, tr(Lang::En).peak);
    }
}
