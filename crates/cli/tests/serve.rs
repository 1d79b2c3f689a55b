//! `vramcalc serve` and `estimate --weights` (issue 14): the flags scripts call, the JSON they
//! read, and a `quantization_config` choosing the weights' format.

use serde_json::Value;
use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn json(args: &[&str]) -> Value {
    let (code, out, err) = vramcalc(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

fn tinyllama() -> String {
    format!("{}/../core/tests/data/tinyllama-1.1b.config.json", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn serve_reports_the_kv_pool_and_its_parts() {
    let path = tinyllama();
    let v = json(&["serve", "--hf-config", &path, "--gpu", "h100-80gb", "--context", "8192", "--json"]);
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert_eq!(v["cuda_graph_in_budget"], false);
    assert_eq!(n("requested_bytes"), n("weights_bytes") + n("activation_peak_bytes") + n("non_torch_bytes") + n("kv_pool_bytes"));
    let est = json(&["serve", "--hf-config", &path, "--gpu", "h100-80gb", "--context", "8192", "--estimate-cudagraphs", "--json"]);
    assert_eq!(est["kv_pool_bytes"].as_u64().unwrap(), n("kv_pool_bytes") - n("cuda_graph_bytes"));
    assert_eq!(n("kv_tokens"), 16 * n("num_blocks"));
    assert_eq!(n("max_concurrency"), n("num_blocks") / 512);
    assert_eq!(v["modelled"].as_array().unwrap().len(), 4);
    let fp8 = json(&["serve", "--hf-config", &path, "--gpu", "h100-80gb", "--context", "8192", "--kv-dtype", "fp8", "--json"]);
    assert!(fp8["kv_tokens"].as_u64().unwrap() >= 2 * n("kv_tokens"));
    let tp = json(&["serve", "--hf-config", &path, "--gpu", "l4", "--context", "4096", "--tp", "2", "--concurrency", "8",
        "--gpu-memory-utilization", "0.8", "--max-num-batched-tokens", "4096", "--json"]);
    assert_eq!(tp["tensor_parallel"], 2);
    assert!(tp["max_context_at_concurrency"].as_u64().unwrap() > 4096);
    // the memory CUDA reports instead of the nominal size
    let own = json(&["serve", "--hf-config", &path, "--gpu", "h100-80gb", "--gpu-memory", "79.22GiB", "--context", "8192", "--json"]);
    assert_eq!(own["gpu_bytes"].as_u64().unwrap(), (79.22 * (1u64 << 30) as f64).round() as u64);
    assert!(own["kv_tokens"].as_u64().unwrap() < n("kv_tokens"));
    let (code, text, _) = vramcalc(&["serve", "--preset", "gpt2", "--gpu", "rtx-4090", "--context", "1024"]);
    assert_eq!(code, 0);
    assert!(text.contains("KV cache pool") && text.contains("Concurrent sequences at 1,024 tokens"), "{text}");
}

#[test]
fn a_quantization_config_selects_the_weights() {
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(tinyllama()).unwrap()).unwrap();
    c["quantization_config"] = serde_json::json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"});
    let path = std::env::temp_dir().join(format!("vramcalc-awq-{}.json", std::process::id()));
    std::fs::write(&path, c.to_string()).unwrap();
    let p = path.to_str().unwrap();
    let awq = json(&["serve", "--hf-config", p, "--gpu", "a10", "--context", "2048", "--json"]);
    assert_eq!(awq["weights_format"], "awq-int4");
    let plain = json(&["serve", "--hf-config", &tinyllama(), "--gpu", "a10", "--context", "2048", "--json"]);
    assert!(awq["weights_bytes"].as_u64().unwrap() * 2 < plain["weights_bytes"].as_u64().unwrap());
    let est = json(&["estimate", "--hf-config", p, "--mode", "infer", "--precision", "fp16", "--batch", "1", "--json"]);
    assert_eq!(est["config"]["weights"], "awq-int4");
    c["quantization_config"] = serde_json::json!({"quant_method": "hqq"});
    std::fs::write(&path, c.to_string()).unwrap();
    let (code, _, err) = vramcalc(&["serve", "--hf-config", p, "--gpu", "a10", "--context", "2048"]);
    std::fs::remove_file(&path).ok();
    assert_ne!(code, 0);
    assert!(err.contains("hqq"), "{err}");
}

#[test]
fn estimate_weights_flag() {
    let base = ["estimate", "--preset", "gpt2", "--mode", "infer", "--precision", "fp16", "--batch", "1", "--json"];
    let fp16 = json(&base);
    let mut args = base.to_vec();
    args.extend(["--weights", "gguf-q4_k_m"]);
    let q4 = json(&args);
    let (a, b) = (fp16["param_bytes"].as_u64().unwrap(), q4["param_bytes"].as_u64().unwrap());
    assert!(b * 2 < a && b * 4 > a, "fp16 {a}, q4_k_m {b}");
    let (code, _, err) = vramcalc(&["estimate", "--preset", "gpt2", "--weights", "nf4"]);
    assert_ne!(code, 0);
    assert!(err.contains("inference"), "{err}");
    let (code, _, err) = vramcalc(&["estimate", "--preset", "gpt2", "--mode", "infer", "--weights", "int3"]);
    assert_ne!(code, 0);
    assert!(err.contains("int3") && err.contains("awq-int4"), "{err}");
    let (code, _, err) = vramcalc(&["serve", "--preset", "gpt2", "--gpu", "h900", "--context", "1024"]);
    assert_ne!(code, 0);
    assert!(err.contains("h900"), "{err}");
}
