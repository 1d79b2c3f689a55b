//! "Measure it yourself" (issue 26): the script that measures the estimated step on the user's
//! GPU (`vramcalc_core::launch::measure`, the CLI's `vramcalc launch --for measure`), reading
//! the figure it prints back, and how the estimate compares with it.

use crate::state::Model;
use vramcalc_core::launch::measure::{self, Model as Loaded};
use vramcalc_core::presets::{self, Family};

/// The script for the model's setup, printing its peak beside the estimate's `peak` and
/// `device_total`; the error says what the script does not cover yet (the core's words).
pub fn script(m: &Model, peak: u64, device_total: u64) -> Result<String, String> {
    let family = m.preset.as_deref().and_then(presets::info).map(|p| p.family);
    let id = super::launch::model_id(m);
    let loaded = match (family, m.preset.as_deref()) {
        (Some(Family::Cnn), Some(p)) if m.unedited => Loaded::Torchvision(p),
        _ if vramcalc_core::defaults::is_language_model(&m.spec) && id != "MODEL" => Loaded::CausalLm(&id),
        _ => return Err("the measurement script covers torchvision CNN presets and causal language models from the hub".into()),
    };
    measure::script(loaded, &m.config, peak, device_total).map_err(|e| e.to_string())
}

/// A pasted figure: a whole number is bytes (what the script prints); a size with a unit
/// (`23.4 GiB`, `24GB`) is read as the core reads capacities. `None`: not a figure (or zero).
pub fn parse(text: &str) -> Option<u64> {
    let t = text.trim().trim_end_matches('.');
    let t = t.strip_suffix(" B").unwrap_or(t);
    t.replace([',', '_'], "").parse::<u64>().ok().or_else(|| vramcalc_core::units::parse_bytes(t)).filter(|&b| b > 0)
}

/// The estimate's error against the measurement, signed (`+3.1%`: the estimate is higher).
pub fn deviation(estimate: u64, measured: u64) -> String {
    if measured == 0 {
        return "—".into();
    }
    format!("{:+.1}%", (estimate as f64 - measured as f64) * 100.0 / measured as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pasted_figure_reads_as_the_script_prints_it() {
        assert_eq!(parse("17179869184"), Some(17_179_869_184));
        assert_eq!(parse(" 17,179,869,184 B "), Some(17_179_869_184));
        assert_eq!(parse("16 GiB"), Some(16 << 30));
        assert_eq!(parse("24GB"), Some(24_000_000_000));
        assert_eq!((parse("lots"), parse("0"), parse("")), (None, None, None));
        assert_eq!(deviation(103, 100), "+3.0%");
        assert_eq!(deviation(95, 100), "-5.0%");
    }

    #[test]
    fn scripts_for_a_cnn_preset_and_a_language_model() {
        let cnn = Model::preset("resnet50").unwrap();
        let s = script(&cnn, 123, 456).unwrap();
        assert!(s.contains("torchvision.models.resnet50()") && s.contains("estimate = 123"), "{s}");
        assert!(s.contains("reset_peak_memory_stats") && s.contains("max_memory_allocated"));
        let mut lm = Model::preset("llama-3.1-8b").unwrap();
        lm.config.seq_len = Some(2048);
        // built from its config.json (random weights of its shapes: no checkpoint to download)
        let s = script(&lm, 1, 2).unwrap();
        assert!(s.contains("AutoConfig.from_pretrained(\"meta-llama/Llama-3.1-8B\")") && s.contains("AutoModelForCausalLM.from_config(config"), "{s}");
        // LoRA and generation have their scripts too
        lm.config.finetune = vramcalc_core::finetune::FineTune { method: vramcalc_core::finetune::Method::Lora, ..Default::default() };
        assert!(script(&lm, 1, 2).unwrap().contains("get_peft_model(model, lora_config)"));
        // an edited CNN is not torchvision's any more
        let mut edited = cnn;
        edited.unedited = false;
        assert!(script(&edited, 1, 2).is_err());
    }
}
