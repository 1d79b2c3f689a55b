//! The reverse views' logic (issue 26), pure and natively tested: which reverse question each
//! mode asks (`variables`) and its answer from the core's solver (`answer`), the cheapest fixes,
//! the "what fits my GPU" rows and their links (`fits`), the command that runs the setup
//! (`launch`) and the measurement script with the pasted figure (`measure`).
//! `components::reverse` draws them.

pub mod fits;
pub mod launch;
pub mod measure;

use crate::llm::answers::{serve_config, serve_context};
use crate::state::SetupMode;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::solve::fix::{self, Fix, FixOptions};
use vramcalc_core::solve::{self, Answer, Setup, Variable};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::TrainConfig;

/// The reverse questions of a mode, in the order shown: the largest batch (concurrency for
/// vLLM) and the length the mode is sized by.
pub fn variables(mode: SetupMode, spec: &ModelSpec) -> Vec<Variable> {
    let seq = spec.seq_len(None).is_some();
    match mode {
        SetupMode::Train | SetupMode::FineTune | SetupMode::Infer => {
            if seq { vec![Variable::Batch, Variable::SeqLen] } else { vec![Variable::Batch] }
        }
        SetupMode::Generate => vec![Variable::Batch, Variable::PromptLen, Variable::NewTokens],
        SetupMode::Serve => vec![Variable::Context, Variable::Concurrency],
    }
}

/// The largest value of `of` that fits `capacity` bytes: the CLI's `vramcalc max --of …` (vLLM's
/// context at the page's concurrency, its concurrency at the page's context, from
/// `llm::answers::serve_config`); the error is the solver's ("does not fit: …").
pub fn answer(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, capacity: u64, of: Variable) -> Result<Answer, String> {
    if of.is_serving() {
        return solve::max_serving(spec, &serve_config(spec, c, d, capacity), of).map_err(|e| e.to_string());
    }
    solve::max_value(&Setup { spec, config: *c, dist: *d }, of, capacity).map_err(|e| e.to_string())
}

/// The value `of` has in the setup now (what the answer is compared with).
pub fn current(spec: &ModelSpec, c: &TrainConfig, of: Variable) -> Option<u64> {
    match of {
        Variable::Concurrency => Some(c.batch),
        Variable::Context => Some(serve_context(spec, c)),
        _ => Setup::new(spec, *c).current(of),
    }
}

/// `c` with `of` set to `value` (the answer's "use it").
pub fn with_value(spec: &ModelSpec, c: &TrainConfig, of: Variable, value: u64) -> TrainConfig {
    match of {
        Variable::Concurrency => TrainConfig { batch: value.max(1), ..*c },
        Variable::Context => TrainConfig { seq_len: Some(value.max(1)), ..*c },
        _ => Setup::new(spec, *c).at(of, value).map(|s| s.config).unwrap_or(*c),
    }
}

/// The cheapest fixes the page offers: sets of up to three changes, more GPUs up to 8, the
/// five cheapest (the CLI's `vramcalc fix` defaults but the count). Empty when the setup fits
/// or nothing within that fits; `None` when the setup itself is refused.
pub fn fixes(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, capacity: u64) -> Option<Vec<Fix>> {
    let options = FixOptions { top: FIXES_SHOWN, ..FixOptions::default() };
    fix::fixes(&Setup { spec, config: *c, dist: *d }, capacity, &options).ok()
}

/// [`fixes`] one estimate at a time (the core's `fix::FixSearch`), awaiting `pause` before
/// each: the page yields between them (one per task), the same list in the end.
pub async fn fixes_stepped<F: std::future::Future<Output = ()>>(
    spec: &ModelSpec,
    c: &TrainConfig,
    d: &DistConfig,
    capacity: u64,
    pause: impl Fn() -> F,
) -> Option<Vec<Fix>> {
    let options = FixOptions { top: FIXES_SHOWN, ..FixOptions::default() };
    pause().await;
    let mut search = fix::FixSearch::new(&Setup { spec, config: *c, dist: *d }, capacity, &options).ok()?;
    loop {
        pause().await;
        if !search.step() {
            return Some(search.fixes());
        }
    }
}

/// How many fixes the page lists.
pub const FIXES_SHOWN: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Engine;

    fn gpt2() -> ModelSpec {
        vramcalc_core::presets::build("gpt2").unwrap()
    }

    /// One estimate per step gives the one-shot list (a setup no single change makes fit).
    #[test]
    fn the_stepped_fixes_are_the_one_shot_ones() {
        let spec = gpt2();
        let c = TrainConfig { batch: 8, seq_len: Some(1024), precision: vramcalc_core::Precision::Fp32, ..TrainConfig::default() };
        let d = DistConfig::default();
        let total = Setup::new(&spec, c).totals().unwrap().1;
        let steps = std::cell::Cell::new(0);
        for cap in [total / 2, total / 4, total + 1] {
            let stepped = crate::test_util::block_on(fixes_stepped(&spec, &c, &d, cap, || {
                steps.set(steps.get() + 1);
                std::future::ready(())
            }));
            assert_eq!(stepped, fixes(&spec, &c, &d, cap), "cap {cap}");
        }
        assert!(steps.get() > 6, "{}", steps.get());
    }

    #[test]
    fn every_mode_asks_its_own_reverse_questions() {
        let (spec, cnn) = (gpt2(), vramcalc_core::presets::build("resnet18").unwrap());
        assert_eq!(variables(SetupMode::Train, &spec), [Variable::Batch, Variable::SeqLen]);
        assert_eq!(variables(SetupMode::Train, &cnn), [Variable::Batch]);
        assert_eq!(variables(SetupMode::Generate, &spec), [Variable::Batch, Variable::PromptLen, Variable::NewTokens]);
        assert_eq!(variables(SetupMode::Serve, &spec), [Variable::Context, Variable::Concurrency]);
    }

    /// Each answer is the largest value that fits: it fits, one more does not (a scan's answer),
    /// for every mode's variables.
    #[test]
    fn each_answer_fits_and_one_more_does_not() {
        let spec = gpt2();
        let d = DistConfig::default();
        let cap = 6u64 << 30;
        let base = TrainConfig { batch: 2, seq_len: Some(512), ..TrainConfig::default() };
        for mode in [SetupMode::Train, SetupMode::FineTune, SetupMode::Generate] {
            let c = mode.apply(&spec, &base);
            assert_eq!(SetupMode::of(&c, Engine::Pytorch), mode);
            for of in variables(mode, &spec) {
                let a = answer(&spec, &c, &d, cap, of).unwrap_or_else(|e| panic!("{mode:?} {of}: {e}"));
                let total = |v: u64| Setup::new(&spec, with_value(&spec, &c, of, v)).totals().map(|t| t.1).unwrap_or(u64::MAX);
                assert!(total(a.value) <= cap, "{mode:?} {of} {}", a.value);
                if a.limit.is_some() {
                    assert!(total(a.value + 1) > cap, "{mode:?} {of} {}", a.value);
                }
            }
        }
        // serving: the CLI's `vramcalc max --of concurrency` arithmetic
        let c = SetupMode::Serve.apply(&spec, &base);
        let a = answer(&spec, &c, &d, 24 << 30, Variable::Concurrency).unwrap();
        let cap = vramcalc_core::serve::capacity(&spec, &serve_config(&spec, &c, &d, 24 << 30)).unwrap();
        assert_eq!(a.value, cap.max_concurrency);
        assert_eq!(with_value(&spec, &c, Variable::Concurrency, 7).batch, 7);
        assert_eq!(current(&spec, &c, Variable::Context), Some(512));
    }

    #[test]
    fn a_setup_that_does_not_fit_gets_fixes_that_do() {
        let spec = gpt2();
        let c = TrainConfig { batch: 16, seq_len: Some(1024), ..TrainConfig::default() };
        let cap = 8u64 << 30;
        assert!(Setup::new(&spec, c).totals().unwrap().1 > cap);
        let f = fixes(&spec, &c, &DistConfig::default(), cap).unwrap();
        assert!(!f.is_empty() && f.len() <= FIXES_SHOWN);
        for x in &f {
            let (_, total) = Setup { spec: &spec, config: x.config, dist: x.dist }.totals().unwrap();
            assert!(total <= cap && x.device_total_bytes == total);
        }
        let fits = TrainConfig { batch: 1, seq_len: Some(128), ..c };
        assert_eq!(fixes(&spec, &fits, &DistConfig::default(), cap), Some(Vec::new()));
    }
}
