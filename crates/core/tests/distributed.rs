//! One rank of a multi-GPU job (`vramcalc_core::distributed`).
//!
//! Accuracy: `tests/data/fsdp.jsonl` is `shared/reference/llm/fsdp.jsonl` as it is (FSDP2 per-rank
//! records of `LlamaForCausalLM` h1024/l4, AdamW, batch 2, seq 512, measured with PyTorch's
//! `FSDPMemTracker` on a fake process group, torch 2.15; method in that folder's README, section C).

mod common;
use common::reference::{cases_from, rel_err};
use serde_json::Value;
use vramcalc_core::distributed::{self, DistConfig, MpDtype, Offload, Strategy};
use vramcalc_core::{ModelSpec, Precision, TrainConfig};

const FSDP: &str = include_str!("data/fsdp.jsonl");

fn dist_of(r: &Value) -> DistConfig {
    let d = &r["distributed"];
    let strategy = match d["strategy"].as_str().unwrap() {
        "fsdp2" => Strategy::Fsdp,
        "ddp" => Strategy::Ddp,
        "none" => Strategy::Ddp,
        s => panic!("unknown strategy {s}"),
    };
    let dt = |k: &str| d[k].as_str().map(|s| MpDtype::parse(s).unwrap());
    DistConfig {
        gpus: d["world_size"].as_u64().unwrap(),
        strategy,
        reshard_after_forward: d["reshard_after_forward"].as_bool().unwrap_or(true),
        gradient_as_bucket_view: d["gradient_as_bucket_view"].as_bool().unwrap_or(false),
        fsdp_param_dtype: dt("mp_param_dtype"),
        fsdp_reduce_dtype: dt("mp_reduce_dtype"),
        ..DistConfig::default()
    }
}

/// Every record within 3 %, the median within 1 %; the peak's phase right.
#[test]
fn fsdp2_ddp_and_baseline_records_per_rank() {
    let cases = cases_from(FSDP);
    let records: Vec<Value> = FSDP.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(records.len() >= 9);
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for (c, r) in cases.iter().zip(&records) {
        let d = dist_of(r);
        let e = distributed::estimate(&c.spec, &c.config, &d).unwrap();
        let err = rel_err(e.estimate.peak_bytes, c.measured);
        let line = format!(
            "{} W={} raf={} mp={:?}: est {} measured {} ({:+.2} %), {} vs {}",
            d.strategy.name(), d.gpus, d.reshard_after_forward, d.fsdp_param_dtype, e.estimate.peak_bytes, c.measured, err * 100.0,
            e.estimate.peak_phase.name(), c.measured_phase
        );
        eprintln!("{line}");
        if err.abs() > 0.03 || e.estimate.peak_phase.name() != c.measured_phase {
            failures.push(line);
        }
        errs.push(err.abs());
    }
    errs.sort_by(f64::total_cmp);
    let median = errs[errs.len() / 2];
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
}
