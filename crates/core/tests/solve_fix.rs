//! The cheapest fix: on setups where no single change fits but a pair does, the first fix is a
//! pair; every fix is minimal, ranked by tier then cost, and its figures are its setup's estimate.

use vramcalc_core::distributed::DistConfig;
use vramcalc_core::solve::fix::{self, Change, FixOptions, Tier};
use vramcalc_core::solve::Setup;
use vramcalc_core::{Mode, ModelSpec, Precision, TrainConfig};

fn total(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig) -> u64 {
    vramcalc_core::distributed::estimate(spec, c, d).unwrap().estimate.device_total_bytes
}

/// The device total with `changes` applied in order (`None`: they do not combine).
fn with(setup: &Setup, changes: &[Change]) -> Option<u64> {
    let (c, d) = changes.iter().try_fold((setup.config, setup.dist), |(c, d), ch| ch.apply(setup.spec, &c, &d))?;
    vramcalc_core::distributed::estimate(setup.spec, &c, &d).ok().map(|e| e.estimate.device_total_bytes)
}

fn check_pair_case(id: &str, config: TrainConfig) {
    let spec = vramcalc_core::import::preset(id).unwrap();
    let setup = Setup::new(&spec, config);
    let options = FixOptions { max_changes: 3, max_gpus: 1, top: 6 };
    let singles = fix::candidates(&setup, &options);
    assert!(singles.len() >= 3, "{id}: {singles:?}");
    let best_single = singles.iter().filter_map(|c| with(&setup, &[*c])).min().unwrap();
    let best_pair = singles.iter().enumerate().flat_map(|(i, a)| singles[i + 1..].iter().filter_map(|b| with(&setup, &[*a, *b]))).min().unwrap();
    assert!(best_pair < best_single, "{id}: a pair saves more than any single change");
    // a capacity no single change reaches and some pair does
    let cap = best_single - 1;
    let fixes = fix::fixes(&setup, cap, &options).unwrap();
    assert!(!fixes.is_empty(), "{id}");
    assert!(fixes.iter().all(|f| f.changes.len() >= 2), "{id}: no single change fits, yet {:?}", fixes[0].changes);
    assert!(fixes[0].changes.len() == 2 || fixes[0].tier > Tier::SameResult, "{id}: {:?}", fixes[0].changes);
    for w in fixes.windows(2) {
        assert!((w[0].tier, w[0].cost) <= (w[1].tier, w[1].cost), "{id}: ranked by tier then cost");
    }
    for f in &fixes {
        assert_eq!(f.device_total_bytes, total(&spec, &f.config, &f.dist), "{id}: {:?}", f.changes);
        assert!(f.device_total_bytes <= cap && f.margin_bytes == cap - f.device_total_bytes);
        // minimal: dropping any change breaks the fit
        for skip in 0..f.changes.len() {
            let rest: Vec<Change> = f.changes.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, c)| *c).collect();
            assert!(with(&setup, &rest).is_none_or(|t| t > cap), "{id}: {:?} is not minimal", f.changes);
        }
    }
    // the fix for a capacity that fits already: none
    assert!(fix::fixes(&setup, u64::MAX / 2, &options).unwrap().is_empty());
}

#[test]
fn no_single_change_fits_but_a_pair_does() {
    check_pair_case("gpt2", TrainConfig { batch: 8, seq_len: Some(512), ..TrainConfig::default() });
    check_pair_case("qwen2.5-0.5b", TrainConfig { batch: 4, seq_len: Some(256), precision: Precision::Bf16, ..TrainConfig::default() });
}

/// With more GPUs allowed, they rank after every fix of the first two tiers, and the offload
/// change comes only with a ZeRO job.
#[test]
fn more_gpus_rank_last_and_offload_needs_zero() {
    let spec = vramcalc_core::import::preset("qwen2.5-0.5b").unwrap();
    // fp32 AdamW at a short sequence: the model states dominate, which sharding divides
    let setup = Setup::new(&spec, TrainConfig { batch: 1, seq_len: Some(64), ..TrainConfig::default() });
    let base = total(&spec, &setup.config, &setup.dist);
    let fixes = fix::fixes(&setup, base * 2 / 5, &FixOptions { max_changes: 2, max_gpus: 4, top: 30 }).unwrap();
    let tiers: Vec<Tier> = fixes.iter().map(|f| f.tier).collect();
    assert!(tiers.windows(2).all(|w| w[0] <= w[1]), "{tiers:?}");
    for f in &fixes {
        if f.changes.contains(&Change::OffloadOptimizer) {
            assert!(f.changes.iter().any(|c| matches!(c, Change::Gpus(_, vramcalc_core::distributed::Strategy::Zero2 | vramcalc_core::distributed::Strategy::Zero3))), "{:?}", f.changes);
        }
    }
    assert!(fixes.iter().any(|f| f.tier == Tier::MoreGpus), "{tiers:?}");
}

/// Generation: the KV cache changes and smaller weights.
#[test]
fn generation_fixes_use_the_kv_cache_and_weights() {
    let spec = vramcalc_core::import::preset("qwen2.5-0.5b").unwrap();
    let generate = vramcalc_core::GenerateConfig { prompt_len: Some(2048), new_tokens: 64, ..Default::default() };
    let setup = Setup::new(&spec, TrainConfig { batch: 16, mode: Mode::Generate, precision: Precision::Bf16, generate, ..TrainConfig::default() });
    let ids: Vec<String> = fix::candidates(&setup, &FixOptions::default()).iter().map(|c| c.id()).collect();
    for id in ["paged-kv-cache", "fp8-kv-cache", "weights-int8", "halve-seq", "halve-batch", "2-gpus-tp"] {
        assert!(ids.contains(&id.to_string()), "{id} not in {ids:?}");
    }
    assert!(!ids.contains(&"checkpointing".to_string()));
    let base = total(&spec, &setup.config, &setup.dist);
    let fixes = fix::fixes(&setup, base * 3 / 4, &FixOptions { max_gpus: 1, ..FixOptions::default() }).unwrap();
    assert!(!fixes.is_empty());
    assert!(fixes.iter().all(|f| f.device_total_bytes <= base * 3 / 4));
}
