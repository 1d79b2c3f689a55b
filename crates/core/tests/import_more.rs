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

mod props {
    use super::counts;
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use vramcalc_core::import::hf::from_config_json;
    use vramcalc_core::{Prepared, TrainConfig};

    /// A random valid config of `t` (sizes and switches as each config class allows).
    fn config(t: &'static str) -> impl Strategy<Value = Value> {
        (
            (prop::sample::select(vec![1u64, 2, 4]), prop::sample::select(vec![4u64, 8, 16]), 1u64..5, 8u64..500),
            (prop::sample::select(vec![1u64, 2, 4, 8]), 1u64..4, 4u64..80, any::<bool>(), any::<bool>()),
            prop::collection::vec(any::<bool>(), 4),
        )
            .prop_map(move |((heads, hd, layers, vocab), (experts, k, inter, f1, f2), kinds)| {
                let h = heads * hd;
                let mut c = match t {
                    "bloom" => json!({"n_embed": h, "n_head": heads, "n_layer": layers, "hidden_dropout": if f1 { 0.1 } else { 0.0 }}),
                    "mpt" => json!({"d_model": h, "n_heads": heads, "n_layers": layers, "max_seq_len": inter, "no_bias": f1,
                        "attn_config": {"attn_pdrop": if f2 { 0.1 } else { 0.0 }, "alibi": f1}}),
                    "ernie4_5_moe" => json!({"hidden_size": h, "num_attention_heads": heads, "num_key_value_heads": if f1 { heads } else { 1 },
                        "num_hidden_layers": layers, "intermediate_size": inter, "moe_intermediate_size": inter / 2 + 1, "moe_num_experts": experts,
                        "moe_k": k.min(experts), "moe_num_shared_experts": k - 1, "use_bias": f2, "moe_layer_start_index": (k - 1) as i64,
                        "moe_layer_end_index": if f1 { -1 } else { layers as i64 - 1 }, "moe_layer_interval": k}),
                    _ => json!({"hidden_size": h, "num_attention_heads": heads, "num_key_value_heads": if f1 { heads } else { 1 },
                        "num_hidden_layers": layers, "intermediate_size": inter, "num_local_experts": experts, "num_experts_per_tok": k.min(experts),
                        "head_dim": if f2 { json!(hd * 2) } else { json!(null) }, "block_size": inter / 4 + 1,
                        "layer_types": kinds.iter().take(layers as usize).map(|&l| if l { "linear_attention" } else { "full_attention" }).collect::<Vec<_>>()}),
                };
                c["model_type"] = json!(t);
                c["vocab_size"] = json!(vocab);
                c["tie_word_embeddings"] = json!(f1 != f2);
                let stem = match t { "bloom" => "Bloom", "mpt" => "Mpt", "ernie4_5_moe" => "Ernie4_5_Moe", _ => "MiniMax" };
                c["architectures"] = json!([if f1 { format!("{stem}ForCausalLM") } else { format!("{stem}Model") }]);
                c
            })
    }

    fn estimate_runs(text: &str) {
        let spec = from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for seq in [3, 40] {
            let cfg = TrainConfig { batch: 2, seq_len: Some(seq), ..TrainConfig::default() };
            Prepared::new(&spec, &cfg).unwrap_or_else(|e| panic!("{e}\n{text}")).estimate();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

        /// Random valid configs of each type import, and their training step estimates.
        #[test]
        fn random_valid_configs_import(c in prop_oneof![config("bloom"), config("mpt"), config("ernie4_5_moe"), config("minimax")]) {
            estimate_runs(&c.to_string());
        }

        /// Any field of a default config replaced by a value of another type or size: an import
        /// error or a spec, never a panic (nor a hang on `n_layer: 2^62`).
        #[test]
        fn odd_values_never_panic(t in prop::sample::select(super::TYPES.to_vec()), field in 0usize..64, value in prop_oneof![
            Just(json!(0)), Just(json!(-1)), Just(json!(1u64 << 62)), Just(json!(u64::MAX)), Just(json!("x")), Just(json!(null)),
            Just(json!([1, 2])), Just(json!(1.5)), Just(json!(true)), Just(json!({"a": 1}))]) {
            let mut c = counts()[&format!("{t}-default")]["config"].clone();
            let keys: Vec<String> = c.as_object().unwrap().keys().cloned().collect();
            let key = &keys[field % keys.len()];
            c[key.as_str()] = value;
            // small sizes so that an accepted config estimates quickly
            if let Ok(spec) = from_config_json(&c.to_string()) {
                let cfg = TrainConfig { batch: 1, seq_len: Some(4), ..TrainConfig::default() };
                let _ = Prepared::new(&spec, &cfg).map(|p| p.estimate());
            }
        }
    }
}

/// `more_traces.jsonl`: one training step (forward, cross-entropy, backward from `set_to_none`
/// grads; no optimizer) of the real transformers 5.24 class on a small config (vocabulary 1000,
/// hidden 256, 4 heads; BLOOM and MPT 2 layers, their own eager attention only: transformers
/// refuses SDPA for both; ERNIE 4.5 MoE 3 layers, layer 0 dense, 4 experts of 128 with one shared
/// expert, biases; MiniMax a full and a lightning layer, 4 experts, blocks of 64), batch 2,
/// sequence 128, traced by `tools/trace_hf.py` (torch 2.15, CUDA dropout/SDPA emulation). The
/// estimate with `--optimizer sgd` is within 3 % of each.
#[test]
fn training_steps_match_traced_pytorch() {
    hf::assert_traces("hf/more_traces.jsonl", 6, |_| 3.0);
}

/// BLOOM and MPT compute their attention themselves, eagerly (transformers refuses SDPA for
/// both): the estimate under `--attention sdpa` is the eager one, which the traces measure.
#[test]
fn bloom_and_mpt_attend_eagerly_whatever_the_setting() {
    use vramcalc_core::{AttentionImpl, Prepared, TrainConfig};
    for t in ["bloom", "mpt"] {
        let spec = import(&counts()[&format!("{t}-0")]["config"].to_string());
        let peak = |attention| Prepared::new(&spec, &TrainConfig { batch: 2, seq_len: Some(64), attention, ..TrainConfig::default() }).unwrap().estimate().peak_bytes;
        assert_eq!(peak(AttentionImpl::Sdpa), peak(AttentionImpl::Eager), "{t}");
    }
    // a Llama-like decoder does differ: the check can fail
    let spec = import(&counts()["minimax-0"]["config"].to_string());
    let peak = |attention| Prepared::new(&spec, &TrainConfig { batch: 2, seq_len: Some(64), attention, ..TrainConfig::default() }).unwrap().estimate().peak_bytes;
    assert_ne!(peak(AttentionImpl::Sdpa), peak(AttentionImpl::Eager));
}
