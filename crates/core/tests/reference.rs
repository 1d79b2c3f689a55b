//! Accuracy against peaks measured from real PyTorch training steps (`tests/data/reference.jsonl`,
//! copied from `shared/reference/data.jsonl`; method in that folder's README).
//!
//! Bars (issue 3): every record's peak within 3 %, median absolute error ≤ 1 %, and each
//! breakdown category within 5 % or 1 MB.

mod common;
use common::reference::{cases, cases_from, estimate, rel_err};

#[test]
fn every_record_is_within_three_percent_and_the_median_within_one() {
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for c in cases() {
        let e = estimate(&c);
        let err = rel_err(e.peak_bytes, c.measured);
        if err.abs() > 0.03 {
            failures.push(format!("{} {}: measured {} estimated {} ({:+.2} %)", c.label, c.setting, c.measured, e.peak_bytes, err * 100.0));
        }
        errs.push(err.abs());
    }
    errs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = errs[errs.len() / 2];
    assert!(failures.is_empty(), "{} records beyond 3 %:\n{}", failures.len(), failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
    assert_eq!(errs.len(), 166);
}

/// Records whose *category split* at the peak comes from a MemTracker artifact rather than
/// PyTorch's allocator. BERT b1 s512 eager: MemTracker's module hooks keep the GELU module's
/// output gradient (1×512×3072 fp32) alive through the intermediate linear's backward, moving the
/// peak 2.35 MB up to another op. A real CPU step (`measure.py --method profiler_cpu`, same model
/// without CUDA emulation) peaks at 1,252,829,312 B; vramcalc (`--device cpu`) says 1,252,825,116 B,
/// MemTracker 1,255,183,392 B. The peak itself is still checked by the other tests.
const MEMTRACKER_SPLIT_ARTIFACTS: &[(&str, &str)] = &[("bert-base", "b1 s512 adamw eager")];

#[test]
fn every_breakdown_category_is_within_five_percent_or_one_megabyte() {
    let mut failures = Vec::new();
    for c in cases() {
        if MEMTRACKER_SPLIT_ARTIFACTS.contains(&(c.label.as_str(), c.setting.as_str())) {
            continue;
        }
        let e = estimate(&c);
        for ((key, measured), (_, est)) in c.measured_breakdown.iter().zip(e.breakdown.entries()) {
            let diff = est.abs_diff(*measured);
            if diff > 1_000_000 && diff as f64 > 0.05 * *measured as f64 {
                failures.push(format!("{} {}: {key} measured {measured} estimated {est}", c.label, c.setting));
            }
        }
    }
    assert!(failures.is_empty(), "{} categories off:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn peak_phase_matches_where_the_peak_is_clear() {
    // Where two phases are within 0.5 % of each other the phase is a coin toss; elsewhere it must match.
    let mut failures = Vec::new();
    for c in cases() {
        let e = estimate(&c);
        let measured_phase = if c.measured_phase == "zero_grad" { "optimizer".to_string() } else { c.measured_phase.clone() };
        let mut sorted = e.phase_peaks;
        sorted.sort_unstable();
        let clear = sorted[2] as f64 > sorted[1] as f64 * 1.005;
        if clear && e.peak_phase.name() != measured_phase {
            failures.push(format!("{} {}: measured {} estimated {}", c.label, c.setting, c.measured_phase, e.peak_phase.name()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Configurations that are not in the shared reference file (other ResNet/VGG depths, BERT-large,
/// other batch sizes, sequence lengths, optimizers, fp16 autocast, BERT inference), measured for this repository with the same
/// method: `python measure.py --configs-json tests/data/reference_extra.configs.json --out …`
/// (torch 2.15.0, torchvision 0.29.2, transformers 5.24.0, `shared/reference/measure.py`).
#[test]
fn held_out_configurations_are_within_three_percent() {
    let held_out = cases_from(include_str!("data/reference_extra.jsonl"));
    assert_eq!(held_out.len(), 24);
    for c in held_out {
        let e = estimate(&c);
        let err = rel_err(e.peak_bytes, c.measured);
        assert!(err.abs() <= 0.03, "{} {}: measured {} estimated {} ({:+.2} %)", c.label, c.setting, c.measured, e.peak_bytes, err * 100.0);
    }
}
