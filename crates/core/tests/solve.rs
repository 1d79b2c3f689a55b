//! The solver against a brute-force scan, on every preset at several settings.
//!
//! For each preset and setting a capacity is chosen between the device totals at the two ends
//! of a window of values; the scan estimates every value of the window with the full estimate
//! (`vramcalc_core::distributed::estimate`, never the solver's shortcuts), checks that the
//! totals are monotone there, and takes the largest that fits. The solver, which searches the
//! whole range from its own start, must give the same value (or, where the whole window fits,
//! at least its end). Windows are kept small so the debug build runs this in reasonable time.

use vramcalc_core::distributed::{DistConfig, Strategy};
use vramcalc_core::presets::{Family, PRESETS};
use vramcalc_core::serve::{self, ServeConfig};
use vramcalc_core::solve::{self, Setup, Variable};
use vramcalc_core::{GenerateConfig, Mode, ModelSpec, Precision, TrainConfig};

/// The real estimate's device total (`None`: the setup is refused).
fn total(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig) -> Option<u64> {
    vramcalc_core::distributed::estimate(spec, config, dist).ok().map(|e| e.estimate.device_total_bytes)
}

/// Scans `values` with `total_at`, asserts the totals never fall, and returns the capacity chosen
/// 3/7 of the way from the first total to the last, with the largest value that fits it.
fn scan(what: &str, values: &[u64], mut total_at: impl FnMut(u64) -> u64) -> (u64, Option<u64>) {
    let totals: Vec<u64> = values.iter().map(|&v| total_at(v)).collect();
    for w in totals.windows(2) {
        assert!(w[0] <= w[1], "{what}: the device total falls along {values:?}: {totals:?}");
    }
    let (first, last) = (totals[0], *totals.last().unwrap());
    let cap = first + (last - first) / 7 * 3;
    let best = values.iter().zip(&totals).rfind(|&(_, &t)| t <= cap).map(|(&v, _)| v);
    (cap, best)
}

/// Checks the solver's answer against the scan's.
fn check(what: &str, setup: &Setup, of: Variable, values: &[u64], cap: u64, best: Option<u64>) {
    let got = solve::max_value(setup, of, cap);
    let end = *values.last().unwrap();
    match best {
        None => assert!(values[0] > 1 || got.is_err(), "{what}: nothing fits, the solver says {got:?}"),
        Some(b) if b == end => assert!(got.unwrap().value >= b, "{what}: the whole window fits"),
        Some(b) => {
            let a = got.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(a.value, b, "{what}: solver {} vs scan {b} (cap {cap})", a.value);
            assert!(a.device_total_bytes <= cap && a.margin_bytes == cap - a.device_total_bytes, "{what}");
            let l = a.limit.as_ref().unwrap();
            assert!(l.value == b + 1 && l.device_total_bytes > cap, "{what}: {l:?}");
            assert!(!l.phase.is_empty() && !l.category.is_empty(), "{what}: {l:?}");
        }
    }
}

fn is_lm(f: Family) -> bool {
    matches!(f, Family::Llm | Family::Moe)
}

/// The presets the debug build checks in full; a release build (`cargo test --release`) checks all.
fn presets() -> Vec<&'static vramcalc_core::presets::PresetInfo> {
    let big = ["llama-3.1-70b", "qwen2.5-72b", "deepseek-v3", "mixtral-8x7b"];
    PRESETS.iter().filter(|p| !cfg!(debug_assertions) || !big.contains(&p.id)).collect()
}

#[test]
fn batch_equals_a_scan_on_every_preset() {
    let mut checked = 0;
    for p in presets() {
        let spec = vramcalc_core::import::preset(p.id).unwrap();
        let seq = p.default_seq_len.map(|s| s.min(64));
        for (mode, precision, grad_accum) in [(Mode::Train, Precision::AmpBf16, 1), (Mode::Train, Precision::Bf16, 2), (Mode::Infer, Precision::Bf16, 1)] {
            let config = TrainConfig { batch: 1, seq_len: seq, mode, precision, grad_accum, ..TrainConfig::default() };
            let values: Vec<u64> = (grad_accum..=grad_accum + 12).collect();
            let dist = DistConfig::default();
            if total(&spec, &TrainConfig { batch: values[0], ..config }, &dist).is_none() {
                continue;
            }
            let what = format!("{} batch {mode} {precision} accum {grad_accum}", p.id);
            let (cap, best) = scan(&what, &values, |b| total(&spec, &TrainConfig { batch: b, ..config }, &dist).unwrap());
            check(&what, &Setup { spec: &spec, config, dist }, Variable::Batch, &values, cap, best);
            checked += 1;
        }
    }
    assert!(checked >= 2 * presets().len(), "{checked}");
}

#[test]
fn seq_len_equals_a_scan_on_every_token_model() {
    let mut checked = 0;
    for p in presets().into_iter().filter(|p| p.default_seq_len.is_some()) {
        let spec = vramcalc_core::import::preset(p.id).unwrap();
        // an image-text model (Gemma 3) takes `--seq-len` as its prompt's length, but its input
        // is the image: the solver answers `--of seq-len` for sequence inputs only
        if spec.seq_len(None).is_none() {
            continue;
        }
        let config = TrainConfig { batch: 2, precision: Precision::AmpBf16, ..TrainConfig::default() };
        let dist = DistConfig::default();
        // from 1 (the solver's own lower end), and a window higher up
        for values in [(1..=12).collect::<Vec<u64>>(), (500..=510).collect()] {
            let what = format!("{} seq-len {}..", p.id, values[0]);
            let Some(_) = total(&spec, &TrainConfig { seq_len: Some(values[0]), ..config }, &dist) else { continue };
            let (cap, best) = scan(&what, &values, |s| total(&spec, &TrainConfig { seq_len: Some(s), ..config }, &dist).unwrap());
            check(&what, &Setup { spec: &spec, config, dist }, Variable::SeqLen, &values, cap, best);
            checked += 1;
        }
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn generation_lengths_equal_a_scan_on_every_language_model() {
    let mut checked = 0;
    // GLM-4.5-Air's device total once fell by 1.3 MB from prompt 7 to 8: the reserve was taken
    // from the phase of the higher allocated peak (prefill or last decode step), and the peak
    // moved from the prefill to the decode. The allocator keeps both phases' segments, so the
    // total is now the larger reserve of the two (`GenPlan::device_at`), monotone: checked here.
    // Qwen3-Next-80B-A3B's total once fell by 655,360 B from prompt 305 to 306 (batch 2, 8 new
    // tokens): the rounding was taken at the allocated peak, which moved to a sample holding less
    // of it. The allocator keeps its segments, so the rounded total is now the largest over the
    // forward's samples (`GenPlan::device_at`), monotone: checked here with the rest.
    for p in presets().into_iter().filter(|p| is_lm(p.family)) {
        let spec = vramcalc_core::import::preset(p.id).unwrap();
        let generate = GenerateConfig { prompt_len: Some(32), new_tokens: 8, ..GenerateConfig::default() };
        let config = TrainConfig { batch: 2, mode: Mode::Generate, precision: Precision::Bf16, generate, ..TrainConfig::default() };
        let dist = DistConfig::default();
        if total(&spec, &config, &dist).is_none() {
            // a model generate mode refuses by name (an image-text model's image tower)
            let err = vramcalc_core::distributed::estimate(&spec, &config, &dist).unwrap_err().to_string();
            eprintln!("{}: {err}", p.id);
            continue;
        }
        let with = |of: Variable, v: u64| {
            let mut c = config;
            match of {
                Variable::PromptLen => c.generate.prompt_len = Some(v),
                _ => c.generate.new_tokens = v,
            }
            c
        };
        for (of, values) in [(Variable::PromptLen, (1..=10).collect::<Vec<u64>>()), (Variable::NewTokens, (1..=10).collect()), (Variable::PromptLen, (300..=308).collect())] {
            let what = format!("{} {of} {}..", p.id, values[0]);
            let (cap, best) = scan(&what, &values, |v| total(&spec, &with(of, v), &dist).unwrap());
            check(&what, &Setup { spec: &spec, config, dist }, of, &values, cap, best);
            checked += 1;
        }
    }
    assert!(checked >= 9, "{checked}");
}

/// A multi-GPU job: rank 0 of ZeRO-3 and of FSDP2 on 4 GPUs, and tensor parallelism with
/// sequence parallelism (the sequence a multiple of the TP degree).
#[test]
fn a_sharded_job_equals_a_scan() {
    for id in ["gpt2", "qwen2.5-0.5b"] {
        let spec = vramcalc_core::import::preset(id).unwrap();
        let config = TrainConfig { batch: 1, seq_len: Some(64), precision: Precision::Bf16, ..TrainConfig::default() };
        for dist in [
            DistConfig { gpus: 4, strategy: Strategy::Zero3, ..DistConfig::default() },
            DistConfig { gpus: 4, strategy: Strategy::Fsdp, ..DistConfig::default() },
        ] {
            let values: Vec<u64> = (1..=10).collect();
            let what = format!("{id} batch {:?}", dist.strategy);
            let (cap, best) = scan(&what, &values, |b| total(&spec, &TrainConfig { batch: b, ..config }, &dist).unwrap());
            check(&what, &Setup { spec: &spec, config, dist }, Variable::Batch, &values, cap, best);
        }
    }
    let spec = vramcalc_core::import::preset("qwen2.5-0.5b").unwrap();
    let config = TrainConfig { batch: 2, seq_len: Some(64), precision: Precision::AmpBf16, ..TrainConfig::default() };
    let dist = DistConfig { gpus: 2, strategy: Strategy::Tp, sequence_parallel: true, ..DistConfig::default() };
    let setup = Setup { spec: &spec, config, dist };
    let values: Vec<u64> = (1..=12).map(|k| 2 * k).collect();
    let (cap, best) = scan("tp+sp seq", &values, |s| total(&spec, &TrainConfig { seq_len: Some(s), ..config }, &dist).unwrap());
    let a = solve::max_value(&setup, Variable::SeqLen, cap).unwrap();
    assert_eq!(Some(a.value), best);
    assert_eq!(a.value % 2, 0);
}

/// vLLM: the longest context at a concurrency and the most sequences at a context, against a
/// scan of `serve::capacity` (a value fits when its `max_concurrency` covers the sequences).
#[test]
fn serving_figures_equal_a_scan() {
    let mut checked = 0;
    for p in presets().into_iter().filter(|p| is_lm(p.family)) {
        let spec = vramcalc_core::import::preset(p.id).unwrap();
        let probe = ServeConfig { concurrency: Some(1), ..ServeConfig::new(143_771 << 20, 1024) };
        let Ok(c) = serve::capacity(&spec, &probe) else { continue };
        if c.max_concurrency == 0 {
            continue;
        }
        // a context where about 4 sequences fit: scan the most sequences around it
        let context = (c.max_context_at_concurrency.unwrap() / 4).max(1);
        let at = |ctx: u64| serve::capacity(&spec, &ServeConfig { context: ctx, ..probe }).unwrap().max_concurrency;
        let n = at(context);
        let a = solve::max_serving(&spec, &ServeConfig { context, ..probe }, Variable::Concurrency).unwrap();
        let scanned = (0..=n + 2).rfind(|&k| k == 0 || serve::request_bytes(&spec, &probe, context) * k <= a.capacity_bytes).unwrap();
        assert_eq!(a.value, scanned, "{} concurrency at {context}", p.id);
        // the longest context at 3 sequences, against every context in a window around it
        let cfg = ServeConfig { concurrency: Some(3), ..probe };
        let a = solve::max_serving(&spec, &cfg, Variable::Context).unwrap();
        if a.value == serve::MAX_CONTEXT {
            // every layer slides a window (Phi-3-mini's 2047): any context fits
            assert!(a.limit.is_none() && at(1 << 30) >= 3, "{}", p.id);
            continue;
        }
        let window: Vec<u64> = (a.value.saturating_sub(40).max(1)..=a.value + 40).collect();
        let scanned = window.iter().copied().rfind(|&ctx| at(ctx) >= 3).unwrap();
        assert!(window.iter().all(|&ctx| (at(ctx) >= 3) == (ctx <= scanned)), "{}: not monotone", p.id);
        assert_eq!(a.value, scanned, "{} context at 3", p.id);
        checked += 1;
    }
    assert!(checked >= 5, "{checked}");
}

#[test]
fn nothing_fits_is_a_clear_error() {
    let spec = vramcalc_core::import::preset("gpt2").unwrap();
    let setup = Setup::new(&spec, TrainConfig { batch: 4, seq_len: Some(128), ..TrainConfig::default() });
    for of in [Variable::Batch, Variable::SeqLen] {
        let e = solve::max_value(&setup, of, 100 << 20).unwrap_err().to_string();
        assert!(e.contains("does not fit") && e.contains(of.name()), "{e}");
    }
    let e = solve::max_value(&setup, Variable::PromptLen, 80 << 30).unwrap_err().to_string();
    assert!(e.contains("--mode generate"), "{e}");
    let e = solve::max_value(&setup, Variable::GpuLayers, 80 << 30).unwrap_err().to_string();
    assert!(e.contains("llama.cpp"), "{e}");
}

/// A sequence beyond BERT's 512 learned positions is refused: the answer stops there and the
/// limit names the reason, not memory.
#[test]
fn learned_positions_bound_the_sequence() {
    let spec = vramcalc_core::import::preset("bert-base").unwrap();
    let setup = Setup::new(&spec, TrainConfig { batch: 1, ..TrainConfig::default() });
    let a = solve::max_value(&setup, Variable::SeqLen, 80 << 30).unwrap();
    assert_eq!(a.value, 512);
    let l = a.limit.unwrap();
    assert!(l.at.contains("512 learned positions"), "{l:?}");
}

/// The solver's one-simulation totals (`Prepared::peak_once`: the rounding counted as the
/// simulation goes) equal the estimate's (the batch envelope's snapshot at the peak).
#[test]
fn one_simulation_totals_equal_the_envelope() {
    use vramcalc_core::finetune::{FineTune, Method};
    let mut checked = 0;
    for p in presets() {
        let spec = vramcalc_core::import::preset(p.id).unwrap();
        let seq = p.default_seq_len.map(|s| s.min(96));
        let qlora = FineTune { method: Method::Qlora, lora_r: 16, lora_targets: vramcalc_core::resolve::proposed_lora_targets(&spec), ..FineTune::default() };
        for config in [
            TrainConfig { batch: 3, seq_len: seq, precision: Precision::AmpBf16, ..TrainConfig::default() },
            TrainConfig { batch: 4, grad_accum: 2, seq_len: seq, precision: Precision::Bf16, checkpointing: true, ..TrainConfig::default() },
            TrainConfig { batch: 2, seq_len: seq, precision: Precision::Bf16, finetune: qlora, ..TrainConfig::default() },
            TrainConfig { batch: 2, seq_len: seq, mode: Mode::Infer, precision: Precision::Bf16, ..TrainConfig::default() },
        ] {
            let Ok(prepared) = vramcalc_core::Prepared::new(&spec, &config) else { continue };
            let once = vramcalc_core::Prepared::peak_once(&spec, &config).unwrap();
            assert_eq!(once, prepared.peak_at(config.batch), "{} {config:?}", p.id);
            checked += 1;
        }
    }
    assert!(checked >= 3 * presets().len(), "{checked}");
}
