//! Mamba, Mamba-2 (`llama_memory_recurrent`) and granitehybrid (`llama_memory_hybrid`: the KV
//! cache for the attention layers, the recurrent state for the others) against llama.cpp's
//! logged buffers on the CPU backend (`tools/llama_cpp/measure_recurrent.py` ->
//! `data/llama_cpp/recurrent.jsonl`; the `ho-` models are held out: other sizes, types, group
//! counts, experts with a shared one, tied outputs). granite and granitemoe (Granite 3.x:
//! granitehybrid's graph without recurrent layers) are measured by the same script.
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
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    (num("R (f32):"), num("S (f32):"))
}

/// Every buffer of every run to the byte: model, KV, recurrent state (and the log's R and S to
/// its 0.01 MiB), output, the compute buffer (the graph of `ssm.rs` allocated by `gallocr`) and the
/// total. `recurrent_fresh.jsonl` holds settings measured only after the graphs were written
/// (32 k context with `-ub 2048`, a unified memory of two sequences at `-ub 64`, five sequences).
#[test]
fn every_buffer_is_exact() {
    for (file, min) in [("recurrent.jsonl", 55), ("recurrent_fresh.jsonl", 33)] {
        let recs = common::records_of(file);
        assert!(recs.len() >= min, "{file}");
        for r in &recs {
            let p = common::params(&r.v);
            let e = estimate(&r.header, &p, &[], None).unwrap();
            let what = format!("{file} {} {}", r.model, r.v["params"]);
            assert_eq!(e.model_bytes(), sum(&r.v["model_buffers"]), "model {what}");
            assert_eq!(e.rs_bytes(), sum(&r.v["rs_buffers"]), "RS {what}");
            assert_eq!(e.kv_bytes(), sum(&r.v["kv_buffers"]), "KV {what}");
            assert_eq!(e.output_bytes(), sum(&r.v["output_buffers"]), "output {what}");
            let (got, want) = (e.compute_bytes(), sum(&r.v["compute_buffers"]));
            assert_eq!(got, want, "compute {what} ({:+.3} %)", 100.0 * (got as f64 / want as f64 - 1.0));
            let all = ["model_buffers", "kv_buffers", "rs_buffers", "compute_buffers", "output_buffers"].iter().map(|k| sum(&r.v[*k])).sum::<u64>();
            assert_eq!(e.total(), all, "total {what}");
            // granite and granitemoe (no recurrent layers) log no state.
            if let Some(line) = r.v["rs_lines"][0].as_str() {
                let (rm, sm) = rs_line_mib(line);
                let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
                assert!((mib(e.devices[0].r) - rm).abs() < 0.006 && (mib(e.devices[0].s) - sm).abs() < 0.006, "R/S {what}");
            } else {
                assert_eq!(e.rs_bytes(), 0, "{what}");
            }
        }
    }
}

/// With a GPU the state follows its layer (`offload_kqv`): `-ngl 2` of a 4-layer model puts the
/// state of layers 2 and 3 on it, and the whole state with every layer offloaded.
#[test]
fn recurrent_state_follows_the_layers() {
    use vramcalc_core::llama_cpp::{GpuDevice, Params};
    let r = common::records_of("recurrent.jsonl").into_iter().find(|r| r.model == "mamba-q8_0").unwrap();
    let gpu = GpuDevice { name: "gpu".into(), capacity: 24 << 30 };
    let cpu = estimate(&r.header, &common::params(&r.v), &[], None).unwrap();
    let half = estimate(&r.header, &Params { n_gpu_layers: Some(3), ..common::params(&r.v) }, std::slice::from_ref(&gpu), None).unwrap();
    let all = estimate(&r.header, &common::params(&r.v), &[gpu], None).unwrap();
    assert_eq!(half.devices[1].rs(), cpu.rs_bytes() / 2);
    assert_eq!(half.devices[0].rs(), cpu.rs_bytes() / 2);
    assert_eq!(all.devices[1].rs(), cpu.rs_bytes());
}
