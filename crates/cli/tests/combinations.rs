//! Answers that agree with each other (issue 22): fine-tuning on several GPUs, autocast under
//! FSDP, what-ifs of the whole job, a language model's defaults.

mod common;
use common::{json, vramcalc};

const QLORA: [&str; 12] = ["--preset", "llama-3.1-8b", "--batch", "1", "--seq-len", "2048", "--precision", "bf16", "--finetune", "qlora", "--lora-r", "16"];

fn qlora(extra: &[&str]) -> serde_json::Value {
    json(&[&["estimate", "--json"][..], &QLORA[..], extra].concat())
}

/// Item 1: a frozen (4-bit) base gets no gradients, buckets or optimizer state on any strategy;
/// sharding never makes rank 0 hold more than one GPU does.
#[test]
fn qlora_on_several_gpus_trains_only_the_adapters() {
    let one = qlora(&[]);
    let opt1 = one["optimizer_state_bytes"].as_u64().unwrap();
    let peak1 = one["peak_bytes"].as_u64().unwrap();
    // AdamW over the adapters only: 2 fp32 moments of 6.8 M parameters (+ a step tensor each)
    assert!(opt1 < 60 << 20, "{opt1}");
    for strategy in ["ddp", "zero1", "zero2", "zero3", "fsdp"] {
        let e = qlora(&["--gpus", "8", "--strategy", strategy]);
        let b = &e["breakdown"];
        let opt = e["optimizer_state_bytes"].as_u64().unwrap_or_else(|| b["optimizer_state"].as_u64().unwrap());
        assert!(opt <= opt1, "{strategy}: optimizer state {opt} > one GPU's {opt1}");
        assert!(b["gradients"].as_u64().unwrap() <= 64 << 20, "{strategy}: gradients {}", b["gradients"]);
        assert!(b["gradient_buckets"].as_u64().unwrap_or(0) <= 64 << 20, "{strategy}: buckets {}", b["gradient_buckets"]);
        // DDP adds one adapter gradient's worth of buckets; the sharded strategies save memory
        let peak = e["peak_bytes"].as_u64().unwrap();
        assert!(peak <= peak1 + (64 << 20), "{strategy}: {peak} against {peak1} on one GPU");
    }
    // the job fits on one H100: fewest-gpus says so whatever the strategy
    for strategy in ["fsdp", "ddp", "zero3"] {
        let f = json(&[&["fewest-gpus", "--json", "--gpu", "h100-80gb", "--strategy", strategy][..], &QLORA[..]].concat());
        assert_eq!(f["gpus"], 1, "{strategy}: {f}");
    }
}

/// Item 2: autocast's cached weight copies are their own figure, `--autocast-cache off` drops
/// them, and FSDP's MixedPrecisionPolicy on a bf16 model is a setup, not an error.
#[test]
fn autocast_copies_under_fsdp_are_named_and_avoidable() {
    let job = ["--preset", "llama-3.1-70b", "--batch", "1", "--seq-len", "2048", "--checkpointing", "--strategy", "fsdp", "--gpus", "16"];
    let amp = json(&[&["estimate", "--json", "--precision", "amp-bf16"][..], &job[..]].concat());
    let casts = amp["breakdown"]["weight_casts"].as_u64().unwrap();
    // 2 bytes per element of every decoder-layer weight, whole on every rank
    assert!(casts > 120 << 30 && casts < 140 << 30, "{casts}");
    let off = json(&[&["estimate", "--json", "--precision", "amp-bf16", "--autocast-cache", "off"][..], &job[..]].concat());
    assert!(off["breakdown"].get("weight_casts").is_none(), "{off}");
    assert!(off["peak_bytes"].as_u64().unwrap() + (100 << 30) < amp["peak_bytes"].as_u64().unwrap());
    let (code, out, _) = vramcalc(&[&["estimate", "--precision", "amp-bf16"][..], &job[..]].concat());
    assert_eq!(code, 0);
    assert!(out.contains("of which weight casts") && out.contains("cached until the forward ends"), "{out}");
    let mp = json(&[&["estimate", "--json", "--precision", "bf16", "--fsdp-param-dtype", "bf16", "--fsdp-reduce-dtype", "fp32"][..], &job[..]].concat());
    assert!(mp["peak_bytes"].as_u64().unwrap() < 80 << 30, "{mp}");
    let (code, _, err) = vramcalc(&[&["estimate", "--precision", "amp-bf16", "--autocast-cache", "maybe"][..], &job[..]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("--autocast-cache"), "{err}");
}

/// Item 3: every what-if is this job (GPUs and strategy included) with one change, compared with
/// this job's rank 0; none that saves nothing.
#[test]
fn what_ifs_are_of_the_job_as_it_is() {
    let job = ["--preset", "llama-3.1-70b", "--batch", "1", "--seq-len", "2048", "--checkpointing", "--precision", "amp-bf16", "--strategy", "fsdp", "--gpus", "16"];
    let e = json(&[&["estimate", "--json", "--what-if"][..], &job[..]].concat());
    let total = e["device_total_bytes"].as_u64().unwrap();
    let items = e["what_ifs"].as_array().unwrap();
    let ids: Vec<&str> = items.iter().map(|w| w["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"fsdp-mixed-precision") && ids.contains(&"autocast-cache-off") && ids.contains(&"shorter-seq"), "{ids:?}");
    for w in items {
        assert!(w["device_total"].as_u64().unwrap() < total, "{w}");
        assert!(w["dist"]["gpus"].as_u64().unwrap() >= 16, "{w}");
    }
    // halving the sequence on the same job is the same job at half the sequence
    let seq = items.iter().find(|w| w["id"] == "shorter-seq").unwrap();
    let direct = json(&[&["estimate", "--json"][..], &job[..4], &["--seq-len", "1024"], &job[6..]].concat());
    assert_eq!(seq["device_total"], direct["device_total_bytes"]);
}

/// Item 5: a language model starts at batch 1, a stated sequence length and its config's dtype.
#[test]
fn a_language_model_starts_with_language_model_defaults() {
    let e = json(&["estimate", "--json", "--preset", "llama-3.1-8b"]);
    assert_eq!(e["config"]["batch"], 1);
    assert_eq!(e["config"]["seq_len"], 2048);
    assert_eq!(e["config"]["precision"], "bf16");
    // what the flags say wins; a CNN keeps its defaults
    let e = json(&["estimate", "--json", "--preset", "llama-3.1-8b", "--batch", "4", "--precision", "fp32"]);
    assert_eq!((e["config"]["batch"].as_u64(), e["config"]["precision"].as_str()), (Some(4), Some("fp32")));
    let e = json(&["estimate", "--json", "--preset", "resnet18"]);
    assert_eq!((e["config"]["batch"].as_u64(), e["config"]["precision"].as_str()), (Some(32), Some("fp32")));
}

/// Item 4: every figure names its engine.
#[test]
fn every_figure_names_its_engine() {
    let gen = json(&["estimate", "--json", "--preset", "qwen2.5-7b", "--mode", "generate", "--batch", "8", "--prompt-len", "1024", "--new-tokens", "128"]);
    assert_eq!(gen["engine"], "Hugging Face generate() (PyTorch)");
    let train = json(&["estimate", "--json", "--preset", "qwen2.5-7b", "--gpus", "8", "--strategy", "fsdp"]);
    assert_eq!(train["engine"], "PyTorch training step");
    let serve = json(&["serve", "--json", "--preset", "qwen2.5-7b", "--gpu", "h100-80gb", "--context", "8192"]);
    assert_eq!(serve["engine"], "vLLM");
    let (code, out, _) = vramcalc(&["serve", "--preset", "qwen2.5-7b", "--gpu", "h100-80gb", "--context", "8192"]);
    assert_eq!(code, 0);
    assert!(out.contains("under vLLM"), "{out}");
}
