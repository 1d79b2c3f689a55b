//! `vramcalc llama-cpp` (issue 24): llama.cpp's flag names, the JSON totals, devices and the
//! reverse answers, on the GGUF headers recorded in core's test data.

use serde_json::Value;
use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn header(model: &str) -> String {
    format!("{}/../core/tests/data/llama_cpp/{model}.gguf-header", env!("CARGO_MANIFEST_DIR"))
}

fn json(args: &[&str]) -> Value {
    let mut all = vec!["llama-cpp"];
    all.extend_from_slice(args);
    all.push("--json");
    let (code, out, err) = vramcalc(&all);
    assert_eq!(code, 0, "{all:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn totals_are_the_devices_sums() {
    let g = header("qwen3-q4_k_m");
    let v = json(&["--gguf", &g, "-c", "8192", "-ngl", "3", "--gpu", "rtx-4090", "--gpu", "rtx-3060"]);
    let devs = v["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 3);
    for k in ["model_buffer_bytes", "kv_bytes", "k_bytes", "v_bytes", "compute_buffer_bytes", "output_buffer_bytes", "total_bytes"] {
        assert_eq!(n(&v, k), devs.iter().map(|d| n(d, k)).sum::<u64>(), "{k}");
    }
    assert_eq!(n(&v, "kv_bytes"), n(&v, "k_bytes") + n(&v, "v_bytes"));
    for d in devs {
        assert_eq!(n(d, "total_bytes"), n(d, "model_buffer_bytes") + n(d, "kv_bytes") + n(d, "compute_buffer_bytes") + n(d, "output_buffer_bytes"));
        assert!(d["name"].is_string() && d["fits"].is_boolean());
    }
    assert_eq!(devs[1]["gpu"], "rtx-4090");
    assert_eq!(n(&devs[1], "capacity_bytes"), 24564 << 20);
    // 3 of 5 layers (4 + output) on the GPUs: layers 2, 3 and the output.
    assert_eq!(n(&v, "n_gpu_layers"), 3);
    assert_eq!(n(&devs[0], "layers") + n(&devs[1], "layers") + n(&devs[2], "layers"), 5);
    assert!(v["command"].as_str().unwrap().starts_with("llama-server -m "));
}

#[test]
fn llama_cpp_flags_change_what_they_should() {
    let g = header("llama-q8_0");
    let base = json(&["--gguf", &g, "-c", "4096"]);
    let q8 = json(&["--gguf", &g, "-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]);
    // q8_0 stores 32 values in 34 bytes: the cache shrinks to 34/64 of f16's.
    assert_eq!(n(&q8, "k_bytes") * 64, n(&base, "k_bytes") * 34);
    assert_eq!(n(&q8, "v_bytes") * 64, n(&base, "v_bytes") * 34);
    let long = json(&["--gguf", &g, "--ctx-size=8192"]);
    assert_eq!(n(&long, "kv_bytes"), 2 * n(&base, "kv_bytes"));
    let np = json(&["--gguf", &g, "-c", "8192", "-np", "4"]);
    assert_eq!((n(&np, "n_stream"), n(&np, "n_ctx_seq")), (4, 2048));
    assert_eq!(n(&np, "kv_bytes"), n(&long, "kv_bytes"));
    assert_eq!(n(&np, "output_buffer_bytes"), 4 * n(&base, "output_buffer_bytes"));
    let uni = json(&["--gguf", &g, "-c", "8192", "-np", "4", "--kv-unified"]);
    assert_eq!((n(&uni, "n_stream"), n(&uni, "n_ctx_seq")), (1, 8192));
    let nommap = json(&["--gguf", &g, "--no-mmap"]);
    assert_eq!(nommap["devices"][0]["model_buffers"][0]["buffer"], "CPU");
    assert_eq!(base["devices"][0]["model_buffers"][0]["buffer"], "CPU_Mapped");
    let ub = json(&["--gguf", &g, "-ub", "128", "-b", "256", "-fa", "off"]);
    assert_eq!(n(&ub, "n_ubatch"), 128);
    assert!(n(&ub, "compute_buffer_bytes") < n(&json(&["--gguf", &g, "-fa", "off"]), "compute_buffer_bytes"));
}

#[test]
fn offload_flags_move_weights_between_devices() {
    let g = header("qwen3moe-q8_0");
    let all = json(&["--gguf", &g, "--gpu", "rtx-4090"]);
    assert_eq!(n(&all, "n_gpu_layers"), 4);
    // Input layer (token_embd) stays on the CPU even with every layer offloaded.
    assert!(n(&all["devices"][0], "model_buffer_bytes") > 0);
    let moe = json(&["--gguf", &g, "--gpu", "rtx-4090", "--n-cpu-moe", "2"]);
    let ot = json(&["--gguf", &g, "--gpu", "rtx-4090", "-ot", r"blk\.[01]\.ffn_(up|down|gate)_exps=CPU"]);
    assert_eq!(n(&moe["devices"][1], "model_buffer_bytes"), n(&ot["devices"][1], "model_buffer_bytes"));
    assert!(n(&moe["devices"][1], "model_buffer_bytes") < n(&all["devices"][1], "model_buffer_bytes"));
    // The KV cache stays with the layers (not the experts).
    assert_eq!(n(&moe["devices"][1], "kv_bytes"), n(&all["devices"][1], "kv_bytes"));
    let none = json(&["--gguf", &g, "--gpu", "rtx-4090", "-ngl", "0"]);
    assert_eq!(n(&none["devices"][1], "model_buffer_bytes"), 0);
    let two = json(&["--gguf", &g, "--gpu", "rtx-4090", "--gpu", "rtx-4090", "-ts", "1,1"]);
    assert_eq!(n(&two["devices"][1], "layers"), 2);
    assert_eq!(n(&two["devices"][2], "layers"), 2);
    let sm = json(&["--gguf", &g, "--gpu", "rtx-4090", "--gpu", "rtx-4090", "-sm", "none"]);
    assert_eq!(n(&sm["devices"][2], "layers"), 0);
}

#[test]
fn sliding_window_layers_get_their_own_smaller_cache() {
    let g = header("gemma2-q8_0");
    let v = json(&["--gguf", &g, "-c", "8192"]);
    let full = json(&["--gguf", &g, "-c", "8192", "--swa-full"]);
    assert_eq!(n(&v, "swa_cells"), 1024, "window 512 + n_ubatch 512");
    assert_eq!(n(&full, "swa_cells"), 8192);
    assert!(n(&v, "kv_bytes") < n(&full, "kv_bytes"));
}

#[test]
fn reverse_answers_and_the_command_line() {
    let g = header("llama-f16");
    let v = json(&["--gguf", &g, "-c", "4096", "--gpu", "rtx-3060", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]);
    let c = v["max_context"].as_u64().unwrap();
    assert!(c >= 4096 && c.is_multiple_of(256));
    assert_eq!(v["max_gpu_layers"], 5);
    assert_eq!(v["command"], format!("llama-server -m {g} -c 4096 -ngl all -fa on -ctk q8_0 -ctv q8_0"));
    let (code, out, _) = vramcalc(&["llama-cpp", "--gguf", &g, "--gpu", "rtx-3060"]);
    assert_eq!(code, 0);
    assert!(out.contains("largest context that fits: -c ") && out.contains("command: llama-server"), "{out}");
}

#[test]
fn bad_input_is_an_error_that_says_what() {
    let g = header("llama-f16");
    for (args, what) in [
        (vec!["--gguf", g.as_str(), "-ctv", "q8_0", "-fa", "off"], "flash attention"),
        (vec!["--gguf", g.as_str(), "-ctk", "q9_9"], "q9_9"),
        (vec!["--gguf", g.as_str(), "-fa", "maybe"], "-fa"),
        (vec!["--gguf", g.as_str(), "--gpu", "rtx-9999"], "unknown GPU"),
        (vec!["--gguf", g.as_str(), "-ot", "(=CPU", "--gpu", "rtx-4090"], "-ot pattern"),
        (vec!["--gguf", g.as_str(), "-ot", "x=CUDA3", "--gpu", "rtx-4090"], "CUDA3"),
        (vec!["--gguf", "/nonexistent.gguf"], "nonexistent"),
    ] {
        let mut all = vec!["llama-cpp"];
        all.extend(args.iter().copied());
        let (code, _, err) = vramcalc(&all);
        assert_eq!(code, 2, "{all:?}");
        assert!(err.contains(what), "{all:?}: {err}");
    }
    // A truncated header names the offset.
    let bytes = std::fs::read(&g).unwrap();
    let cut = std::env::temp_dir().join("vramcalc-cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (code, _, err) = vramcalc(&["llama-cpp", "--gguf", cut.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("at byte") && err.contains("past the end of the file"), "{err}");
}

fn ollama(args: &[&str]) -> Value {
    let mut all = vec!["ollama"];
    all.extend_from_slice(args);
    all.push("--json");
    let (code, out, err) = vramcalc(&all);
    assert_eq!(code, 0, "{all:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn ollama_is_llama_cpp_with_its_defaults() {
    let g = header("llama-q8_0");
    // An 8 GB-class card: num_ctx 4096; OLLAMA_NUM_PARALLEL multiplies the context.
    let one = ollama(&["--gguf", &g, "--gpu", "rtx-3060"]);
    assert_eq!(n(&one["ollama"], "num_ctx"), 4096);
    let four = ollama(&["--gguf", &g, "--gpu", "rtx-3060", "--num-parallel", "4"]);
    assert_eq!(n(&four, "n_ctx"), 4 * 4096);
    assert_eq!(n(&four, "kv_bytes"), 4 * n(&one, "kv_bytes"));
    // The same run under llama.cpp's flags gives the same buffers.
    let same = json(&["--gguf", &g, "--gpu", "rtx-3060", "-c", "16384", "-np", "4", "-b", "512", "-ub", "512", "-ngl", "5"]);
    for k in ["model_buffer_bytes", "kv_bytes", "compute_buffer_bytes", "output_buffer_bytes"] {
        assert_eq!(n(&four, k), n(&same, k), "{k}");
    }
    let q8 = ollama(&["--gguf", &g, "--gpu", "rtx-3060", "--kv-cache-type", "q8_0", "--flash-attention", "true"]);
    // On CUDA a quantized tensor's last row is padded to 512 elements: 384 more of a 128-wide
    // q8_0 row (12 blocks, 408 B), rounded to the 128-byte alignment: 512 B per tensor, 4 layers.
    assert_eq!(n(&q8, "k_bytes"), n(&one, "k_bytes") * 34 / 64 + 4 * 512);
    assert_eq!(n(&q8, "v_bytes"), n(&one, "v_bytes") * 34 / 64 + 4 * 512);
    assert_eq!(q8["ollama"]["environment"], serde_json::json!(["OLLAMA_KV_CACHE_TYPE=q8_0", "OLLAMA_FLASH_ATTENTION=1"]));
    // A 24 GB card's default is 32768, capped at the model's training context (8192).
    let big = ollama(&["--gguf", &g, "--gpu", "rtx-4090"]);
    assert_eq!(n(&big["ollama"], "num_ctx"), 8192);
}

#[test]
fn without_a_file_a_config_and_a_quant_name() {
    let cfg = format!("{}/../core/tests/data/tinyllama-1.1b.config.json", env!("CARGO_MANIFEST_DIR"));
    let q4 = json(&["--hf-config", &cfg, "--quant", "Q4_K_M", "-c", "2048"]);
    let q8 = json(&["--hf-config", &cfg, "--quant", "q8_0", "-c", "2048"]);
    let f16 = json(&["--hf-config", &cfg, "--quant", "F16", "-c", "2048"]);
    let (a, b, c) = (n(&q4, "model_buffer_bytes"), n(&q8, "model_buffer_bytes"), n(&f16, "model_buffer_bytes"));
    // TinyLlama-1.1B: 1.1e9 parameters; F16 2 bytes each, Q8_0 34/32, Q4_K_M between 4.5 and 6 bits.
    assert!((2_150_000_000..2_250_000_000).contains(&c), "{c}");
    assert!(b * 32 / 34 < c / 2 + 10_000_000 && b > c / 2, "{b} {c}");
    assert!(a * 16 * 2 > c * 9 && a * 16 < c * 6, "{a} {c}");
    assert_eq!(n(&q4, "kv_bytes"), n(&f16, "kv_bytes"));
    let (code, _, err) = vramcalc(&["llama-cpp", "--hf-config", &cfg, "--quant", "Q9_Z"]);
    assert_eq!(code, 2);
    assert!(err.contains("Q9_Z"), "{err}");
}

/// Issue 26's `vramcalc max` for this engine: `--of gpu-layers|context` with a GGUF answers the
/// same values as `llama-cpp`'s own reverse answers, with the command that runs it; exit 1 when
/// nothing fits.
#[test]
fn max_of_gpu_layers_and_context_is_llama_cpps_answer() {
    let file = header("ho-qwen3-q4_k");
    let parsed = |args: &[&str]| -> (i32, Value) {
        let (code, out, err) = vramcalc(args);
        (code, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}")))
    };
    let full = json(&["--gguf", &file, "-c", "4096", "--gpu", "rtx-3060"]);
    let (code, layers) = parsed(&["max", "--of", "gpu-layers", "--gguf", &file, "-c", "4096", "--gpu", "rtx-3060", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(layers["value"], full["max_gpu_layers"], "{layers} {full}");
    assert_eq!(layers["engine"], "llama.cpp");
    let (_, ctx) = parsed(&["max", "--of", "context", "--gguf", &file, "--gpu", "rtx-3060", "--json"]);
    assert_eq!(ctx["value"], full["max_context"]);
    assert!(ctx["command"].as_str().unwrap().contains(&format!("-c {}", ctx["value"])), "{ctx}");
    // 70 B parameters in Q8_0, every layer on a 12 GB card: no context fits
    let config = format!("{}/../../examples/hf/llama-3.1-70b.config.json", env!("CARGO_MANIFEST_DIR"));
    let (code, none) = parsed(&["max", "--of", "context", "--hf-config", &config, "--quant", "Q8_0", "-ngl", "all", "--gpu", "rtx-3060", "--json"]);
    assert_eq!(code, 1, "{none}");
    assert!(none["value"].is_null());
}

/// Ollama's GPU choice (`server/sched.go` `selectLlamaServerPlacement`) with mixed cards: a small
/// model goes to the card with the most memory alone, `--sched-spread` puts it on every card,
/// `--main-gpu` on the one named.
#[test]
fn ollama_picks_one_card_when_one_holds_the_model() {
    let g = header("qwen3-q4_k_m");
    let one = ollama(&["--gguf", &g, "--gpu", "rtx-3060", "--gpu", "rtx-4090"]);
    assert_eq!(one["ollama"]["gpus"], serde_json::json!([1]));
    assert_eq!(one["ollama"]["single_gpu"], true);
    let devs = one["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 2, "the host and the one card llama-server sees");
    assert_eq!(devs[1]["gpu"], "rtx-4090");
    let spread = ollama(&["--gguf", &g, "--gpu", "rtx-3060", "--gpu", "rtx-4090", "--sched-spread"]);
    assert_eq!(spread["ollama"]["gpus"], serde_json::json!([0, 1]));
    assert_eq!(spread["devices"].as_array().unwrap().len(), 3);
    let main = ollama(&["--gguf", &g, "--gpu", "rtx-3060", "--gpu", "rtx-4090", "--main-gpu", "0"]);
    assert_eq!(main["ollama"]["gpus"], serde_json::json!([0]));
    assert_eq!(main["ollama"]["modelfile"], serde_json::json!(["PARAMETER main_gpu 0"]));
}

/// `--no-op-offload` reaches the estimate and the command; `-sm row` with GPUs is refused.
#[test]
fn op_offload_flags_and_split_mode_row() {
    let g = header("qwen3moe-q8_0");
    let on = json(&["--gguf", &g, "-ngl", "0", "--gpu", "rtx-4090"]);
    let off = json(&["--gguf", &g, "-ngl", "0", "--gpu", "rtx-4090", "--no-op-offload"]);
    assert!(n(&on["devices"][1], "compute_buffer_bytes") > 0);
    assert_eq!(n(&off["devices"][1], "compute_buffer_bytes"), 0);
    assert!(off["command"].as_str().unwrap().ends_with("--no-op-offload"), "{}", off["command"]);
    let (code, _, err) = vramcalc(&["llama-cpp", "--gguf", &g, "--gpu", "rtx-4090", "--gpu", "rtx-3060", "-sm", "row"]);
    assert_ne!(code, 0);
    assert!(err.contains("split buffers"), "{err}");
}
