//! Prints the accuracy of `--mode generate` against the measured `generate()` records (README's
//! table): `cargo run --release -p vramcalc-core --example generate_table`.

#[path = "../tests/common/generate.rs"]
mod generate;

fn main() {
    let pct = |e: u64, m: u64| generate::rel(e, m) * 100.0;
    println!("| record | measured peak | estimated | error | prefill error | decode error | KV cache at the end |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut errs = Vec::new();
    for r in generate::all() {
        let e = vramcalc_core::estimate(&r.spec, &r.config).expect("a record's setup estimates");
        let Some(g) = e.generation.as_ref() else { continue };
        let err = pct(e.peak_bytes, r.peak);
        errs.push(err.abs());
        println!(
            "| {} | {} | {} | {:+.2} % | {:+.2} % | {:+.2} % | {} ({:+.2} %) |",
            r.label,
            vramcalc_core::thousands(r.peak),
            vramcalc_core::thousands(e.peak_bytes),
            err,
            pct(g.prefill_peak_bytes, r.prefill),
            pct(g.decode_peak_bytes, r.decode),
            vramcalc_core::thousands(g.kv_cache_bytes),
            pct(g.kv_cache_bytes, r.kv_end),
        );
    }
    errs.sort_by(|a, b| a.total_cmp(b));
    println!();
    println!(
        "{} records: median error {:.2} %, largest {:.2} %",
        errs.len(),
        errs.get(errs.len() / 2).copied().unwrap_or(0.0),
        errs.last().copied().unwrap_or(0.0)
    );
}
