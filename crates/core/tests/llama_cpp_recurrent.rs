//! Mamba and Mamba-2 (`llama_memory_recurrent`) against llama.cpp's logged buffers on the CPU
//! backend (`tools/llama_cpp/measure_recurrent.py` -> `data/llama_cpp/recurrent.jsonl`; the
//! `ho-` model is held out: another size, type, group count and a tied output).
mod llama_cpp_common;
use llama_cpp_common as common;
use vramcalc_core::llama_cpp::estimate;

fn sum(v: &serde_json::Value) -> u64 {
    v.as_object().map_or(0, |m| m.values().map(|x| x.as_u64().unwrap()).sum())
}

/// "R (f32):    0.05 MiB, S (f32):    0.25 MiB" of the summary line.
fn rs_line_mib(line: &str) -> (f64, f64) {
    let num = |tag: &str| -> f64 {
        let rest = &line[line.find(tag).unwrap() + tag.len()..];
        rest.trim_start().split_whitespace().next().unwrap().parse().unwrap()
    };
    (num("R (f32):"), num("S (f32):"))
}

#[test]
fn recurrent_state_model_and_output_buffers_are_exact() {
    let recs = common::records_of("recurrent.jsonl");
    assert!(recs.len() >= 15);
    for r in &recs {
        let p = common::params(&r.v);
        let e = estimate(&r.header, &p, &[], None).unwrap();
        let what = format!("{} {}", r.model, r.v["params"]);
        assert_eq!(e.model_bytes(), sum(&r.v["model_buffers"]), "model {what}");
        assert_eq!(e.rs_bytes(), sum(&r.v["rs_buffers"]), "RS {what}");
        assert_eq!(e.kv_bytes(), 0, "{what}");
        assert_eq!(e.output_bytes(), sum(&r.v["output_buffers"]), "output {what}");
        let (rm, sm) = rs_line_mib(r.v["rs_lines"][0].as_str().unwrap());
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        assert!((mib(e.devices[0].r) - rm).abs() < 0.006 && (mib(e.devices[0].s) - sm).abs() < 0.006, "R/S {what}");
    }
}

#[test]
fn recurrent_compute_buffers() {
    let recs = common::records_of("recurrent.jsonl");
    for r in &recs {
        let p = common::params(&r.v);
        let e = estimate(&r.header, &p, &[], None).unwrap();
        let m = sum(&r.v["compute_buffers"]);
        let err = e.compute_bytes() as f64 / m as f64 - 1.0;
        println!("{} {} compute {} measured {m} ({:+.2} %)", r.model, r.v["params"], e.compute_bytes(), 100.0 * err);
    }
}
