//! The multi-GPU flags, run as a user would.

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
    assert!(f["gpus"].as_u64().unwrap() >= 2);
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
