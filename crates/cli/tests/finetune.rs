//! The fine-tuning flags as scripts call them (issue 13's names, exactly).

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
fn lora_and_qlora_flags() {
    let base = ["estimate", "--preset", "gpt2", "--batch", "2", "--seq-len", "256", "--precision", "bf16", "--json"];
    let full = json(&base);
    assert_eq!(full["trainable_params"], full["params"]);
    let with = |extra: &[&str]| json(&[&base[..], extra].concat());
    // peft on GPT-2 (c_attn, Conv1D 768 → 2304), r 16: 12 · 16 · (768 + 2304)
    let lora = with(&["--finetune", "lora", "--lora-r", "16", "--lora-alpha", "32", "--lora-dropout", "0.05", "--lora-targets", "c_attn"]);
    assert_eq!(lora["trainable_params"], 589_824);
    assert!(lora["peak_bytes"].as_u64() < full["peak_bytes"].as_u64());
    assert!(lora["breakdown"]["adapter_parameters"].as_u64().unwrap() > 0);
    let all = with(&["--finetune", "lora", "--lora-targets", "all-linear"]);
    assert!(all["trainable_params"].as_u64() > lora["trainable_params"].as_u64());
    let qlora = with(&["--finetune", "qlora", "--lora-r", "16", "--lora-targets", "c_attn", "--base-format", "nf4", "--double-quant"]);
    assert_eq!(qlora["trainable_params"], 589_824);
    assert_eq!(qlora["quantised_base"], "nf4");
    assert!(qlora["breakdown"]["frozen_parameters"].as_u64() < lora["breakdown"]["frozen_parameters"].as_u64());
    for format in ["fp4", "int8", "bf16", "fp16"] {
        json(&[&base[..], &["--finetune", "qlora", "--base-format", format]].concat());
    }
    let (code, _, err) = vramcalc(&[&base[..], &["--finetune", "lora", "--base-format", "nf3"]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("--base-format \"nf3\" is not one of nf4, fp4, int8, bf16, fp16"), "{err}");
}

#[test]
fn freezing_flags() {
    let base = ["estimate", "--preset", "resnet50", "--batch", "8", "--json"];
    let full = json(&base);
    let fc = json(&[&base[..], &["--train-only", "fc"]].concat());
    assert_eq!(fc["trainable_params"], 2_049_000);
    assert_eq!(fc["peak_phase"], "forward");
    assert!(fc["peak_bytes"].as_u64().unwrap() * 4 < full["peak_bytes"].as_u64().unwrap());
    let first = json(&["estimate", "--preset", "bert-base-seqcls", "--batch", "8", "--seq-len", "128", "--finetune", "freeze", "--freeze-first", "6", "--json"]);
    assert_eq!(first["trainable_params"], 43_119_362);
    let (code, _, err) = vramcalc(&["estimate", "--preset", "resnet50", "--finetune", "freeze"]);
    assert_eq!(code, 2);
    assert!(err.contains("--train-only"), "{err}");
    let (_, text, _) = vramcalc(&["estimate", "--preset", "resnet50", "--batch", "8", "--train-only", "fc"]);
    assert!(text.contains("trainable params: 2,049,000 || all params: 25,557,032"), "{text}");
}

#[test]
fn fine_tuning_what_ifs() {
    let v = json(&["estimate", "--preset", "gpt2", "--batch", "2", "--seq-len", "256", "--what-if", "--json"]);
    let ids: Vec<&str> = v["what_ifs"].as_array().unwrap().iter().map(|w| w["trick"].as_str().unwrap()).collect();
    assert!(ids.contains(&"lora-r16") && ids.contains(&"chunked-loss"), "{ids:?}");
    // QLoRA saves where the base dominates (an 8B model, short sequences) ...
    let (_, text, _) = vramcalc(&["estimate", "--preset", "llama-3.1-8b", "--batch", "1", "--seq-len", "256", "--finetune", "lora", "--what-if"]);
    assert!(text.contains("QLoRA (NF4 base) instead of LoRA"), "{text}");
    // ... and is not offered where the fp32 hidden states of prepare_model_for_kbit_training cost more
    let (_, text, _) = vramcalc(&["estimate", "--preset", "gpt2", "--batch", "2", "--finetune", "lora", "--what-if"]);
    assert!(!text.contains("QLoRA (NF4 base) instead of LoRA"), "{text}");
}
