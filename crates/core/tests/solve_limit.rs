//! The solver's answer names where memory runs out just above it (`Answer::limit`) from the
//! search's own measurement there (`Setup::measure`, `DistPrepared::peak_summary`), not from a
//! second full estimate: both must give the full estimate's figures, on every preset.

use vramcalc_core::distributed::{DistConfig, Strategy};
use vramcalc_core::presets::{Family, PRESETS};
use vramcalc_core::solve::{self, Setup, Variable};
use vramcalc_core::{GenerateConfig, Mode, Precision, TrainConfig};

/// The presets the debug build checks; a release build checks all.
fn presets() -> impl Iterator<Item = &'static vramcalc_core::presets::PresetInfo> {
    let big = ["llama-3.1-70b", "qwen2.5-72b", "deepseek-v3", "mixtral-8x7b"];
    PRESETS.iter().filter(move |p| !cfg!(debug_assertions) || !big.contains(&p.id))
}

/// A measurement is the full estimate's peak, device total, phase, `peak_at` and breakdown.
fn same_as_estimate(what: &str, setup: &Setup) -> bool {
    let Ok(e) = setup.estimate() else {
        assert!(setup.measure().is_err(), "{what}: measured a setup the estimate refuses");
        return false;
    };
    let (e, s) = (e.estimate, setup.measure().unwrap_or_else(|err| panic!("{what}: {err}")));
    assert_eq!(
        (s.peak_bytes, s.device_total_bytes, s.peak_phase, &s.peak_at, &s.breakdown),
        (e.peak_bytes, e.device_total_bytes, e.peak_phase, &e.peak_at, &e.breakdown),
        "{what}"
    );
    assert_eq!((s.peak_bytes, s.device_total_bytes), setup.totals().unwrap(), "{what}");
    true
}

#[test]
fn a_measurement_is_the_estimate_on_every_preset() {
    let mut checked = 0;
    for p in presets() {
        let spec = vramcalc_core::import::preset(p.id).unwrap();
        let seq = p.default_seq_len.map(|s| s.min(96));
        let train = TrainConfig { batch: 2, seq_len: seq, precision: Precision::AmpBf16, ..TrainConfig::default() };
        let infer = TrainConfig { mode: Mode::Infer, precision: Precision::Bf16, ..train };
        let mut configs = vec![("train", train), ("infer", infer)];
        if matches!(p.family, Family::Llm | Family::Moe) {
            let generate = GenerateConfig { prompt_len: Some(40), new_tokens: 6, ..GenerateConfig::default() };
            configs.push(("generate", TrainConfig { mode: Mode::Generate, generate, ..infer }));
        }
        for (name, config) in configs {
            checked += same_as_estimate(&format!("{} {name}", p.id), &Setup::new(&spec, config)) as u32;
        }
    }
    assert!(checked >= 2 * PRESETS.len() as u32 - 20, "{checked}");
}

#[test]
fn a_sharded_measurement_is_the_estimate() {
    let spec = vramcalc_core::import::preset("qwen2.5-0.5b").unwrap();
    let config = TrainConfig { batch: 2, seq_len: Some(64), precision: Precision::Bf16, ..TrainConfig::default() };
    for dist in [
        DistConfig { gpus: 4, strategy: Strategy::Zero3, ..DistConfig::default() },
        DistConfig { gpus: 4, strategy: Strategy::Fsdp, ..DistConfig::default() },
        DistConfig { gpus: 2, strategy: Strategy::Tp, sequence_parallel: true, ..DistConfig::default() },
        DistConfig { gpus: 2, strategy: Strategy::Tp, ..DistConfig::default() },
    ] {
        for mode in [Mode::Train, Mode::Infer] {
            let what = format!("{:?} {mode}", dist.strategy);
            // inference on several GPUs is tensor-parallel only (both refuse the rest)
            let runs = mode == Mode::Train || dist.strategy == Strategy::Tp;
            assert_eq!(same_as_estimate(&what, &Setup { spec: &spec, config: TrainConfig { mode, ..config }, dist }), runs, "{what}");
        }
    }
}

/// The answer's limit is [`Setup::limit`]'s (the full estimate just above the answer).
#[test]
fn the_limit_is_the_estimates() {
    let mut checked = 0;
    for id in ["gpt2", "qwen2.5-0.5b", "phi-3-mini", "bert-base"] {
        let spec = vramcalc_core::import::preset(id).unwrap();
        let train = TrainConfig { batch: 2, seq_len: Some(128), precision: Precision::AmpBf16, ..TrainConfig::default() };
        let generate = GenerateConfig { prompt_len: Some(64), new_tokens: 16, ..GenerateConfig::default() };
        let gen = TrainConfig { mode: Mode::Generate, precision: Precision::Bf16, generate, ..train };
        let fsdp = DistConfig { gpus: 4, strategy: Strategy::Fsdp, ..DistConfig::default() };
        let cases = [
            (train, DistConfig::default(), Variable::Batch),
            (train, DistConfig::default(), Variable::SeqLen),
            (train, fsdp, Variable::Batch),
            (train, fsdp, Variable::SeqLen),
            (gen, DistConfig::default(), Variable::PromptLen),
            (gen, DistConfig::default(), Variable::NewTokens),
        ];
        for (config, dist, of) in cases {
            let setup = Setup { spec: &spec, config, dist };
            let Ok(base) = setup.totals() else { continue };
            // a capacity some way above the setup's own total
            for cap in [base.1 + (base.1 >> 3), base.1 * 3] {
                let what = format!("{id} {of} {:?} cap {cap}", dist.strategy);
                let Ok(a) = solve::max_value(&setup, of, cap) else { continue };
                let Some(limit) = a.limit else { continue };
                let next = limit.value;
                assert_eq!(limit, setup.at(of, next).unwrap().limit(next).unwrap(), "{what}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "{checked}");
}
