//! Hugging Face `config.json` import: the real configs in `tests/data/` (copied from
//! `../shared/reference/hf/`) give exactly the parameter counts PyTorch reports for the class in
//! `architectures` (`tests/data/params.json`), and bad configs give clear errors, never panics.

use vramcalc_core::import::hf::from_config_json;
#[path = "common/hf.rs"]
mod hf;
use hf::{data, import_err, params};
use vramcalc_core::{ModelSpec, Prepared, TrainConfig};

#[test]
fn reference_configs_have_pytorch_parameter_counts() {
    let expected: serde_json::Value = serde_json::from_str(&data("params.json")).unwrap();
    let expected = expected.as_object().unwrap();
    assert_eq!(expected.len(), 4);
    for (model, want) in expected {
        let spec = from_config_json(&data(&format!("{model}.config.json"))).unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!(spec.name.as_deref(), want["class"].as_str(), "{model}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{model}");
        // importing gives an ordinary spec: it round-trips through JSON
        assert_eq!(ModelSpec::from_json(&spec.to_json_pretty()).unwrap(), spec, "{model}");
    }
}

#[test]
fn counts_spelled_out() {
    // the same numbers as params.json, to read without the data file
    for (file, n) in [
        ("bert-base-uncased", 109_482_240u64),
        ("gpt2", 124_439_808),
        ("tinyllama-1.1b", 1_100_048_384),
        ("vit-base-patch16-224", 86_567_656),
    ] {
        assert_eq!(params(&from_config_json(&data(&format!("{file}.config.json"))).unwrap()), n, "{file}");
    }
}

#[test]
fn bert_heads_follow_architectures() {
    let base = data("bert-base-uncased.config.json");
    let cls = base.replace("\"BertModel\"", "\"BertForSequenceClassification\"");
    // classifier 768·2 + 2 on top of BertModel
    assert_eq!(params(&from_config_json(&cls).unwrap()), 109_482_240 + 768 * 2 + 2);
    let three = cls.replace("\"num_attention_heads\"", "\"num_labels\": 3, \"num_attention_heads\"");
    assert_eq!(params(&from_config_json(&three).unwrap()), 109_482_240 + 768 * 3 + 3);
    // an unsupported head falls back to the base model and says so
    let mlm = base.replace("\"BertModel\"", "\"BertForMaskedLM\"");
    let spec = from_config_json(&mlm).unwrap();
    assert!(spec.name.unwrap().starts_with("BertModel (imported from a BertForMaskedLM"));
    // bert-large by its sizes
    let large = base
        .replace("\"hidden_size\": 768", "\"hidden_size\": 1024")
        .replace("\"num_hidden_layers\": 12", "\"num_hidden_layers\": 24")
        .replace("\"num_attention_heads\": 12", "\"num_attention_heads\": 16")
        .replace("\"intermediate_size\": 3072", "\"intermediate_size\": 4096");
    assert_eq!(params(&from_config_json(&large).unwrap()), 335_141_888);
}

#[test]
fn gpt2_variants() {
    let small = data("gpt2.config.json");
    // GPT2Model: no lm_head (tied, so the same count)
    let model = small.replace("\"GPT2LMHeadModel\"", "\"GPT2Model\"");
    assert_eq!(params(&from_config_json(&model).unwrap()), 124_439_808);
    // untied: lm_head adds 768·50257
    let untied = small.replace("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    assert_eq!(params(&from_config_json(&untied).unwrap()), 124_439_808 + 768 * 50257);
    // gpt2-medium (transformers: 354,823,168 parameters)
    let medium = small
        .replace("\"n_embd\": 768", "\"n_embd\": 1024")
        .replace("\"n_layer\": 12", "\"n_layer\": 24")
        .replace("\"n_head\": 12", "\"n_head\": 16");
    assert_eq!(params(&from_config_json(&medium).unwrap()), 354_823_168);
}

#[test]
fn llama_variants() {
    let tiny = data("tinyllama-1.1b.config.json");
    let spec = from_config_json(&tiny).unwrap();
    assert_eq!(spec.input.shape, vec![2048]);
    // tied: lm_head shares embed_tokens (32000·2048 fewer)
    let tied = tiny.replace("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
    assert_eq!(params(&from_config_json(&tied).unwrap()), 1_100_048_384 - 32000 * 2048);
    // Llama-2-7b's config (transformers: 6,738,415,616 parameters); omitted fields use LlamaConfig defaults
    let llama2 = r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
        "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
        "vocab_size": 32000, "tie_word_embeddings": false}"#;
    assert_eq!(params(&from_config_json(llama2).unwrap()), 6_738_415_616);
    // LlamaModel: no lm_head
    let model = tiny.replace("\"LlamaForCausalLM\"", "\"LlamaModel\"");
    assert_eq!(params(&from_config_json(&model).unwrap()), 1_100_048_384 - 32000 * 2048);
}

#[test]
fn vit_variants() {
    let base = data("vit-base-patch16-224.config.json");
    // ViTModel: pooler 768·768 + 768 instead of the 1000-way classifier
    let model = base.replace("\"ViTForImageClassification\"", "\"ViTModel\"");
    assert_eq!(params(&from_config_json(&model).unwrap()), 86_567_656 - (768 * 1000 + 1000) + 768 * 768 + 768);
    // num_labels wins over id2label; 384×384 input has 24·24 + 1 positions
    let v = base.replace("\"image_size\": 224", "\"image_size\": 384, \"num_labels\": 10");
    let spec = from_config_json(&v).unwrap();
    assert_eq!(spec.input.shape, vec![3, 384, 384]);
    let pos = (24 * 24 + 1) * 768;
    assert_eq!(params(&spec), 86_567_656 - 197 * 768 + pos - (768 * 1000 + 1000) + (768 * 10 + 10));
}

#[test]
fn missing_and_unsupported_fields_are_named() {
    let m = import_err(r#"{"model_type": "no_such_model", "d_model": 512}"#);
    assert!(m.contains("unsupported model_type `no_such_model`") && m.contains("llama"), "{m}");
    let m = import_err(r#"{"hidden_size": 768}"#);
    assert!(m.contains("missing field `model_type`"), "{m}");
    let m = import_err(r#"{"model_type": "bert", "hidden_size": "big"}"#);
    assert!(m.contains("`hidden_size`") && m.contains("integer"), "{m}");
    let m = import_err(r#"{"model_type": "gpt2", "n_layer": 0}"#);
    assert!(m.contains("`n_layer`"), "{m}");
    let m = import_err(r#"{"model_type": "bert", "hidden_act": "mish"}"#);
    assert!(m.contains("`hidden_act`") && m.contains("mish"), "{m}");
    let m = import_err(r#"{"model_type": "llama", "attention_bias": true}"#);
    assert!(m.contains("attention_bias"), "{m}");
    assert!(import_err("[1, 2]").contains("object"));
    assert!(import_err("{").contains("JSON"));
    // model_type can be inferred from architectures
    assert!(from_config_json(r#"{"architectures": ["GPT2LMHeadModel"]}"#).is_ok());
}

#[test]
fn defaults_are_transformers_defaults() {
    // an empty BERT config is bert-base-uncased's architecture
    assert_eq!(params(&from_config_json(r#"{"model_type": "bert"}"#).unwrap()), 109_482_240);
    assert_eq!(params(&from_config_json(r#"{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}"#).unwrap()), 124_439_808);
    assert_eq!(
        params(&from_config_json(r#"{"model_type": "vit", "architectures": ["ViTForImageClassification"], "num_labels": 1000}"#).unwrap()),
        86_567_656
    );
}

#[test]
fn odd_json_never_panics() {
    let cases = [
        "null", "0", "\"bert\"", "{}", r#"{"model_type": null}"#, r#"{"model_type": 7}"#,
        r#"{"model_type": "bert", "architectures": "BertModel"}"#,
        r#"{"model_type": "bert", "architectures": [1]}"#, r#"{"model_type": "bert", "architectures": []}"#,
        r#"{"model_type": "bert", "id2label": [1]}"#, r#"{"model_type": "vit", "image_size": [1, 2, 3]}"#,
        r#"{"model_type": "vit", "image_size": 8, "patch_size": 16}"#,
        r#"{"model_type": "vit", "patch_size": -1}"#, r#"{"model_type": "gpt2", "n_embd": 1e300}"#,
        r#"{"model_type": "gpt2", "n_embd": 18446744073709551615, "n_inner": 1}"#,
        r#"{"model_type": "llama", "hidden_size": 18446744073709551615, "head_dim": 2}"#,
        r#"{"model_type": "bert", "hidden_dropout_prob": 2}"#, r#"{"model_type": "bert", "layer_norm_eps": -1}"#,
        r#"{"model_type": "llama", "num_hidden_layers": 1000000000000}"#,
    ];
    for text in cases {
        if let Ok(spec) = from_config_json(text) {
            // whatever imports also resolves or fails cleanly
            let _ = Prepared::new(&spec, &TrainConfig { batch: 1, seq_len: Some(4), ..Default::default() }).map(|p| p.estimate());
        }
    }
    let deep = "[".repeat(100_000);
    assert!(from_config_json(&deep).is_err());
}
