//! Runs the `vramcalc` binary as a user would.

use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = vramcalc(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn presets_lists_every_required_id() {
    let v = json(&["presets", "--json"]);
    let ids: Vec<&str> = v.as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    for id in ["resnet18", "resnet152", "vgg16_bn", "bert-base", "bert-large-seqcls"] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
}

#[test]
fn estimate_json_has_the_documented_fields() {
    let v = json(&["estimate", "--preset", "vgg16", "--batch", "8", "--json"]);
    assert_eq!(v["params"], 138_357_544);
    for key in ["peak_bytes", "device_total_bytes", "rule_of_thumb_bytes"] {
        assert!(v[key].as_u64().unwrap() > 0, "{key}");
    }
    assert!(["forward", "backward", "optimizer"].contains(&v["peak_phase"].as_str().unwrap()));
    let b = &v["breakdown"];
    let sum: u64 = ["parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries", "input"]
        .iter()
        .map(|k| b[*k].as_u64().unwrap_or_else(|| panic!("breakdown.{k}")))
        .sum();
    assert_eq!(sum, v["peak_bytes"].as_u64().unwrap());
    let first = &v["layers"][0];
    for key in ["path", "kind", "output_shape", "params", "activation_values", "saved_bytes"] {
        assert!(!first[key].is_null(), "layers[0].{key}");
    }
    assert_eq!(first["output_shape"], serde_json::json!([64, 224, 224]));
}

#[test]
fn batch_and_precision_change_the_peak() {
    let peak = |args: &[&str]| {
        let mut a = vec!["estimate", "--preset", "resnet50", "--json"];
        a.extend_from_slice(args);
        json(&a)["peak_bytes"].as_u64().unwrap()
    };
    let b16 = peak(&["--batch", "16"]);
    let b32 = peak(&["--batch", "32"]);
    assert!(b32 > b16);
    assert!(peak(&["--batch", "32", "--precision", "amp-fp16"]) < b32);
    assert!(peak(&["--batch", "32", "--checkpointing"]) < b32);
    assert!(peak(&["--batch", "32", "--optimizer", "sgd"]) < b32);
    assert!(peak(&["--batch", "32", "--grad-accum", "4"]) < b32);
}

#[test]
fn max_batch_is_consistent_with_the_estimate() {
    let v = json(&["max-batch", "--preset", "resnet18", "--gpu", "rtx-4090", "--json"]);
    let best = v["max_batch"].as_u64().unwrap();
    let cap = v["capacity_bytes"].as_u64().unwrap();
    assert!(v["device_total_bytes"].as_u64().unwrap() <= cap);
    let next = json(&["estimate", "--preset", "resnet18", "--batch", &(best + 1).to_string(), "--json"]);
    assert!(next["device_total_bytes"].as_u64().unwrap() > cap);
}

#[test]
fn bad_input_gets_a_clear_error_and_no_panic() {
    let (code, _, err) = vramcalc(&["estimate", "--preset", "resnet7"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown preset `resnet7`"), "{err}");
    let (code, _, err) = vramcalc(&["estimate", "--preset", "vgg16", "--optimizer", "lion"]);
    assert_eq!(code, 2);
    assert!(err.contains("--optimizer \"lion\" is not one of"), "{err}");
    let (code, _, err) = vramcalc(&["estimate", "--preset", "vgg16", "--batch", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("batch size must be at least 1"), "{err}");
    let dir = std::env::temp_dir().join("vramcalc-cli-test.json");
    std::fs::write(&dir, r#"{"input":{"shape":[3,32,32]},"layers":[{"kind":"conv2d","in_channels":3,"out_channels":8,"kernel_size":3},{"kind":"flatten"},{"kind":"linear","in_features":100,"out_features":10}]}"#).unwrap();
    let (code, _, err) = vramcalc(&["estimate", "--spec", dir.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("layers[2] (linear): expected 100 input features, got 7200"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn human_output_uses_separators_and_units() {
    let (code, out, _) = vramcalc(&["estimate", "--preset", "vgg16", "--batch", "4", "--units", "MiB"]);
    assert_eq!(code, 0);
    assert!(out.contains("138,357,544 parameters"), "{out}");
    assert!(out.contains("GiB") || out.contains("MiB"), "{out}");
    assert!(out.contains("rule of thumb"));
}

#[test]
fn presets_export_as_specs_that_read_back() {
    let (code, out, err) = vramcalc(&["spec", "--preset", "resnet18"]);
    assert_eq!(code, 0, "{err}");
    let path = std::env::temp_dir().join("vramcalc-cli-resnet18.json");
    std::fs::write(&path, out).unwrap();
    let v = json(&["estimate", "--spec", path.to_str().unwrap(), "--json"]);
    assert_eq!(v["params"], 11_689_512);
}

#[test]
fn absurd_sizes_get_a_clear_error() {
    let dir = std::env::temp_dir();
    let wide = dir.join("vramcalc-cli-wide.json");
    std::fs::write(&wide, r#"{"input":{"shape":[1000000000000]},"layers":[{"kind":"linear","in_features":1000000000000,"out_features":1000000000000}]}"#).unwrap();
    let (code, _, err) = vramcalc(&["estimate", "--spec", wide.to_str().unwrap(), "--batch", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("layers[0] (linear): more than 2^60 values"), "{err}");
    let (code, _, err) = vramcalc(&["estimate", "--preset", "resnet18", "--batch", "1000000000000000"]);
    assert_eq!(code, 2);
    assert!(err.contains("too large: batch size"), "{err}");
    let deep = dir.join("vramcalc-cli-deep.json");
    std::fs::write(&deep, r#"{"input":{"shape":[8]},"layers":[{"kind":"repeat","times":10000000,"body":[{"kind":"relu"}]}]}"#).unwrap();
    let (code, _, err) = vramcalc(&["estimate", "--spec", deep.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("repeats 1 layers 10000000 times"), "{err}");
}

#[test]
fn candle_profile_beyond_64_bits_gets_the_same_too_large_error() {
    // batch 2^40: VGG-16's first conv alone needs more than 2^64 bytes in either profile
    let run = |framework| vramcalc(&["estimate", "--preset", "vgg16", "--framework", framework, "--batch", "1099511627776"]);
    let (code, out, err) = run("candle");
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err.trim(), "vramcalc: too large: at batch 1099511627776 the step needs more than 2^64 bytes (18.4 EB)");
    assert_eq!((code, out, err), run("pytorch-eager"));
}

#[test]
fn estimate_what_if_prints_the_tricks() {
    let v = json(&["estimate", "--preset", "bert-base", "--batch", "32", "--json", "--what-if"]);
    let items = v["what_ifs"].as_array().unwrap();
    let ids: Vec<&str> = items.iter().map(|w| w["trick"].as_str().unwrap()).collect();
    assert!(ids.contains(&"shorter-seq") && ids.contains(&"amp"), "{ids:?}");
    let base = v["peak_bytes"].as_u64().unwrap();
    let halved = items.iter().find(|w| w["trick"] == "halve-batch").unwrap();
    assert_eq!(halved["config"]["batch"], 16);
    // every trick offered saves memory (at batch 8 AMP does not lower BERT's optimizer-step peak)
    assert!(items.iter().all(|w| w["peak"].as_u64().unwrap() < base || w["device_total"].as_u64().unwrap() < v["device_total_bytes"].as_u64().unwrap()));
    let small = json(&["estimate", "--preset", "bert-base", "--batch", "8", "--json", "--what-if"]);
    assert!(small["what_ifs"].as_array().unwrap().iter().all(|w| w["trick"] != "amp"), "{small}");
    assert!(halved["peak"].as_u64().unwrap() < base);
    assert!(json(&["estimate", "--preset", "bert-base", "--json"]).get("what_ifs").is_none());
    let (code, out, err) = vramcalc(&["estimate", "--preset", "resnet18", "--what-if"]);
    assert_eq!(code, 0, "{err}");
    // torchvision's ResNet already runs its ReLUs in place: that trick saves nothing, so it is not offered
    assert!(out.contains("what if (each trick alone)") && !out.contains("in-place ReLU") && out.contains("saves"), "{out}");
}

// The multi-GPU flags (`--gpus`, `--strategy`, …).

const MODEL: [&str; 6] = ["--preset", "gpt2", "--batch", "4", "--seq-len", "256"];

fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a: Vec<&str> = MODEL.to_vec();
    a.extend_from_slice(extra);
    a
}

#[test]
fn estimate_json_gains_the_distributed_object_and_breakdown_keys() {
    let v = json(&[&["estimate", "--json"][..], &with(&["--gpus", "4", "--strategy", "fsdp", "--reshard-after-forward", "false"])].concat());
    let d = &v["distributed"];
    assert_eq!(d["strategy"], "fsdp");
    assert_eq!(d["gpus"], 4);
    assert_eq!(d["reshard_after_forward"], false);
    for key in ["sharded_parameters", "unsharded_parameters", "all_gather_buffers", "reduce_scatter_buffers", "gradient_buckets", "host_memory"] {
        assert!(v["breakdown"][key].is_u64(), "breakdown.{key}");
    }
    assert!(v["breakdown"]["sharded_parameters"].as_u64().unwrap() > 0);
    let sum: u64 = ["parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries", "input"].iter().map(|k| v["breakdown"][*k].as_u64().unwrap()).sum();
    assert_eq!(sum, v["peak_bytes"].as_u64().unwrap());
    // offload reports host memory
    let z = json(&[&["estimate", "--json"][..], &with(&["--gpus", "8", "--strategy", "zero3", "--offload", "optimizer", "--precision", "bf16"])].concat());
    assert!(z["distributed"]["host_bytes"].as_u64().unwrap() > 0);
    // every flag is accepted
    let all = json(&[&["estimate", "--json"][..], &with(&["--gpus", "8", "--strategy", "fsdp", "--tp", "2", "--fsdp-param-dtype", "bf16", "--fsdp-reduce-dtype", "fp32"])].concat());
    assert_eq!(all["distributed"]["tensor_parallel"], 2);
    let ddp = json(&[&["estimate", "--json"][..], &with(&["--gpus", "2", "--gradient-as-bucket-view"])].concat());
    assert_eq!(ddp["distributed"]["strategy"], "ddp");
    assert!(ddp["breakdown"]["gradient_buckets"].as_u64().unwrap() > 0);
}

/// `--sequence-parallel` (Megatron's flag) with tensor parallelism: a lower peak for a TinyLlama
/// whose peak holds activations, the flag in the `distributed` object, the gather buffer in the
/// breakdown and the text; without tensor parallelism it is refused by name.
#[test]
fn sequence_parallel_with_tensor_parallelism() {
    let config = format!("{}/../core/tests/data/tinyllama-1.1b.config.json", env!("CARGO_MANIFEST_DIR"));
    let args = ["estimate", "--hf-config", config.as_str(), "--batch", "2", "--seq-len", "2048", "--precision", "bf16", "--gpus", "8", "--strategy", "tp"];
    let tp = json(&[&args[..], &["--json"]].concat());
    let sp = json(&[&args[..], &["--json", "--sequence-parallel"]].concat());
    assert_eq!(tp["distributed"]["sequence_parallel"], false);
    assert_eq!(sp["distributed"]["sequence_parallel"], true);
    assert_eq!(sp["distributed"]["tensor_parallel"], 8);
    let peak = |v: &serde_json::Value| v["peak_bytes"].as_u64().unwrap();
    assert!(peak(&sp) < peak(&tp), "{} ≥ {}", peak(&sp), peak(&tp));
    // one bf16 [seq, batch, hidden] gather buffer
    assert_eq!(sp["breakdown"]["all_gather_buffers"], 2048 * 2 * 2048 * 2);
    let (code, out, err) = vramcalc(&[&args[..], &["--sequence-parallel"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tensor-parallel 8, sequence-parallel") && out.contains("all-gather buffers"), "{out}");
    let (code, _, err) = vramcalc(&[&args[..9], &["--sequence-parallel"]].concat());
    assert_ne!(code, 0);
    assert!(err.contains("--sequence-parallel needs tensor parallelism"), "{err}");
}

#[test]
fn one_gpu_is_todays_estimate() {
    let plain = json(&[&["estimate", "--json"][..], &MODEL[..]].concat());
    let one = json(&[&["estimate", "--json"][..], &with(&["--gpus", "1"])].concat());
    assert_eq!(plain, one);
}

#[test]
fn max_batch_and_fewest_gpus() {
    let one = json(&[&["max-batch", "--gpu", "rtx-4090", "--json"][..], &MODEL[..]].concat());
    let eight = json(&[&["max-batch", "--gpu", "rtx-4090", "--json"][..], &with(&["--gpus", "8", "--strategy", "zero3"])].concat());
    assert!(eight["max_batch_per_gpu"].as_u64().unwrap() >= one["max_batch"].as_u64().unwrap());
    let f = json(&[&["fewest-gpus", "--gpu", "rtx-3080", "--json"][..], &with(&["--strategy", "fsdp"])].concat());
    let on_one = json(&[&["max-batch", "--gpu", "rtx-3080", "--json"][..], &MODEL[..]].concat());
    assert_eq!(f["gpus"] == 1, on_one["max_batch"].as_u64().unwrap() >= 4, "{f} {on_one}");
    // a job that fits on one GPU needs no sharding, whatever the strategy named
    let small = json(&["fewest-gpus", "--gpu", "h100-80gb", "--json", "--preset", "gpt2", "--batch", "1", "--seq-len", "128", "--strategy", "fsdp"]);
    assert_eq!(small["gpus"], 1, "{small}");
    assert!(f["max_batch_per_gpu"].as_u64().unwrap() >= 4);
}

#[test]
fn bad_values_name_the_flag() {
    for (flag, value) in [("--strategy", "zero4"), ("--reshard-after-forward", "maybe"), ("--fsdp-param-dtype", "fp32"), ("--offload", "disk")] {
        let (code, _, err) = vramcalc(&[&["estimate"][..], &with(&["--gpus", "2", flag, value])].concat());
        assert_eq!(code, 2);
        assert!(err.contains(flag), "{flag}: {err}");
    }
}
