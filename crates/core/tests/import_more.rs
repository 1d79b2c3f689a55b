//! Issue 25's further decoders (`ernie4_5_moe`, `bloom`, `mpt`, `minimax`): every class in
//! `more_counts.json` (`tools/hf_param_counts.py --seed 28 --per-type 4 --full-dict --types
//! ernie4_5_moe bloom mpt minimax`: each class at its library defaults, as causal LM and bare
//! model, plus 4 random valid configs each, written as `to_json_string(use_diff=False)` writes
//! them) imports as that class with exactly `sum(p.numel() for p in model.parameters())` of
//! transformers 5.24 on the meta device.

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::ModelSpec;

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The `model_type`s `more_counts.json` covers.
const TYPES: &[&str] = &["ernie4_5_moe", "bloom", "mpt", "minimax"];

fn counts() -> serde_json::Map<String, serde_json::Value> {
    let all: serde_json::Value = serde_json::from_str(&hf::data("hf/more_counts.json")).unwrap();
    all.as_object().unwrap().clone()
}

#[test]
fn more_decoders_have_pytorch_parameter_counts() {
    let all = counts();
    assert_eq!(all.len(), TYPES.len() * 6);
    for (name, want) in &all {
        let t = name.rsplit_once('-').unwrap().0;
        assert!(TYPES.contains(&t), "{name}");
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}

#[test]
fn fields_that_change_memory_unmodelled_are_refused_by_name() {
    for (text, field) in [
        (r#"{"model_type": "mpt", "attn_config": {"clip_qkv": 8.0}}"#, "clip_qkv"),
        (r#"{"model_type": "mpt", "attn_config": {"attn_type": "multiquery_attention"}}"#, "attn_type"),
        (r#"{"model_type": "mpt", "expansion_ratio": 8}"#, "expansion_ratio"),
        (r#"{"model_type": "bloom", "apply_residual_connection_post_layernorm": true}"#, "apply_residual_connection_post_layernorm"),
        (r#"{"model_type": "bloom", "pretraining_tp": 4, "slow_but_exact": true}"#, "slow_but_exact"),
        (r#"{"model_type": "ernie4_5_moe", "moe_k": 9, "moe_num_experts": 8}"#, "moe_k"),
        (r#"{"model_type": "ernie4_5_moe", "moe_layer_end_index": -2}"#, "moe_layer_end_index"),
        (r#"{"model_type": "bloom", "made_up_field": 1}"#, "made_up_field"),
    ] {
        let m = import_err(text);
        assert!(m.contains(field), "{text}: {m}");
    }
}

#[test]
fn minimax_layer_types_pick_the_mixer_and_its_cache() {
    use vramcalc_core::spec::Layer;
    let c = |types: &str| format!(r#"{{"model_type": "minimax", "architectures": ["MiniMaxForCausalLM"], "vocab_size": 100, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32, "num_hidden_layers": 4, "num_local_experts": 2,
        "num_experts_per_tok": 1, "block_size": 16, "layer_types": {types}}}"#);
    let lightning = |spec: &ModelSpec| spec.layers.iter().any(|l| l.any(&|l: &Layer| matches!(l, Layer::LightningAttention(_))));
    let all_full = import(&c(r#"["full_attention", "full_attention", "full_attention", "full_attention"]"#));
    let mixed = import(&c(r#"["full_attention", "linear_attention", "linear_attention", "linear_attention"]"#));
    assert!(!lightning(&all_full) && lightning(&mixed));
    // a lightning layer has 64·(3·64) + 2·64·64 + 64 parameters against attention's 2·64·64 + 2·64·32
    assert_eq!(params(&mixed) - params(&all_full), 3 * (64 * 192 + 2 * 64 * 64 + 64 - (2 * 64 * 64 + 2 * 64 * 32)));
    let m = import_err(&c(r#"["full_attention", "mamba", "full_attention", "full_attention"]"#));
    assert!(m.contains("layer_types"), "{m}");
}

/// MiniMax in `generate()`: the full-attention layers' K/V grow with the tokens; each lightning
/// layer caches one `[heads, head_dim, head_dim]` state in the compute dtype
/// (`MiniMaxCache.set_linear_cache(layer_idx, attn_weights_inter)`, `torch.zeros(…,
/// dtype=value_states.dtype)`), whatever the length or the cache kind.
#[test]
fn minimax_cache_is_kv_plus_a_fixed_state_per_lightning_layer() {
    use vramcalc_core::{estimate, GenerateConfig, KvCacheKind, Mode, Precision, TrainConfig};
    let spec = import(r#"{"model_type": "minimax", "architectures": ["MiniMaxForCausalLM"], "vocab_size": 100, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32, "num_hidden_layers": 4, "num_local_experts": 2,
        "num_experts_per_tok": 1, "block_size": 16}"#);
    let kv_end = |prompt: u64, new_tokens: u64, cache: KvCacheKind| {
        let generate = GenerateConfig { prompt_len: Some(prompt), new_tokens, cache, logits_to_keep: 1, kv_dtype: None };
        let config = TrainConfig { batch: 2, precision: Precision::Bf16, mode: Mode::Generate, generate, ..TrainConfig::default() };
        estimate(&spec, &config).unwrap().generation.unwrap().kv_cache_bytes
    };
    // layers 0 and 2 full (2 K/V heads of 16, bf16), 1 and 3 lightning (4 × 16 × 16, bf16); batch 2
    let state = 2 * 2 * (4 * 16 * 16 * 2);
    let kv = |tokens: u64| 2 * 2 * (2 * 2 * 16 * tokens * 2);
    for (p, g) in [(10u64, 5u64), (200, 57)] {
        assert_eq!(kv_end(p, g, KvCacheKind::Dynamic), state + kv(p + g - 1), "{p} + {g}");
    }
}
