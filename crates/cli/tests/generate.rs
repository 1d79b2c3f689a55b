//! `vramcalc estimate --mode generate`: the flag names scripts call (issue 14) and the JSON fields.

use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

const GPT2: &[&str] = &["estimate", "--preset", "gpt2", "--mode", "generate", "--batch", "4", "--precision", "fp16", "--attention", "sdpa", "--device", "cuda"];

fn generate(extra: &[&str]) -> serde_json::Value {
    let args: Vec<&str> = GPT2.iter().chain(extra).chain(&["--json"]).copied().collect();
    let (code, out, err) = vramcalc(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn generate_json_has_the_documented_fields() {
    let v = generate(&["--prompt-len", "512", "--new-tokens", "128", "--kv-cache", "dynamic", "--logits-to-keep", "1", "--kv-dtype", "fp16"]);
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}"));
    assert_eq!(n("peak_bytes"), n("prefill_peak_bytes").max(n("decode_peak_bytes")));
    // GPT-2: 12 layers, 12 heads of 64, fp16, batch 4, 512 + 128 − 1 tokens
    assert_eq!(n("kv_cache_bytes"), 2 * 12 * 12 * 64 * 2 * 4 * 639);
    let b = &v["breakdown"];
    let sum: u64 = ["parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries", "input", "kv_cache"]
        .iter()
        .map(|k| b[*k].as_u64().unwrap_or_else(|| panic!("breakdown.{k}")))
        .sum();
    assert_eq!(sum, n("peak_bytes"));
    assert!(b["kv_cache"].as_u64().unwrap() > 0);
    assert_eq!(v["decode_series"].as_array().unwrap().len(), 127);
    assert_eq!(v["config"]["generate"]["cache"], "dynamic");
}

#[test]
fn each_generate_flag_changes_what_it_should() {
    let base = generate(&["--prompt-len", "512", "--new-tokens", "128"]);
    let kv = |v: &serde_json::Value| v["kv_cache_bytes"].as_u64().unwrap();
    let fp8 = generate(&["--prompt-len", "512", "--new-tokens", "128", "--kv-dtype", "fp8"]);
    assert_eq!(kv(&fp8) * 2, kv(&base));
    let paged = generate(&["--prompt-len", "512", "--new-tokens", "128", "--kv-cache", "paged"]);
    assert_eq!(kv(&paged), kv(&base) / 639 * 640);
    let fixed = generate(&["--prompt-len", "512", "--new-tokens", "128", "--kv-cache", "static"]);
    assert_eq!(fixed["kv_cache_bytes_after_prefill"], fixed["kv_cache_bytes"]);
    let all = generate(&["--prompt-len", "512", "--new-tokens", "128", "--logits-to-keep", "0"]);
    // the logits of every position (4 × 512 × 50,257 fp16) on top of weights and cache
    let floor = all["param_bytes"].as_u64().unwrap() + all["kv_cache_bytes_after_prefill"].as_u64().unwrap() + 4 * 512 * 50257 * 2;
    assert!(all["prefill_peak_bytes"].as_u64().unwrap() > floor.max(base["prefill_peak_bytes"].as_u64().unwrap()));
}

#[test]
fn generate_what_ifs_and_errors() {
    let args: Vec<&str> = GPT2.iter().chain(&["--prompt-len", "256", "--new-tokens", "64", "--what-if"]).copied().collect();
    let (code, out, err) = vramcalc(&args);
    assert_eq!(code, 0, "{err}");
    for line in ["prefill peak", "decode peak", "KV cache", "halve the prompt", "fp8 KV cache"] {
        assert!(out.contains(line), "{line} missing:\n{out}");
    }
    // a static cache of P + G slots saves nothing against this dynamic one: not offered
    assert!(!out.contains("static KV cache"), "{out}");
    for (flag, value, says) in [("--kv-cache", "ring", "--kv-cache \"ring\""), ("--kv-dtype", "fp4", "--kv-dtype \"fp4\""), ("--logits-to-keep", "2", "--logits-to-keep 2")] {
        let args: Vec<&str> = GPT2.iter().chain(&[flag, value]).copied().collect();
        let (code, _, err) = vramcalc(&args);
        assert_eq!(code, 2, "{flag} {value}");
        assert!(err.contains(says), "{err}");
    }
}
