//! "What fits my GPU" (issue 26): the core's table (`solve::fits`, the CLI's `vramcalc fits`)
//! over the presets × six formats for the page's GPU and a workload, one model at a time (the
//! view yields to the page between models), each row with the link to its full estimate.

use crate::state::{GpuChoice, SetupMode};
use vramcalc_core::finetune::Method;
use vramcalc_core::formats::WeightFormat;
use vramcalc_core::presets::{Family, PRESETS};
use vramcalc_core::share::{self, ModelSource, ShareState};
use vramcalc_core::solve::fits::{self, FitsOptions, Row, Workload};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{ByteUnit, Mode, Precision, TrainConfig};

/// The workload the page's mode asks about (QLoRA for a QLoRA fine-tune, LoRA for the others).
pub fn workload_of(mode: SetupMode, c: &TrainConfig) -> Workload {
    match mode {
        SetupMode::Train => Workload::Full,
        SetupMode::FineTune if c.finetune.method == Method::Qlora => Workload::Qlora,
        SetupMode::FineTune => Workload::Lora,
        SetupMode::Infer => Workload::Infer,
        SetupMode::Generate => Workload::Generate,
        SetupMode::Serve => Workload::Serve,
    }
}

/// The presets the workload's table covers, as `vramcalc fits` chooses them (language models
/// for a language workload, every preset otherwise).
pub fn models(w: Workload) -> Vec<&'static str> {
    PRESETS.iter().filter(|p| !w.needs_lm() || matches!(p.family, Family::Llm | Family::Moe)).map(|p| p.id).collect()
}

/// The table's shared settings from the page's: its batch (concurrency), its length (the prompt
/// when generating, vLLM's context when serving), its new tokens.
pub fn options(mode: SetupMode, spec: &ModelSpec, c: &TrainConfig) -> FitsOptions {
    let seq_len = match mode {
        SetupMode::Serve => Some(crate::llm::answers::serve_context(spec, c)),
        _ => crate::state::mode::running_len(spec, c),
    };
    FitsOptions { batch: c.batch.max(1), seq_len: if spec.is_token_input() { seq_len } else { None }, new_tokens: c.generate.new_tokens }
}

/// One preset's rows (built by the core, as the CLI builds it); none if it does not build.
pub fn rows_of(id: &str, w: Workload, capacity: u64, o: &FitsOptions) -> Vec<Row> {
    match crate::presets::preset(id) {
        Ok(spec) => w.formats().iter().filter_map(|f| row_of(id, &spec, w, f, capacity, o)).collect(),
        Err(_) => Vec::new(),
    }
}

/// One row of `fits::table` (the view computes a row per task); `None` for a pair the core
/// refuses (the table leaves it out).
pub fn row_of(id: &str, spec: &ModelSpec, w: Workload, format: &str, capacity: u64, o: &FitsOptions) -> Option<Row> {
    fits::row(id, spec, w, format, capacity, o).ok()
}

/// The link (`#v1.…`) that opens a row as its full estimate on the page's GPU.
pub fn link(row: &Row, w: Workload, o: &FitsOptions, gpu: &GpuChoice, unit: ByteUnit, lang: &str) -> Option<String> {
    let (config, engine) = match w {
        Workload::Serve => {
            let c = TrainConfig {
                mode: Mode::Infer,
                batch: o.batch,
                seq_len: Some(o.seq_len.unwrap_or(4096)),
                precision: Precision::Bf16,
                weights: Some(WeightFormat::parse(&row.format).ok()?),
                ..TrainConfig::default()
            };
            (c, Some("vllm".to_string()))
        }
        _ => (fits::config_of(w, &row.format, o).ok()?, None),
    };
    let (gpu, capacity_bytes) = match gpu {
        GpuChoice::Listed(id) => (Some(id.clone()), None),
        GpuChoice::Custom(b) => (None, Some(*b)),
    };
    let state = ShareState {
        model: ModelSource::Preset { id: row.model.clone() },
        config,
        gpu,
        capacity_bytes,
        unit,
        lang: lang.to_string(),
        engine,
        ..ShareState::default()
    };
    share::encode(&state).ok().map(|f| format!("#{f}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::share_link::open;
    use crate::test_util::block_on;

    #[test]
    fn the_pages_mode_chooses_the_workload_and_its_models() {
        let c = TrainConfig::default();
        assert_eq!(workload_of(SetupMode::Serve, &c), Workload::Serve);
        assert_eq!(workload_of(SetupMode::Train, &c), Workload::Full);
        let q = TrainConfig { finetune: vramcalc_core::finetune::FineTune { method: Method::Qlora, ..Default::default() }, ..c };
        assert_eq!(workload_of(SetupMode::FineTune, &q), Workload::Qlora);
        let lms = models(Workload::Qlora);
        assert!(lms.contains(&"llama-3.1-8b") && !lms.contains(&"resnet50"));
        assert!(models(Workload::Full).contains(&"resnet50"));
    }

    /// Each row's link opens the row's setup: the same fit and device total as the table says.
    #[test]
    fn a_rows_link_opens_its_setup() {
        let o = FitsOptions { batch: 1, seq_len: Some(512), new_tokens: 64 };
        let gpu = GpuChoice::Listed("rtx-4090".into());
        for w in [Workload::Qlora, Workload::Generate, Workload::Serve] {
            let rows = rows_of("qwen2.5-0.5b", w, gpu.capacity(), &o);
            assert_eq!(rows.len(), 6, "{w:?}");
            let spec = vramcalc_core::import::preset("qwen2.5-0.5b").unwrap();
            assert_eq!(rows, fits::table(&[("qwen2.5-0.5b", &spec)], w, gpu.capacity(), &o), "row by row is the core's table");
            let l = link(&rows[0], w, &o, &gpu, ByteUnit::Mib, "en").unwrap();
            let opened = block_on(open(&l, Default::default())).unwrap().model;
            assert_eq!(opened.preset.as_deref(), Some("qwen2.5-0.5b"));
            if w == Workload::Serve {
                assert_eq!(opened.mode(), SetupMode::Serve);
                continue;
            }
            let (_, total) = vramcalc_core::solve::Setup::new(&opened.spec, opened.config).totals().unwrap();
            assert_eq!(total, rows[0].device_total_bytes, "{w:?} {l}");
        }
    }
}
