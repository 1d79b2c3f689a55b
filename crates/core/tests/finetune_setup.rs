//! The fine-tuning setup: freezing rules, the spec's `"trainable": false`, LoRA's parameters as
//! peft counts them, the bitsandbytes layouts, share links and errors.

use vramcalc_core::finetune::{BaseFormat, FineTune, LossKernel, Method, NameList};
use vramcalc_core::share::{decode, encode, ModelSource, ShareState};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{estimate, ByteUnit, Phase, Precision, TrainConfig};

/// `LlamaForCausalLM` as `shared/reference/llm/` builds it (`llama-h1024-l4`).
fn llama() -> ModelSpec {
    let cfg = serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
        "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2816,
        "vocab_size": 32000, "tie_word_embeddings": false});
    vramcalc_core::import::hf::from_config(cfg.as_object().unwrap()).unwrap()
}

fn lora(r: u32, targets: &str) -> FineTune {
    FineTune { method: Method::Lora, lora_r: r, lora_alpha: 2.0 * r as f64, lora_targets: NameList::parse(targets).unwrap(), ..FineTune::default() }
}

fn cfg(finetune: FineTune) -> TrainConfig {
    TrainConfig { batch: 1, seq_len: Some(256), finetune, ..TrainConfig::default() }
}

#[test]
fn lora_parameters_are_what_peft_reports() {
    let spec = llama();
    // r × (in + out) per wrapped linear; q, o: 1024 → 1024; k, v: 1024 → 256 (4 KV heads of 64);
    // gate, up: 1024 → 2816; down: 2816 → 1024
    let per_layer = |r: u64| r * (2 * 2048 + 2 * 1280 + 3 * 3840);
    let e = estimate(&spec, &cfg(lora(16, "all-linear"))).unwrap();
    assert_eq!(e.trainable_params, 4 * per_layer(16));
    assert_eq!(e.params, 110_633_984 + 4 * per_layer(16));
    // peft's default targets for Llama are q_proj and v_proj
    let e = estimate(&spec, &cfg(FineTune { method: Method::Lora, ..FineTune::default() })).unwrap();
    assert_eq!(e.trainable_params, 4 * 8 * (2048 + 1280));
    // adapters in fp32 on a bf16 base (peft's autocast_adapter_dtype)
    let bf16 = TrainConfig { precision: Precision::Bf16, ..cfg(lora(16, "all-linear")) };
    let e = estimate(&spec, &bf16).unwrap();
    assert_eq!(e.breakdown.adapter_parameters, 4 * per_layer(16) * 4);
    assert_eq!(e.breakdown.frozen_parameters, 110_633_984 * 2);
    assert!(e.breakdown.gradients + e.breakdown.optimizer_state > 0);
}

#[test]
fn quantised_bases_store_packed_weights() {
    let spec = llama();
    let linears: u64 = 4 * (2 * 1024 * 1024 + 2 * 1024 * 256 + 3 * 1024 * 2816);
    // embeddings, lm_head and norms: fp32 after peft's `prepare_model_for_kbit_training`
    let rest = 110_633_984 - linears;
    let q = |format, dq| {
        let ft = FineTune { method: Method::Qlora, base_format: Some(format), double_quant: dq, ..lora(16, "all-linear") };
        estimate(&spec, &TrainConfig { precision: Precision::Bf16, ..cfg(ft) }).unwrap()
    };
    let nf4 = q(BaseFormat::Nf4, false);
    assert_eq!(nf4.quantised_base, Some(BaseFormat::Nf4));
    let blocks = linears / 64;
    // packed halves + fp32 absmax per 64 + a 16-entry code per weight (28 linears)
    assert_eq!(nf4.breakdown.frozen_parameters, rest * 4 + linears / 2 + blocks * 4 + 28 * 64);
    let dq = q(BaseFormat::Nf4, true);
    assert!(dq.breakdown.frozen_parameters < nf4.breakdown.frozen_parameters);
    let int8 = q(BaseFormat::Int8, false);
    assert!(int8.breakdown.frozen_parameters > nf4.breakdown.frozen_parameters);
    // the trainable adapters are the same whatever the base
    assert_eq!(nf4.trainable_params, int8.trainable_params);
    // double quant needs a 4-bit base
    let bad = FineTune { double_quant: true, ..lora(8, "q_proj") };
    let err = estimate(&spec, &cfg(bad)).unwrap_err().to_string();
    assert!(err.contains("--double-quant"), "{err}");
}

#[test]
fn a_frozen_linear_saves_no_input_and_frozen_prefixes_record_nothing() {
    // linear → relu → linear: freezing the first layer leaves nothing to save before the
    // second, whose input it then keeps (its weight trains)
    let spec = |trainable_first: bool| {
        ModelSpec::from_json(&serde_json::json!({"input": {"shape": [512]}, "layers": [
            {"kind": "linear", "in_features": 512, "out_features": 4096, "trainable": trainable_first},
            {"kind": "relu"},
            {"kind": "linear", "in_features": 4096, "out_features": 10}]}).to_string()).unwrap()
    };
    let c = TrainConfig { batch: 64, ..TrainConfig::default() };
    let full = estimate(&spec(true), &c).unwrap();
    let frozen = estimate(&spec(false), &c).unwrap();
    assert_eq!(frozen.trainable_params, 4096 * 10 + 10);
    assert_eq!(full.layers[0].saved_bytes, 64 * 512 * 4);
    let first = frozen.layers.iter().find(|l| l.info.kind == "linear").unwrap();
    assert_eq!(first.saved_bytes, 0);
    // the layer table marks the frozen rows: no trainable parameters in them
    assert_eq!((first.info.params, first.info.trainable_params), (512 * 4096 + 4096, 0));
    assert_eq!(frozen.layers.last().unwrap().info.trainable_params, 4096 * 10 + 10);
    assert!(frozen.optimizer_state_bytes < full.optimizer_state_bytes / 40);
    // the JSON form round-trips through the `frozen` block
    let json = serde_json::to_string(&spec(false)).unwrap();
    assert!(json.contains(r#""kind":"frozen""#), "{json}");
    assert_eq!(ModelSpec::from_json(&json).unwrap(), spec(false));
    let err = ModelSpec::from_json(r#"{"input": {"shape": [4]}, "layers": [{"kind": "relu", "trainable": 0}]}"#).unwrap_err();
    assert!(err.to_string().contains("trainable"), "{err}");
}

#[test]
fn freeze_rules_name_modules_and_blocks() {
    let bert = vramcalc_core::presets::build("bert-base-seqcls").unwrap();
    let freeze = |ft: FineTune| estimate(&bert, &TrainConfig { batch: 8, seq_len: Some(128), finetune: ft, ..TrainConfig::default() }).unwrap();
    let only = |names: &str| freeze(FineTune { method: Method::Freeze, train_only: NameList::parse(names).unwrap(), ..FineTune::default() });
    assert_eq!(only("classifier").trainable_params, 768 * 2 + 2);
    assert_eq!(only("classifier,pooler").trainable_params, 768 * 2 + 2 + 768 * 768 + 768);
    // `--freeze-first 6`: embeddings and layers 0–5 (shared/reference/llm: 43,119,362 train)
    let first6 = freeze(FineTune { method: Method::Freeze, freeze_first: Some(6), ..FineTune::default() });
    assert_eq!(first6.trainable_params, 43_119_362);
    // the peak of a frozen backbone is in the forward pass
    assert_eq!(only("classifier").peak_phase, Phase::Forward);
    // freeze by path: the embeddings' rows
    let by_path = freeze(FineTune { method: Method::Freeze, freeze_paths: NameList::parse("layers[0],layers[1],layers[2]").unwrap(), ..FineTune::default() });
    assert_eq!(by_path.trainable_params, 109_483_778 - (30522 + 2 + 512) * 768);
    // freezing needs a rule
    let err = estimate(&bert, &TrainConfig { finetune: FineTune { method: Method::Freeze, ..FineTune::default() }, ..TrainConfig::default() }).unwrap_err();
    assert!(err.to_string().contains("--train-only"), "{err}");
}

#[test]
fn bert_lora_targets_query_and_value() {
    let bert = vramcalc_core::presets::build("bert-base-seqcls").unwrap();
    let ft = FineTune { method: Method::Lora, lora_targets: NameList::parse("query,value").unwrap(), ..FineTune::default() };
    let e = estimate(&bert, &TrainConfig { batch: 8, seq_len: Some(128), finetune: ft, ..TrainConfig::default() }).unwrap();
    assert_eq!(e.trainable_params, 12 * 2 * 8 * (768 + 768));
    // peft's default for BERT is the same pair
    let d = estimate(&bert, &TrainConfig { batch: 8, seq_len: Some(128), finetune: FineTune { method: Method::Lora, ..FineTune::default() }, ..TrainConfig::default() }).unwrap();
    assert_eq!(d.trainable_params, e.trainable_params);
}

#[test]
fn loss_kernels_remove_the_vocabulary_term() {
    let spec = llama();
    let base = TrainConfig { batch: 4, seq_len: Some(1024), precision: Precision::Bf16, ..cfg(lora(8, "q_proj,v_proj")) };
    let std = estimate(&spec, &base).unwrap();
    let with = |loss| estimate(&spec, &TrainConfig { finetune: FineTune { loss, ..base.finetune }, ..base }).unwrap();
    let bsv = 4 * 1024 * 32000u64;
    // fp32 log-probabilities saved (4 B) → bf16 (2 B), and their gradients likewise
    assert!(std.peak_bytes - with(LossKernel::Bf16Logits).peak_bytes >= bsv * 2);
    // no b·s·V tensor at all
    assert!(std.peak_bytes - with(LossKernel::Chunked).peak_bytes >= bsv * 2 * 3);
}

#[test]
fn share_links_carry_the_fine_tuning_setup() {
    let state = ShareState {
        model: ModelSource::Preset { id: "gpt2".into() },
        config: TrainConfig {
            batch: 4,
            finetune: FineTune { method: Method::Qlora, lora_r: 16, lora_alpha: 32.0, lora_dropout: 0.05, double_quant: true,
                lora_targets: NameList::parse("all-linear").unwrap(), ..FineTune::default() },
            ..TrainConfig::default()
        },
        gpu: None,
        capacity_bytes: None,
        unit: ByteUnit::Mb,
        lang: "en".into(),
        ..ShareState::default()
    };
    let link = encode(&state).unwrap();
    assert!(link.starts_with("v1.p=gpt2,b=4,finetune="), "{link}");
    assert_eq!(decode(&link).unwrap(), state);
    // a link without the field is full training
    assert_eq!(decode("v1.p=gpt2,b=4").unwrap().config.finetune, FineTune::default());
}
