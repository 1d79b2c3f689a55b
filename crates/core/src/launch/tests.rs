//! Every launch line and config parses back to the settings it came from.

use super::*;
use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::distributed::{DistConfig, Offload, Strategy};
use crate::finetune::{BaseFormat, FineTune, LossKernel, Method};

/// The value after `--flag` in a whitespace-split line.
fn flag<'a>(words: &'a [&'a str], name: &str) -> Option<&'a str> {
    words.iter().position(|w| *w == name).and_then(|i| words.get(i + 1).copied())
}

#[test]
fn vllm_serve_parses_back() {
    let cfg = ServeConfig {
        tensor_parallel: 4,
        gpu_memory_utilization: 0.85,
        concurrency: Some(12),
        kv_dtype: KvDtype::Fp8,
        weights: Some(WeightFormat::parse("awq-int4").unwrap()),
        enforce_eager: true,
        ..ServeConfig::new(80 << 30, 32768)
    };
    let line = shell_line(&vllm_serve("meta-llama/Llama-3.1-70B", &cfg));
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&w[..3], ["vllm", "serve", "meta-llama/Llama-3.1-70B"]);
    assert_eq!(flag(&w, "--max-model-len").unwrap().parse::<u64>().unwrap(), cfg.context);
    assert_eq!(flag(&w, "--gpu-memory-utilization").unwrap().parse::<f64>().unwrap(), cfg.gpu_memory_utilization);
    assert_eq!(flag(&w, "--tensor-parallel-size").unwrap().parse::<u64>().unwrap(), 4);
    assert_eq!(flag(&w, "--max-num-seqs").unwrap().parse::<u64>().unwrap(), 12);
    assert_eq!(flag(&w, "--max-num-batched-tokens").unwrap().parse::<u64>().unwrap(), cfg.max_num_batched_tokens);
    assert_eq!(flag(&w, "--kv-cache-dtype"), Some("fp8"));
    assert_eq!(flag(&w, "--quantization"), Some("awq"));
    assert_eq!(flag(&w, "--dtype"), Some("bfloat16"));
    assert!(w.contains(&"--enforce-eager"));
    // defaults leave the optional flags out
    let plain = vllm_serve("m", &ServeConfig::new(80 << 30, 4096));
    assert!(!plain.iter().any(|x| x == "--quantization" || x == "--kv-cache-dtype" || x == "--enforce-eager"));
    assert_eq!(plain.len() % 2, 1, "flag value pairs after `vllm serve m`: {plain:?}");
}

#[test]
fn torchrun_parses_back() {
    for gpus in [1u64, 4, 8, 16, 64] {
        let line = shell_line(&torchrun(gpus, "train.py"));
        let w: Vec<&str> = line.split_whitespace().collect();
        let nodes: u64 = flag(&w, "--nnodes").unwrap().parse().unwrap();
        let per: u64 = flag(&w, "--nproc-per-node").unwrap().parse().unwrap();
        assert_eq!(nodes * per, gpus, "{line}");
        assert_eq!(w.contains(&"--standalone"), nodes == 1);
        assert_eq!(*w.last().unwrap(), "train.py");
    }
}

fn train() -> TrainConfig {
    TrainConfig { batch: 32, grad_accum: 4, seq_len: Some(2048), precision: Precision::AmpBf16, checkpointing: true, ..TrainConfig::default() }
}

#[test]
fn deepspeed_json_parses_back() {
    for (strategy, stage) in [(Strategy::Zero1, 1), (Strategy::Zero2, 2), (Strategy::Zero3, 3)] {
        for offload in [Offload::None, Offload::Optimizer, Offload::Params] {
            if offload == Offload::Params && stage != 3 {
                continue;
            }
            let d = DistConfig { gpus: 16, strategy, offload, ..DistConfig::default() };
            let text = serde_json::to_string_pretty(&sharding::deepspeed_json(&train(), &d).unwrap()).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["zero_optimization"]["stage"], stage);
            assert_eq!(v["train_micro_batch_size_per_gpu"], 8);
            assert_eq!(v["gradient_accumulation_steps"], 4);
            assert_eq!(v["train_batch_size"], 8 * 4 * 16);
            assert_eq!(v["bf16"]["enabled"], true);
            assert_eq!(v["zero_optimization"]["offload_optimizer"]["device"] == "cpu", offload != Offload::None);
            assert_eq!(v["zero_optimization"]["offload_param"]["device"] == "cpu", offload == Offload::Params);
        }
    }
    assert!(sharding::deepspeed_json(&train(), &DistConfig { gpus: 8, strategy: Strategy::Fsdp, ..DistConfig::default() }).is_err());
}

/// A two-level YAML reader: `key: value` lines, nested by two-space indentation.
fn yaml(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut parent = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let nested = line.starts_with("  ");
        assert!(!line.starts_with("   ") && !line.contains('\t'), "indentation: {line:?}");
        let (k, v) = line.trim().split_once(':').unwrap_or_else(|| panic!("not `key: value`: {line:?}"));
        let v = v.trim();
        if !nested {
            parent = k.to_string();
        }
        let key = if nested { format!("{parent}.{k}") } else { k.to_string() };
        assert!(out.insert(key, v.to_string()).is_none(), "duplicate key in {text}");
    }
    out
}

#[test]
fn accelerate_yaml_parses_back() {
    let d = DistConfig { gpus: 8, strategy: Strategy::Fsdp, reshard_after_forward: false, ..DistConfig::default() };
    let y = yaml(&sharding::accelerate_yaml(&train(), &d).unwrap());
    assert_eq!(y["distributed_type"], "FSDP");
    assert_eq!(y["num_processes"], "8");
    assert_eq!(y["mixed_precision"], "bf16");
    assert_eq!(y["fsdp_config"], "");
    assert_eq!(y["fsdp_config.fsdp_version"], "2");
    assert_eq!(y["fsdp_config.fsdp_reshard_after_forward"], "false");
    assert_eq!(y["fsdp_config.fsdp_activation_checkpointing"], "true");
    let z = yaml(&sharding::accelerate_yaml(&train(), &DistConfig { gpus: 16, strategy: Strategy::Zero3, ..DistConfig::default() }).unwrap());
    assert_eq!(z["distributed_type"], "DEEPSPEED");
    assert_eq!(z["num_machines"], "2");
    assert_eq!(z["deepspeed_config.deepspeed_config_file"], "ds_config.json");
    let ddp = yaml(&sharding::accelerate_yaml(&TrainConfig { precision: Precision::Fp32, ..train() }, &DistConfig { gpus: 4, ..DistConfig::default() }).unwrap());
    assert_eq!((ddp["distributed_type"].as_str(), ddp["mixed_precision"].as_str()), ("MULTI_GPU", "no"));
}

/// The `name(` … `)` call's `key=value` arguments of a generated snippet.
fn call_args(text: &str, name: &str) -> std::collections::BTreeMap<String, String> {
    let start = text.find(&format!("{name}(\n")).unwrap_or_else(|| panic!("no {name}( in\n{text}"));
    let body = &text[start + name.len() + 2..];
    let end = body.find("\n)").unwrap();
    body[..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.trim_end_matches(',').split_once('=').unwrap_or_else(|| panic!("{l:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn peft_snippet_parses_back() {
    let qlora = FineTune {
        method: Method::Qlora,
        lora_r: 32,
        lora_alpha: 64.0,
        lora_dropout: 0.05,
        lora_targets: crate::finetune::NameList::parse("q_proj,k_proj,v_proj").unwrap(),
        base_format: Some(BaseFormat::Nf4),
        double_quant: true,
        loss: LossKernel::Chunked,
        ..FineTune::default()
    };
    let c = TrainConfig { precision: Precision::Bf16, optimizer: OptimizerKind::PagedAdamw8bit, finetune: qlora, ..train() };
    let text = python::peft_snippet("meta-llama/Llama-3.1-8B", &c).unwrap();
    let bnb = call_args(&text, "BitsAndBytesConfig");
    assert_eq!(bnb["load_in_4bit"], "True");
    assert_eq!(bnb["bnb_4bit_quant_type"], "\"nf4\"");
    assert_eq!(bnb["bnb_4bit_use_double_quant"], "True");
    let lora = call_args(&text, "LoraConfig");
    assert_eq!(lora["r"].parse::<u32>().unwrap(), 32);
    assert_eq!(lora["lora_alpha"].parse::<f64>().unwrap(), 64.0);
    assert_eq!(lora["lora_dropout"].parse::<f64>().unwrap(), 0.05);
    assert_eq!(lora["target_modules"], "[\"q_proj\", \"k_proj\", \"v_proj\"]");
    let args = call_args(&text, "TrainingArguments");
    assert_eq!(args["per_device_train_batch_size"].parse::<u64>().unwrap(), c.micro_batch());
    assert_eq!(args["gradient_accumulation_steps"].parse::<u64>().unwrap(), 4);
    assert_eq!(args["gradient_checkpointing"], "True");
    assert_eq!(args["optim"], "\"paged_adamw_8bit\"");
    assert_eq!(args["use_liger_kernel"], "True");
    assert!(text.contains("max_length=2048"));
    // a full fine-tune has no adapters and no quantisation
    let full = python::peft_snippet("m", &train()).unwrap();
    assert!(!full.contains("LoraConfig(") && !full.contains("BitsAndBytesConfig(\n"));
    assert_eq!(call_args(&full, "TrainingArguments")["bf16"], "True");
    assert!(python::peft_snippet("m", &TrainConfig { mode: Mode::Infer, ..train() }).is_err());
}

#[test]
fn the_measurement_script_runs_the_estimated_step() {
    let c = TrainConfig { batch: 8, grad_accum: 2, precision: Precision::AmpBf16, ..TrainConfig::default() };
    let s = measure::script(measure::Model::Torchvision("resnet50"), &c, 123_456, 789).unwrap();
    for needle in ["torch.cuda.reset_peak_memory_stats()", "torch.cuda.max_memory_allocated()", "torchvision.models.resnet50()", "torch.randn(4, 3, 224, 224",
        "for _ in range(2):", "zero_grad(set_to_none=True)", "dtype=torch.bfloat16", "estimate = 123456", "torch.optim.AdamW(params, lr=1e-4, foreach=True)"] {
        assert!(s.contains(needle), "{needle} not in\n{s}");
    }
    let lm = measure::script(measure::Model::CausalLm("Qwen/Qwen2.5-0.5B"), &TrainConfig { mode: Mode::Infer, seq_len: Some(512), ..c }, 1, 2).unwrap();
    assert!(lm.contains("torch.no_grad()") && lm.contains("(4, 512)") && !lm.contains("optimizer"), "{lm}");
}

/// The `key=value` arguments of the one-line call `name(…)` in `text`.
fn inline_args(text: &str, name: &str) -> std::collections::BTreeMap<String, String> {
    let start = text.find(&format!("{name}(")).unwrap_or_else(|| panic!("no {name}( in\n{text}")) + name.len() + 1;
    let line = &text[start..text[start..].find('\n').map_or(text.len(), |e| start + e)];
    let body = line.strip_suffix(')').unwrap_or_else(|| panic!("{line:?}"));
    body.split(", ").filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn the_measurement_script_builds_the_lora_qlora_and_generate_setups() {
    let lora = FineTune {
        method: Method::Lora,
        lora_r: 16,
        lora_alpha: 32.0,
        lora_dropout: 0.1,
        lora_targets: crate::finetune::NameList::parse("q_proj,v_proj,o_proj").unwrap(),
        ..FineTune::default()
    };
    let c = TrainConfig { batch: 4, seq_len: Some(2048), precision: Precision::Bf16, checkpointing: true, finetune: lora, ..TrainConfig::default() };
    let m = measure::Model::CausalLm("meta-llama/Llama-3.1-8B");
    let s = measure::script(m, &c, 10, 20).unwrap();
    // LoRA: built from the config on the GPU, the same adapters
    assert!(s.contains("AutoConfig.from_pretrained(\"meta-llama/Llama-3.1-8B\")") && s.contains("with torch.device(device):"), "{s}");
    assert_eq!(inline_args(&s, "AutoModelForCausalLM.from_config")["dtype"], "torch.bfloat16");
    let l = call_args(&s, "LoraConfig");
    assert_eq!((l["r"].as_str(), l["lora_alpha"].parse::<f64>().unwrap(), l["lora_dropout"].parse::<f64>().unwrap()), ("16", 32.0, 0.1));
    assert_eq!(l["target_modules"], "[\"q_proj\", \"v_proj\", \"o_proj\"]");
    assert!(s.contains("model = get_peft_model(model, lora_config)") && s.contains("model.gradient_checkpointing_enable()"));
    assert!(s.contains("(4, 2048)") && s.contains("torch.cuda.reset_peak_memory_stats()") && s.contains("max_memory_allocated()"));
    assert!(!s.contains("BitsAndBytesConfig("), "{s}");
    // QLoRA: the checkpoint loaded with the same BitsAndBytesConfig, then prepared for k-bit training
    let q = FineTune { method: Method::Qlora, base_format: Some(BaseFormat::Fp4), double_quant: true, ..lora };
    let s = measure::script(m, &TrainConfig { finetune: q, ..c }, 10, 20).unwrap();
    let b = call_args(&s, "BitsAndBytesConfig");
    assert_eq!((b["load_in_4bit"].as_str(), b["bnb_4bit_quant_type"].as_str(), b["bnb_4bit_use_double_quant"].as_str()), ("True", "\"fp4\"", "True"));
    assert_eq!(b["bnb_4bit_compute_dtype"], "torch.bfloat16");
    assert_eq!(inline_args(&s, "AutoModelForCausalLM.from_pretrained")["quantization_config"], "bnb_config");
    assert!(s.contains("prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)"), "{s}");
    let int8 = FineTune { method: Method::Qlora, base_format: Some(BaseFormat::Int8), ..lora };
    assert_eq!(call_args(&measure::script(m, &TrainConfig { finetune: int8, ..c }, 1, 2).unwrap(), "BitsAndBytesConfig")["load_in_8bit"], "True");
    // generate: the same prompt, new tokens and cache
    let mut g = TrainConfig { mode: Mode::Generate, batch: 2, precision: Precision::Bf16, ..TrainConfig::default() };
    g.generate.prompt_len = Some(1000);
    g.generate.new_tokens = 64;
    g.generate.cache = crate::generation::KvCacheKind::Static;
    let s = measure::script(m, &g, 10, 20).unwrap();
    let a = inline_args(&s, "model.generate");
    assert_eq!((a["max_new_tokens"].as_str(), a["min_new_tokens"].as_str(), a["do_sample"].as_str()), ("64", "64", "False"));
    assert_eq!(a["cache_implementation"], "\"static\"");
    assert!(s.contains("(2, 1000)") && s.contains("torch.no_grad()") && !s.contains("optimizer"), "{s}");
    let dynamic = TrainConfig { generate: crate::GenerateConfig { cache: crate::generation::KvCacheKind::Dynamic, ..g.generate }, ..g };
    assert!(!inline_args(&measure::script(m, &dynamic, 1, 2).unwrap(), "model.generate").contains_key("cache_implementation"));
    // nf4 weights load quantised; a format bitsandbytes does not make is refused, as is a paged cache
    let nf4 = TrainConfig { weights: Some(WeightFormat::parse("nf4").unwrap()), ..g };
    assert_eq!(call_args(&measure::script(m, &nf4, 1, 2).unwrap(), "BitsAndBytesConfig")["bnb_4bit_quant_type"], "\"nf4\"");
    assert!(measure::script(m, &TrainConfig { weights: Some(WeightFormat::parse("gptq-int4").unwrap()), ..g }, 1, 2).is_err());
    let paged = TrainConfig { generate: crate::GenerateConfig { cache: crate::generation::KvCacheKind::Paged, ..g.generate }, ..g };
    assert!(measure::script(m, &paged, 1, 2).is_err());
    assert!(measure::script(measure::Model::Torchvision("resnet50"), &TrainConfig { finetune: lora, ..c }, 1, 2).is_err());
}
