//! QLoRA on mixture-of-experts models against what bitsandbytes and peft do:
//! `tests/data/moe_bnb_quantised.txt`, made by `tools/measure_moe_bnb.py` (transformers 5.24,
//! bitsandbytes 0.50.2, peft 0.21.2; tiny Llama, Mixtral and DeepSeek-V3 configs loaded with
//! `BitsAndBytesConfig(load_in_4bit, nf4)` in bf16, then `prepare_model_for_kbit_training`).
//!
//! Measured there: bitsandbytes replaces every `nn.Linear` but `lm_head` by a `Linear4bit`
//! (attention, DeepSeek's latent projections, shared experts, the dense layers' MLP); the fused
//! routed experts (`experts.gate_up_proj` / `down_proj`, 3-d `nn.Parameter`s) and the routers stay
//! parameters and `prepare_model_for_kbit_training` casts them to fp32. peft's `LoraConfig()` with
//! its default targets raises `NoMatchingPeftModuleError` on the two MoE models.

use vramcalc_core::finetune::{FineTune, Method, NameList};
use vramcalc_core::lower::LowerOptions;
use vramcalc_core::{Precision, TrainConfig};

const DATA: &str = include_str!("data/moe_bnb_quantised.txt");

/// One base parameter: (elements, quantised, stored bytes).
type Param = (u64, bool, u64);

struct Record {
    config: String,
    params: Vec<Param>,
    /// `(targets, result)` of the `lora` lines.
    lora: Vec<(String, String)>,
}

fn records() -> Vec<(String, Record)> {
    let mut out: Vec<(String, Record)> = Vec::new();
    for line in DATA.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        if out.last().is_none_or(|(m, _)| m != f[0]) {
            out.push((f[0].to_string(), Record { config: String::new(), params: Vec::new(), lora: Vec::new() }));
        }
        let r = &mut out.last_mut().unwrap().1;
        match f[1] {
            "config" => r.config = f[2].to_string(),
            "param" => {
                let numel = f[6].split('x').map(|d| d.parse::<u64>().unwrap()).product();
                r.params.push((numel, f[3] == "Params4bit", f[7].parse().unwrap()));
            }
            "lora" => r.lora.push((f[2].to_string(), f[3].to_string())),
            other => panic!("unknown record kind {other}"),
        }
    }
    out
}

fn qlora(targets: &str) -> FineTune {
    FineTune { method: Method::Qlora, lora_r: 16, lora_targets: NameList::parse(targets).unwrap(), ..FineTune::default() }
}

fn lower(finetune: FineTune) -> LowerOptions {
    LowerOptions { precision: Precision::Bf16, finetune, ..LowerOptions::default() }
}

/// The core's base parameters (adapters left out) under QLoRA, and the adapters' bytes.
fn core_params(spec: &vramcalc_core::ModelSpec) -> (Vec<Param>, u64) {
    // `o_proj` is a LoRA target in all three models; the base does not depend on the targets
    let r = vramcalc_core::resolve::resolve(spec, Some(16), lower(qlora("o_proj"))).unwrap();
    let g = &r.graph;
    let base = g.params
        .iter()
        .filter(|p| !g.adapters.contains(p))
        .map(|&p| {
            let v = g.value(p);
            let bytes = g.storages[v.storage as usize].bytes.fixed;
            let numel = v.shape.numel();
            // not quantised: the fp32 of `prepare_model_for_kbit_training`
            let plain = numel * v.dtype.size();
            (numel, bytes != plain || v.dtype != vramcalc_core::DType::F32, bytes)
        })
        .collect();
    (base, g.adapter_bytes())
}

#[test]
fn the_core_quantises_the_parameters_bitsandbytes_quantises() {
    let recs = records();
    assert_eq!(recs.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(), ["llama", "mixtral", "deepseek_v3"]);
    for (model, r) in &recs {
        let spec = vramcalc_core::import::hf::from_config_json(&r.config).unwrap();
        let mut want = r.params.clone();
        let (mut got, adapters) = core_params(&spec);
        want.sort();
        got.sort();
        let total = |ps: &[Param], q: bool| ps.iter().filter(|p| p.1 == q).map(|p| p.2).sum::<u64>();
        eprintln!(
            "{model}: quantised {} B (measured {} B), unquantised {} B (measured {} B)",
            total(&got, true),
            total(&want, true),
            total(&got, false),
            total(&want, false)
        );
        assert_eq!(got, want, "{model}: (elements, quantised, stored bytes) of every base parameter");
        // the estimate's parameter bytes are the same total
        let cfg = TrainConfig { precision: Precision::Bf16, seq_len: Some(16), batch: 1, finetune: qlora("o_proj"), ..TrainConfig::default() };
        let e = vramcalc_core::estimate(&spec, &cfg).unwrap();
        assert_eq!(e.param_bytes - adapters, want.iter().map(|p| p.2).sum::<u64>(), "{model}");
    }
}

/// peft's adapters where it adapts linears only: the same trainable count; where it also adapts
/// the fused experts (`all-linear` on Mixtral and DeepSeek-V3), a refusal naming the reason.
#[test]
fn lora_targets_adapt_what_peft_adapts() {
    let mut checked = 0;
    for (model, r) in records() {
        let spec = vramcalc_core::import::hf::from_config_json(&r.config).unwrap();
        for (targets, result) in r.lora.iter().filter(|(t, _)| t != "default") {
            let cfg = TrainConfig { precision: Precision::Bf16, seq_len: Some(16), batch: 1, finetune: qlora(targets), ..TrainConfig::default() };
            let got = vramcalc_core::estimate(&spec, &cfg);
            let f: Vec<&str> = result.split(' ').collect();
            assert_eq!(f[0], "ok", "{model} {targets}: {result}");
            if f[2].split(',').any(|m| m == "experts") {
                let err = got.err().unwrap_or_else(|| panic!("{model} {targets}: peft adapts the experts, the core estimated")).to_string();
                assert!(err.contains("--lora-targets") && err.contains("target_parameters"), "{model}: {err}");
            } else {
                let e = got.unwrap_or_else(|e| panic!("{model} {targets}: {e}"));
                assert_eq!(e.trainable_params, f[3].parse::<u64>().unwrap(), "{model} {targets}: trainable parameters ({})", f[2]);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4);
}

#[test]
fn default_targets_that_peft_refuses_are_refused() {
    for (model, r) in records() {
        let spec = vramcalc_core::import::hf::from_config_json(&r.config).unwrap();
        let (_, result) = r.lora.iter().find(|(t, _)| t == "default").unwrap();
        let cfg = TrainConfig { precision: Precision::Bf16, seq_len: Some(16), batch: 1, finetune: qlora(""), ..TrainConfig::default() };
        let got = vramcalc_core::estimate(&spec, &cfg);
        if result.starts_with("ok ") {
            let e = got.unwrap_or_else(|e| panic!("{model}: {e}"));
            assert!(e.trainable_params > 0, "{model}");
        } else {
            assert_eq!(result, "NoMatchingPeftModuleError", "{model}");
            let err = got.err().unwrap_or_else(|| panic!("{model}: peft raises {result}, the core estimated")).to_string();
            assert!(err.contains("--lora-targets"), "{model}: {err}");
        }
        // targets that name no linear of the model are refused the same way (peft:
        // "Target modules {…} not found in the base model")
        let cfg = TrainConfig { finetune: qlora("no_such_proj"), ..cfg };
        let err = vramcalc_core::estimate(&spec, &cfg).err().unwrap_or_else(|| panic!("{model}: no target matched")).to_string();
        assert!(err.contains("--lora-targets") && err.contains("no_such_proj"), "{model}: {err}");
    }
}
