//! `vramcalc max`, `estimate --fits`, `fix`, `fits` and `launch`, run as a user would.

use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn json_with_code(args: &[&str]) -> (i32, serde_json::Value) {
    let (code, out, err) = vramcalc(args);
    (code, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}")))
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, v) = json_with_code(args);
    assert_eq!(code, 0, "{v}");
    v
}

fn total(args: &[&str]) -> u64 {
    let mut a = vec!["estimate", "--json"];
    a.extend_from_slice(args);
    json(&a)["device_total_bytes"].as_u64().unwrap()
}

#[test]
fn fits_exits_0_when_it_fits_1_when_not_2_on_bad_input() {
    let (code, _, err) = vramcalc(&["estimate", "--preset", "gpt2", "--batch", "2", "--seq-len", "128", "--fits", "rtx-4090"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = vramcalc(&["estimate", "--preset", "gpt2", "--batch", "64", "--seq-len", "1024", "--fits", "rtx-3080"]);
    assert_eq!(code, 1);
    assert!(out.contains("does NOT fit rtx-3080"), "{out}");
    let (code, v) = json_with_code(&["estimate", "--preset", "gpt2", "--batch", "64", "--seq-len", "1024", "--fits", "rtx-3080", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(v["fits"]["fits"], false);
    assert!(v["fits"]["margin_bytes"].as_i64().unwrap() < 0);
    assert_eq!(v["fits"]["device_total_bytes"], v["device_total_bytes"]);
    // multi-GPU: rank 0's device total
    let (code, v) = json_with_code(&["estimate", "--preset", "gpt2", "--batch", "2", "--seq-len", "128", "--gpus", "4", "--strategy", "zero3", "--fits", "t4", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(v["fits"]["fits"], true);
    let (code, _, err) = vramcalc(&["estimate", "--preset", "gpt2", "--fits", "rtx-9999"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown GPU \"rtx-9999\""), "{err}");
    let (code, _, _) = vramcalc(&["estimate", "--preset", "gpt7", "--fits", "t4"]);
    assert_eq!(code, 2);
}

#[test]
fn max_is_the_largest_value_whose_estimate_fits() {
    let cap = 24564u64 << 20; // rtx-4090
    for (of, flag, base) in [
        ("batch", "--batch", vec!["--preset", "gpt2", "--seq-len", "256", "--precision", "amp-bf16"]),
        ("seq-len", "--seq-len", vec!["--preset", "qwen2.5-0.5b", "--batch", "4", "--precision", "bf16"]),
        ("prompt-len", "--prompt-len", vec!["--preset", "qwen2.5-0.5b", "--batch", "8", "--mode", "generate", "--precision", "bf16", "--new-tokens", "16"]),
    ] {
        let mut a = vec!["max", "--of", of, "--gpu", "rtx-4090", "--json"];
        a.extend_from_slice(&base);
        let v = json(&a);
        let n = v["value"].as_u64().unwrap();
        assert_eq!(v["capacity_bytes"], cap);
        let at = |x: u64| {
            let s = x.to_string();
            let mut e = base.clone();
            e.extend_from_slice(&[flag, &s]);
            total(&e)
        };
        assert!(at(n) <= cap && at(n + 1) > cap, "{of} {n}");
        assert_eq!(v["device_total_bytes"].as_u64().unwrap(), at(n), "{of}");
        assert!(v["limit"]["phase"].is_string() && v["limit"]["category"].is_string(), "{v}");
    }
}

#[test]
fn max_serving_matches_serve() {
    let v = json(&["max", "--of", "concurrency", "--gpu", "h100-80gb", "--preset", "llama-3.1-8b", "--context", "8192", "--json"]);
    let s = json(&["serve", "--gpu", "h100-80gb", "--preset", "llama-3.1-8b", "--context", "8192", "--json"]);
    assert_eq!(v["value"], s["max_concurrency"]);
    let v = json(&["max", "--of", "context", "--gpu", "h100-80gb", "--preset", "llama-3.1-8b", "--concurrency", "8", "--json"]);
    let s = json(&["serve", "--gpu", "h100-80gb", "--preset", "llama-3.1-8b", "--context", "1024", "--concurrency", "8", "--json"]);
    assert_eq!(v["value"], s["max_context_at_concurrency"]);
    let n = v["value"].as_u64().unwrap();
    let at = |c: u64| json(&["serve", "--gpu", "h100-80gb", "--preset", "llama-3.1-8b", "--context", &c.to_string(), "--json"])["max_concurrency"].as_u64().unwrap();
    assert!(at(n) >= 8 && at(n + 1) < 8);
}

#[test]
fn max_when_nothing_fits_exits_1_with_a_clear_error() {
    let (code, _, err) = vramcalc(&["max", "--of", "batch", "--gpu", "rtx-3080", "--preset", "llama-3.1-8b", "--seq-len", "512"]);
    assert_eq!(code, 1);
    assert!(err.contains("does not fit: even batch 1 needs"), "{err}");
    let (code, v) = json_with_code(&["max", "--of", "seq-len", "--gpu", "rtx-3080", "--preset", "llama-3.1-8b", "--json"]);
    assert_eq!(code, 1);
    assert!(v["value"].is_null() && v["fits"] == false, "{v}");
    // bad input stays 2
    for bad in [vec!["--of", "width"], vec!["--of", "prompt-len"], vec!["--of", "gpu-layers"], vec!["--of", "concurrency"]] {
        let mut a = vec!["max", "--gpu", "rtx-4090", "--preset", "gpt2"];
        a.extend_from_slice(&bad);
        let (code, _, err) = vramcalc(&a);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(!err.is_empty());
    }
}

#[test]
fn fix_lists_combinations_and_applies_one() {
    let base = ["--preset", "llama-3.1-8b", "--gpu", "rtx-4090", "--precision", "bf16", "--batch", "4", "--seq-len", "2048", "--max-gpus", "1"];
    let mut a = vec!["fix", "--json"];
    a.extend_from_slice(&base);
    let v = json(&a);
    assert_eq!(v["fits"], false);
    let fixes = v["fixes"].as_array().unwrap();
    assert!(!fixes.is_empty());
    // no single change makes an 8B full fine-tune fit 24 GB: each fix combines
    assert!(fixes.iter().all(|f| f["changes"].as_array().unwrap().len() >= 2), "{v}");
    let cap = v["capacity_bytes"].as_u64().unwrap();
    for (i, f) in fixes.iter().enumerate().take(3) {
        let n = (i + 1).to_string();
        let mut a = vec!["fix", "--json", "--apply", &n];
        a.extend_from_slice(&base);
        let applied = json(&a);
        assert_eq!(applied["device_total_bytes"], f["device_total_bytes"], "fix {n}");
        assert!(applied["device_total_bytes"].as_u64().unwrap() <= cap);
        // the flags reproduce it through `estimate`
        let flags: Vec<String> = f["flags"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
        let mut e: Vec<&str> = vec!["--preset", "llama-3.1-8b", "--precision", "bf16", "--batch", "4", "--seq-len", "2048"];
        e.extend(flags.iter().map(String::as_str));
        assert_eq!(total(&e), f["device_total_bytes"].as_u64().unwrap(), "fix {n}: {flags:?}");
    }
    let mut a = vec!["fix", "--apply", "99"];
    a.extend_from_slice(&base);
    let (code, _, err) = vramcalc(&a);
    assert_eq!(code, 2);
    assert!(err.contains("--apply 99"), "{err}");
    // a setup that fits already
    let (code, out, _) = vramcalc(&["fix", "--preset", "gpt2", "--gpu", "h200", "--batch", "1", "--seq-len", "64"]);
    assert_eq!(code, 0);
    assert!(out.contains("fits") && out.contains("already"), "{out}");
}

#[test]
fn fits_tables_every_preset_and_format_of_a_workload() {
    let v = json(&["fits", "--gpu", "rtx-4090", "--workload", "qlora", "--seq-len", "1024", "--json"]);
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 6 * 5, "{}", rows.len());
    for r in rows {
        for key in ["model", "format", "method", "fits", "margin_bytes", "device_total_bytes", "reverse_of"] {
            assert!(!r[key].is_null(), "{key} in {r}");
        }
        assert_eq!(r["fits"].as_bool().unwrap(), r["margin_bytes"].as_i64().unwrap() >= 0, "{r}");
    }
    let row = rows.iter().find(|r| r["model"] == "llama-3.1-8b" && r["format"] == "nf4+ckpt").unwrap();
    let t = total(&["--preset", "llama-3.1-8b", "--finetune", "qlora", "--base-format", "nf4", "--lora-r", "16", "--lora-alpha", "32",
        "--checkpointing", "--precision", "bf16", "--batch", "1", "--seq-len", "1024"]);
    assert_eq!(row["device_total_bytes"].as_u64().unwrap(), t);
    let n = row["reverse_value"].as_u64().unwrap();
    let v = json(&["max", "--of", "batch", "--gpu", "rtx-4090", "--preset", "llama-3.1-8b", "--finetune", "qlora", "--base-format", "nf4",
        "--lora-r", "16", "--lora-alpha", "32", "--checkpointing", "--precision", "bf16", "--batch", "1", "--seq-len", "1024", "--json"]);
    assert_eq!(v["value"].as_u64().unwrap(), n);
    // every preset for inference, six formats each
    let v = json(&["fits", "--gpu", "h100-80gb", "--workload", "serve", "--presets", "llama-3.1-8b,qwen2.5-7b", "--json"]);
    assert_eq!(v["rows"].as_array().unwrap().len(), 12);
    // llama.cpp on mixed cards (`--gpu a,b` and `--gpu a --gpu b` alike): a 70B model in Q2_K
    // fits a 4090 and a 16 GB card together, not the 16 GB card alone; its largest context is
    // `vramcalc llama-cpp`'s own answer for the same split
    let mixed = json(&["fits", "--gpu", "rtx-4090,rtx-4060-ti-16gb", "--workload", "llama-cpp", "--presets", "llama-3.1-70b", "--json"]);
    let repeated = json(&["fits", "--gpu", "rtx-4090", "--gpu", "rtx-4060-ti-16gb", "--workload", "llama-cpp", "--presets", "llama-3.1-70b", "--json"]);
    assert_eq!(mixed, repeated);
    assert_eq!(mixed["gpus"].as_array().unwrap().len(), 2);
    let rows = mixed["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    let q2 = rows.iter().find(|r| r["format"] == "q2_k").unwrap();
    assert_eq!(q2["fits"], true, "{q2}");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../core/src/presets/configs/llama-3.1-70b.json");
    let max = json(&["max", "--of", "context", "--hf-config", config, "--quant", "Q2_K", "--gpu", "rtx-4090", "--gpu", "rtx-4060-ti-16gb", "--json"]);
    assert_eq!(max["value"], q2["reverse_value"]);
    let alone = json(&["fits", "--gpu", "rtx-4060-ti-16gb", "--workload", "llama-cpp", "--presets", "llama-3.1-70b", "--json"]);
    assert_eq!(alone["rows"].as_array().unwrap().iter().find(|r| r["format"] == "q2_k").unwrap()["fits"], false);
    let (code, _, err) = vramcalc(&["fits", "--gpu", "rtx-4090,no-such-card", "--workload", "qlora"]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such-card"), "{err}");
}

/// The launch lines parse back to the settings given, and the vLLM line without `--context`
/// carries the longest context `max --of context` finds.
#[test]
fn launch_lines_parse_back() {
    let v = json(&["launch", "--for", "vllm", "--preset", "llama-3.1-8b", "--gpu", "h100-80gb", "--concurrency", "8", "--kv-dtype", "fp8", "--json"]);
    let argv: Vec<String> = v["argv"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
    let flag = |name: &str| argv.iter().position(|w| w == name).map(|i| argv[i + 1].clone());
    assert_eq!(&argv[..3], ["vllm", "serve", "meta-llama/Llama-3.1-8B"]);
    let longest = json(&["max", "--of", "context", "--gpu", "h100-80gb", "--preset", "llama-3.1-8b", "--concurrency", "8", "--kv-dtype", "fp8", "--json"]);
    assert_eq!(flag("--max-model-len").unwrap(), longest["value"].to_string());
    assert_eq!(flag("--max-num-seqs").as_deref(), Some("8"));
    assert_eq!(flag("--kv-cache-dtype").as_deref(), Some("fp8"));
    // the text form is the same words
    let (_, text, _) = vramcalc(&["launch", "--for", "vllm", "--preset", "llama-3.1-8b", "--gpu", "h100-80gb", "--concurrency", "8", "--kv-dtype", "fp8"]);
    assert_eq!(text.split_whitespace().collect::<Vec<_>>(), argv.iter().map(String::as_str).collect::<Vec<_>>());

    let v = json(&["launch", "--for", "deepspeed", "--preset", "gpt2", "--gpus", "8", "--strategy", "zero2", "--batch", "16", "--grad-accum", "2", "--precision", "bf16", "--json"]);
    assert_eq!(v["config"]["zero_optimization"]["stage"], 2);
    assert_eq!(v["config"]["train_batch_size"], 8 * 8 * 2);
    let (_, text, _) = vramcalc(&["launch", "--for", "deepspeed", "--preset", "gpt2", "--gpus", "8", "--strategy", "zero2", "--batch", "16", "--grad-accum", "2", "--precision", "bf16"]);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v["config"]);

    let (code, text, _) = vramcalc(&["launch", "--for", "accelerate", "--preset", "gpt2", "--gpus", "4", "--strategy", "fsdp", "--precision", "amp-bf16", "--checkpointing"]);
    assert_eq!(code, 0);
    for line in ["distributed_type: FSDP", "num_processes: 4", "mixed_precision: bf16", "  fsdp_activation_checkpointing: true"] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    let (_, text, _) = vramcalc(&["launch", "--for", "torchrun", "--preset", "gpt2", "--gpus", "4", "--script", "finetune.py"]);
    assert_eq!(text.trim(), "torchrun --standalone --nnodes 1 --nproc-per-node 4 finetune.py");

    // the Python texts are valid Python (checked when a python3 is on PATH)
    for args in [
        vec!["launch", "--for", "peft", "--preset", "llama-3.1-8b", "--finetune", "qlora", "--base-format", "nf4", "--lora-r", "16", "--precision", "bf16", "--checkpointing"],
        vec!["launch", "--for", "measure", "--preset", "resnet50", "--batch", "16", "--precision", "amp-bf16"],
        vec!["launch", "--for", "measure", "--preset", "qwen2.5-0.5b", "--batch", "2", "--seq-len", "512", "--precision", "bf16", "--optimizer", "adam8bit"],
    ] {
        let (code, text, err) = vramcalc(&args);
        assert_eq!(code, 0, "{err}");
        assert!(text.contains("import torch"), "{text}");
        let py = Command::new("python3").args(["-c", "import ast,sys; ast.parse(sys.stdin.read())"]).stdin(std::process::Stdio::piped()).spawn();
        if let Ok(mut child) = py {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
            assert!(child.wait().unwrap().success(), "not valid Python:\n{text}");
        }
    }
    // an Ollama Modelfile parses back to the settings, and num_gpu is llama.cpp's most layers
    // that fit at that context
    let v = json(&["launch", "--for", "ollama", "--preset", "llama-3.1-70b", "--quant", "Q2_K", "--gpu", "rtx-4090", "--seq-len", "8192", "--json"]);
    let parsed = vramcalc_core::launch::modelfile::parse(v["text"].as_str().unwrap()).unwrap();
    assert_eq!(parsed.from, "./llama-3.1-70b-Q2_K.gguf");
    assert_eq!(parsed.parameter("num_ctx"), Some("8192"));
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../core/src/presets/configs/llama-3.1-70b.json");
    let most = json(&["llama-cpp", "--hf-config", config, "--quant", "Q2_K", "-c", "8192", "--gpu", "rtx-4090", "--max-of", "gpu-layers", "--json"]);
    assert_eq!(parsed.parameter("num_gpu").map(str::to_string), Some(most["value"].to_string()));
    assert_eq!(v["num_gpu"], most["value"]);
    let (code, _, err) = vramcalc(&["launch", "--for", "ollama", "--preset", "gpt2"]);
    assert_eq!(code, 2);
    assert!(err.contains("config.json") || err.contains("gpt2"), "{err}");
}
