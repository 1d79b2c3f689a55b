//! Prints the accuracy table against the measured PyTorch peaks (README's table):
//! `cargo run --release -p vramcalc-core --example reference_table [-v] [--data other.jsonl]`.

#[path = "../tests/common/reference.rs"]
mod reference;

use reference::{cases, cases_from, estimate, rel_err};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let verbose = args.iter().any(|a| a == "-v");
    let data = args.iter().position(|a| a == "--data").and_then(|i| args.get(i + 1));
    let mut errs = Vec::new();
    let mut thumb = Vec::new();
    println!("| model | setting | measured | estimated | error | phase (measured/estimated) |");
    println!("|---|---|---:|---:|---:|---|");
    let all = match data {
        Some(path) => cases_from(&std::fs::read_to_string(path).expect("reading --data")),
        None => cases(),
    };
    for c in all {
        let e = estimate(&c);
        let err = rel_err(e.peak_bytes, c.measured);
        errs.push(err.abs());
        thumb.push(rel_err(e.rule_of_thumb_bytes, c.measured).abs());
        println!(
            "| {} | {} | {} | {} | {:+.2} % | {}/{} |",
            c.label,
            c.setting,
            vramcalc_core::thousands(c.measured),
            vramcalc_core::thousands(e.peak_bytes),
            err * 100.0,
            c.measured_phase,
            e.peak_phase.name()
        );
        if verbose {
            for ((k, m), (_, est)) in c.measured_breakdown.iter().zip(e.breakdown.entries()) {
                if *m != est {
                    println!("|  | {k} | {} | {} | {:+.2} % | |", m, est, rel_err(est, (*m).max(1)) * 100.0);
                }
            }
            println!("|  | at | | | | {} |", e.peak_at);
            println!("|  | measured phase peaks | | | | {} |", c.measured_phase_peaks);
            println!("|  | phase peaks fwd/bwd/opt (est) | | | | {:?} |", e.phase_peaks);
        }
    }
    errs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = errs[errs.len() / 2];
    let max = errs.last().copied().unwrap_or(0.0);
    println!("\n{} records: median |error| {:.2} %, max |error| {:.2} %", errs.len(), median * 100.0, max * 100.0);
    thumb.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "rule of thumb (params × n + batch × outputs × 2 + input) on the same records: median |error| {:.1} %, max {:.1} %",
        thumb[thumb.len() / 2] * 100.0,
        thumb.last().copied().unwrap_or(0.0) * 100.0
    );
}
