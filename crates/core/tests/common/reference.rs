//! Adapter from `tests/data/reference.jsonl` (PyTorch peaks measured by
//! `shared/reference/measure.py`, torch 2.15, MemTracker under FakeTensorMode) to specs and configs.
//! Shared by `tests/reference.rs` and `examples/reference_table.rs`.
#![allow(dead_code)]

use serde_json::Value;
use vramcalc_core::finetune::{FineTune, Method, NameList};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{
    AttentionImpl, AutocastDevice, Breakdown, Device, Estimate, Mode, OptimizerImpl, OptimizerKind, Precision,
    TrainConfig,
};

pub const DATA: &str = include_str!("../data/reference.jsonl");

pub struct Case {
    pub label: String,
    pub setting: String,
    pub spec: ModelSpec,
    pub config: TrainConfig,
    pub measured: u64,
    pub measured_phase: String,
    pub measured_phase_peaks: String,
    /// Measured bytes per category, keyed like `Breakdown` (temporaries include the step's).
    pub measured_breakdown: Vec<(&'static str, u64)>,
}

pub fn cases() -> Vec<Case> {
    cases_from(DATA)
}

/// Cases from any file in the same format (e.g. new `measure.py` runs).
pub fn cases_from(text: &str) -> Vec<Case> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| case(&serde_json::from_str(l).unwrap())).collect()
}

fn case(r: &Value) -> Case {
    let model = r["model"].as_str().unwrap();
    let batch = r["batch"].as_u64().unwrap();
    let seq_len = r["seq_len"].as_u64();
    let spec = match model {
        "bert-base" | "bert-large" => vramcalc_core::presets::build(&format!("{model}-seqcls")).unwrap(),
        m if m.starts_with("custom_") => custom_spec(r),
        m if m.starts_with("llama-") => llama_spec(r),
        m if m.starts_with("gpt2-") => hf_spec(r, "GPT2LMHeadModel"),
        m => vramcalc_core::presets::build(m).unwrap(),
    };
    let opt = &r["optimizer"];
    let optimizer = match (opt["name"].as_str(), opt["momentum"].as_f64().unwrap_or(0.0) > 0.0) {
        (Some("sgd"), false) => OptimizerKind::Sgd,
        (Some("sgd"), true) => OptimizerKind::SgdMomentum,
        (Some("adam"), _) => OptimizerKind::Adam,
        (Some("adamw"), _) => OptimizerKind::Adamw,
        (None, _) => OptimizerKind::Sgd,
        (Some(o), _) => panic!("unknown optimizer {o}"),
    };
    let foreach = opt["foreach_resolved"].as_bool().unwrap_or(false);
    let precision = match r["precision"].as_str().unwrap() {
        "fp32" => Precision::Fp32,
        "bf16_autocast" => Precision::AmpBf16,
        "fp16_autocast" => Precision::AmpFp16,
        // `shared/reference/llm/`: the weights dtype, `model.to(torch.bfloat16)`, no autocast
        "bf16" => Precision::Bf16,
        "fp16" => Precision::Fp16,
        p => panic!("unknown precision {p}"),
    };
    let mode = if r["mode"] == "infer" { Mode::Infer } else { Mode::Train };
    let config = TrainConfig {
        batch,
        seq_len,
        optimizer,
        optimizer_impl: if foreach { OptimizerImpl::Foreach } else { OptimizerImpl::Forloop },
        precision,
        autocast_device: AutocastDevice::Cpu,
        device: if r["cuda_emulation"].as_bool().unwrap_or(false) { Device::Cuda } else { Device::Cpu },
        mode,
        checkpointing: r["checkpointing"].as_bool().unwrap_or(false),
        grad_accum: 1,
        attention: if r["attn_impl"] == "eager" { AttentionImpl::Eager } else { AttentionImpl::Sdpa },
        finetune: finetune_of(r),
        ..TrainConfig::default()
    };
    let b = &r["breakdown"];
    let g = |k: &str| b[k].as_u64().unwrap_or(0);
    let measured_breakdown = vec![
        ("parameters", g("parameters")),
        ("buffers", g("buffers")),
        ("gradients", g("gradients")),
        ("optimizer_state", g("optimizer_states")),
        ("activations", g("activations")),
        ("temporaries", g("temporaries") + g("optimizer_step_temporaries")),
        ("input", g("inputs")),
    ];
    let mut setting = format!("b{batch}");
    if let Some(s) = seq_len {
        setting += &format!(" s{s}");
    }
    if mode == Mode::Infer {
        setting += " infer";
    } else {
        setting += &format!(" {}{}", optimizer.name(), if foreach { "/foreach" } else { "" });
    }
    setting += match precision {
        Precision::Fp32 => "",
        Precision::AmpFp16 => " fp16-amp",
        Precision::AmpBf16 => " bf16-amp",
        Precision::Bf16 => " bf16",
        Precision::Fp16 => " fp16",
    };
    if config.checkpointing {
        setting += " ckpt";
    }
    let ft = &r["finetune"];
    match ft["method"].as_str() {
        Some("lora") => {
            setting += &format!(" lora r{} {} dp{}", ft["r"], ft["targets"].as_str().map_or_else(|| ft["targets"].to_string(), str::to_string), ft["dropout"]);
            if r["cuda_emulation"] == true {
                setting += " cuda-mask";
            }
        }
        Some("frozen") => setting += &format!(" {}", ft["frozen_id"].as_str().unwrap_or("frozen")),
        _ => {}
    }
    if model.starts_with("bert") || model.starts_with("llama") {
        setting += &format!(" {}", config.attention.name());
    }
    if r["cuda_emulation"] == false && r["family"].is_string() && model.starts_with("bert") {
        setting += " cpu";
    }
    Case {
        label: model.to_string(),
        setting,
        spec,
        config,
        measured: r["peak_bytes"].as_u64().unwrap(),
        measured_phase: r["peak_phase"].as_str().unwrap().to_string(),
        measured_phase_peaks: r["phase_peak_bytes"].to_string(),
        measured_breakdown,
    }
}

/// The record's `finetune` (`shared/reference/llm/measure_llm.py`): LoRA with its rank, alpha,
/// targets and dropout; the frozen variants as the setup's rules name them (`bert_all`: only
/// `classifier` trains; `bert_emb_plus_6`: embeddings and the first 6 layers frozen;
/// `resnet_all_but_fc`: only `fc` trains).
pub fn finetune_of(r: &Value) -> FineTune {
    let ft = &r["finetune"];
    let names = |v: &Value| match v {
        Value::String(s) => NameList::parse(s).unwrap(),
        Value::Array(a) => NameList::from_names(&a.iter().map(|s| s.as_str().unwrap()).collect::<Vec<_>>()).unwrap(),
        _ => NameList::EMPTY,
    };
    match ft["method"].as_str() {
        Some("lora") => FineTune {
            method: Method::Lora,
            lora_r: ft["r"].as_u64().unwrap() as u32,
            lora_alpha: ft["alpha"].as_f64().unwrap(),
            lora_dropout: ft["dropout"].as_f64().unwrap_or(0.0),
            lora_targets: names(&ft["targets"]),
            ..FineTune::default()
        },
        Some("frozen") => match ft["frozen_id"].as_str().unwrap() {
            "bert_all" => FineTune { method: Method::Freeze, train_only: NameList::parse("classifier").unwrap(), ..FineTune::default() },
            "resnet_all_but_fc" => FineTune { method: Method::Freeze, train_only: NameList::parse("fc").unwrap(), ..FineTune::default() },
            "bert_emb_plus_6" => FineTune { method: Method::Freeze, freeze_first: Some(6), ..FineTune::default() },
            other => panic!("unknown frozen variant {other}"),
        },
        _ => FineTune::default(),
    }
}

/// `LlamaForCausalLM(LlamaConfig(...))` of `shared/reference/llm/` (`llama-h1024-l4`, …): the
/// Hugging Face importer given the record's `model_extra.hf_config` (hidden, layers, heads, KV
/// heads, intermediate, vocab; the rest LlamaConfig's defaults), trained as
/// `model(input_ids, labels=input_ids).loss`.
fn llama_spec(r: &Value) -> ModelSpec {
    hf_spec(r, "LlamaForCausalLM")
}

/// The Hugging Face importer given the record's `model_extra.hf_config` and class.
fn hf_spec(r: &Value, class: &str) -> ModelSpec {
    let mut config = r["model_extra"]["hf_config"].as_object().expect("model_extra.hf_config").clone();
    config.retain(|_, v| !v.is_null());
    config.insert("architectures".into(), serde_json::json!([class]));
    vramcalc_core::import::hf::from_config(&config).unwrap()
}

/// Parses the `repr()`s of the `nn.Sequential` entries in `custom_layers`.
fn custom_spec(r: &Value) -> ModelSpec {
    let shape: Vec<u64> = r["input_shape"].as_array().unwrap()[1..].iter().map(|v| v.as_u64().unwrap()).collect();
    let mut layers: Vec<serde_json::Value> = Vec::new();
    for l in r["custom_layers"].as_array().unwrap() {
        let l = l.as_str().unwrap();
        let (name, args) = l.split_once('(').unwrap();
        let args = args.strip_suffix(')').unwrap_or(args);
        let pos: Vec<&str> = args.split(", ").filter(|a| !a.contains('=')).collect();
        let kw = |k: &str| -> Option<String> {
            let key = format!("{k}=");
            let i = args.find(&key)?;
            let rest = &args[i + key.len()..];
            let v = if rest.starts_with('(') { &rest[1..rest.find(')').unwrap()] } else { rest.split(", ").next().unwrap() };
            Some(v.split(", ").next().unwrap().to_string())
        };
        let json = match name {
            "Linear" => format!(
                r#"{{"kind":"linear","in_features":{},"out_features":{},"bias":{}}}"#,
                kw("in_features").unwrap(),
                kw("out_features").unwrap(),
                kw("bias").unwrap() == "True"
            ),
            "Conv2d" => format!(
                r#"{{"kind":"conv2d","in_channels":{},"out_channels":{},"kernel_size":{},"stride":{},"padding":{}}}"#,
                pos[0],
                pos[1],
                kw("kernel_size").unwrap(),
                kw("stride").unwrap(),
                kw("padding").unwrap_or("0".into())
            ),
            "BatchNorm2d" => format!(r#"{{"kind":"batch_norm2d","num_features":{}}}"#, pos[0]),
            "ReLU" => format!(r#"{{"kind":"relu","inplace":{}}}"#, args.contains("inplace=True")),
            "MaxPool2d" => format!(r#"{{"kind":"max_pool2d","kernel_size":{},"stride":{}}}"#, kw("kernel_size").unwrap(), kw("stride").unwrap()),
            "Flatten" => r#"{"kind":"flatten"}"#.to_string(),
            other => panic!("layer {other} not handled"),
        };
        layers.push(serde_json::from_str(&json).unwrap());
    }
    let n = layers.len();
    let _ = n;
    serde_json::from_value(serde_json::json!({"input": {"shape": shape}, "layers": layers})).unwrap()
}

pub fn breakdown_entries(b: &Breakdown) -> [(&'static str, u64); 7] {
    b.entries().map(|(c, bytes)| (c.key(), bytes))
}

pub fn rel_err(est: u64, meas: u64) -> f64 {
    (est as f64 - meas as f64) / meas as f64
}

pub fn estimate(c: &Case) -> Estimate {
    vramcalc_core::estimate(&c.spec, &c.config).unwrap()
}

/// The reference bars applied to `cases`: every peak within `max_err`, and each peak phase right
/// wherever the estimated phase peaks are more than 0.5 % apart (else the phase is a coin toss).
/// Returns the median absolute error and one line per failure.
pub fn check(cases: &[Case], max_err: f64) -> (f64, Vec<String>) {
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for c in cases {
        let e = estimate(c);
        let err = rel_err(e.peak_bytes, c.measured);
        if err.abs() > max_err {
            failures.push(format!("{} {}: measured {} estimated {} ({:+.2} %)", c.label, c.setting, c.measured, e.peak_bytes, err * 100.0));
        }
        errs.push(err.abs());
        let measured_phase = if c.measured_phase == "zero_grad" { "optimizer" } else { c.measured_phase.as_str() };
        let mut sorted = e.phase_peaks;
        sorted.sort_unstable();
        let clear = sorted[2] as f64 > sorted[1] as f64 * 1.005;
        if clear && e.peak_phase.name() != measured_phase {
            failures.push(format!("{} {}: phase measured {} estimated {}", c.label, c.setting, c.measured_phase, e.peak_phase.name()));
        }
    }
    errs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (errs.get(errs.len() / 2).copied().unwrap_or(0.0), failures)
}
