//! What-ifs of `--mode generate`: the KV cache choices people weigh, each applied alone to a
//! setup, with the peak it gives (the pattern of `whatif.rs`, whose batch trick also applies).

use crate::config::{Mode, TrainConfig};
use crate::error::Result;
use crate::generation::{KvCacheKind, KvDType};
use crate::memory::Prepared;
use crate::spec::ModelSpec;
use serde::Serialize;

/// One generation trick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GenTrick {
    /// `cache_implementation="static"`: all slots up front, no `torch.cat` copies.
    StaticCache,
    /// vLLM-style paged blocks.
    PagedCache,
    /// Half the prompt.
    ShorterPrompt,
    /// An fp8 KV cache (1 byte per element).
    Fp8KvCache,
}

impl GenTrick {
    pub const ALL: [GenTrick; 4] = [GenTrick::StaticCache, GenTrick::PagedCache, GenTrick::ShorterPrompt, GenTrick::Fp8KvCache];

    /// A stable id (JSON, test ids).
    pub fn id(self) -> &'static str {
        match self {
            GenTrick::StaticCache => "static-cache",
            GenTrick::PagedCache => "paged-cache",
            GenTrick::ShorterPrompt => "shorter-prompt",
            GenTrick::Fp8KvCache => "fp8-kv-cache",
        }
    }

    /// What the trick does, in English.
    pub fn describe(self) -> &'static str {
        match self {
            GenTrick::StaticCache => "static KV cache",
            GenTrick::PagedCache => "paged KV cache (16-token blocks)",
            GenTrick::ShorterPrompt => "halve the prompt",
            GenTrick::Fp8KvCache => "fp8 KV cache",
        }
    }
}

/// A trick applied to a generation setup, and the peak it gives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenWhatIf {
    pub trick: GenTrick,
    pub config: TrainConfig,
    /// Peak allocated bytes with the trick.
    pub peak: u64,
    pub device_total: u64,
}

/// The setup with `trick` applied, or `None` where it does not apply.
pub fn apply(trick: GenTrick, spec: &ModelSpec, c: &TrainConfig) -> Option<TrainConfig> {
    if c.mode != Mode::Generate {
        return None;
    }
    let mut n = *c;
    let g = &mut n.generate;
    match trick {
        GenTrick::StaticCache if g.cache != KvCacheKind::Static => g.cache = KvCacheKind::Static,
        GenTrick::PagedCache if g.cache != KvCacheKind::Paged => g.cache = KvCacheKind::Paged,
        GenTrick::ShorterPrompt => {
            let p = g.prompt_len.or(spec.seq_len(c.seq_len))?;
            if p < 2 {
                return None;
            }
            g.prompt_len = Some(p / 2);
        }
        GenTrick::Fp8KvCache if g.kv_dtype != Some(KvDType::Fp8) => g.kv_dtype = Some(KvDType::Fp8),
        _ => return None,
    }
    Some(n)
}

/// Every applicable trick with its result (those the core rejects left out); an error when the
/// setup itself is rejected.
/// Every applicable trick that lowers the peak or the device total.
pub fn what_ifs(spec: &ModelSpec, config: &TrainConfig) -> Result<Vec<GenWhatIf>> {
    let (base_peak, base_total) = Prepared::new(spec, config)?.peak_at(config.batch);
    Ok(GenTrick::ALL
        .iter()
        .filter_map(|&trick| {
            let cfg = apply(trick, spec, config)?;
            let (peak, device_total) = Prepared::new(spec, &cfg).ok()?.peak_at(cfg.batch);
            (peak < base_peak || device_total < base_total).then_some(GenWhatIf { trick, config: cfg, peak, device_total })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generation::GenerateConfig;

    #[test]
    fn generation_what_ifs_change_the_cache() {
        let spec = crate::presets::build("gpt2").unwrap();
        let cfg = TrainConfig {
            batch: 4,
            mode: Mode::Generate,
            precision: crate::config::Precision::Fp16,
            generate: GenerateConfig { prompt_len: Some(512), new_tokens: 256, ..GenerateConfig::default() },
            ..TrainConfig::default()
        };
        let base = crate::estimate(&spec, &cfg).unwrap();
        let w = what_ifs(&spec, &cfg).unwrap();
        let peak = |t: GenTrick| w.iter().find(|w| w.trick == t).unwrap().peak;
        assert!(peak(GenTrick::ShorterPrompt) < base.peak_bytes);
        // fp8 halves the cache of an fp16 model; the prefill's peak may hide it (then it is not
        // offered), never raise it
        let fp8_cfg = apply(GenTrick::Fp8KvCache, &spec, &cfg).unwrap();
        let fp8 = crate::estimate(&spec, &fp8_cfg).unwrap();
        assert!(fp8.peak_bytes <= base.peak_bytes);
        assert_eq!(fp8.generation.unwrap().kv_cache_bytes * 2, base.generation.as_ref().unwrap().kv_cache_bytes);
        assert!(w.iter().all(|w| w.peak < base.peak_bytes || w.device_total < base.device_total_bytes));
        assert!(w.iter().all(|w| w.trick != GenTrick::StaticCache || w.config.generate.cache == KvCacheKind::Static));
        // training setups get none
        assert!(what_ifs(&spec, &TrainConfig::default()).unwrap().is_empty());
    }
}
