//! Issue 25's decoders with layers of more than one kind (Mamba, Mamba-2, Qwen3-Next, Llama 4's
//! text model, Jamba, Bamba, Falcon-H1): `hybrid_counts.json` (`tools/hf_param_counts.py
//! --seed 26 --per-type 4 --full-dict --types mamba mamba2 qwen3_next llama4_text jamba bamba
//! falcon_h1`: each class at its library defaults, as causal LM and as bare model, plus 4 random
//! valid configs each, written as
//! `to_json_string(use_diff=False)` does) imports as the class built with exactly
//! `sum(p.numel() for p in model.parameters())` of transformers 5.24 on the meta device.

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::ModelSpec;

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn hybrid_decoders_have_pytorch_parameter_counts() {
    let all: serde_json::Value = serde_json::from_str(&hf::data("hf/hybrid_counts.json")).unwrap();
    let all = all.as_object().unwrap();
    assert_eq!(all.len(), 7 * 6);
    for (name, want) in all {
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
        assert_eq!(ModelSpec::from_json(&spec.to_json_pretty()).unwrap(), spec, "{name}: JSON round trip");
    }
}

#[test]
fn unmodelled_layer_kinds_are_refused_by_name() {
    let m = import_err(r#"{"model_type": "qwen3_next", "num_hidden_layers": 2, "layer_types": ["linear_attention", "sliding_attention"]}"#);
    assert!(m.contains("layer_types") && m.contains("sliding_attention"), "{m}");
    let m = import_err(r#"{"model_type": "mamba2", "hidden_size": 64, "num_heads": 3, "head_dim": 16}"#);
    assert!(m.contains("num_heads × head_dim"), "{m}");
    let m = import_err(r#"{"model_type": "mamba", "hidden_act": "gelu"}"#);
    assert!(m.contains("hidden_act"), "{m}");
}

mod caches {
    use super::import;
    use vramcalc_core::{estimate, GenerateConfig, KvCacheKind, Mode, Precision, TrainConfig};

    /// Bytes the cache holds at the end of `generate()` (bf16, batch `b`).
    fn kv_end(spec: &vramcalc_core::ModelSpec, b: u64, prompt: u64, new_tokens: u64, cache: KvCacheKind) -> u64 {
        let generate = GenerateConfig { prompt_len: Some(prompt), new_tokens, cache, logits_to_keep: 1, kv_dtype: None };
        let config = TrainConfig { batch: b, precision: Precision::Bf16, mode: Mode::Generate, generate, ..TrainConfig::default() };
        estimate(spec, &config).unwrap().generation.unwrap().kv_cache_bytes
    }

    /// Mamba: per layer and sequence a conv state `[I, K]` in bf16 and an fp32 SSM state
    /// `[I, N]` (`LinearAttentionLayer.lazy_initialization`), whatever the length or cache kind.
    #[test]
    fn mamba_state_is_fixed_per_sequence() {
        let spec = import(r#"{"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 3, "vocab_size": 100, "state_size": 16, "conv_kernel": 4}"#);
        let want = 3 * (128 * 4 * 2 + 128 * 16 * 4) * 2;
        for cache in [KvCacheKind::Dynamic, KvCacheKind::Static, KvCacheKind::Paged] {
            assert_eq!(kv_end(&spec, 2, 10, 5, cache), want, "{cache}");
            assert_eq!(kv_end(&spec, 2, 300, 40, cache), want, "{cache}");
        }
    }

    /// Qwen3-Next: the full-attention layers' K/V grow with the tokens, the DeltaNet layers'
    /// conv (`2·key_dim + value_dim` channels × kernel, bf16) and recurrent states
    /// (`v_heads × Dk × Dv` fp32) do not: the hybrid's cache is the sum over its layer kinds.
    #[test]
    fn qwen3_next_cache_is_the_sum_over_its_layer_kinds() {
        let spec = import(r#"{"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "intermediate_size": 64,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
            "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16}"#);
        let state = 3 * ((2 * 16 + 32) * 4 * 2 + 4 * 8 * 8 * 4);
        let kv = |tokens: u64| 2 * 2 * 16 * tokens * 2;
        for (p, g) in [(10u64, 5u64), (200, 57)] {
            assert_eq!(kv_end(&spec, 1, p, g, KvCacheKind::Dynamic), state + kv(p + g - 1), "{p} + {g}");
        }
    }

    /// Llama 4: a chunked layer caches at most its chunk (as a window), a no-RoPE full layer everything.
    #[test]
    fn llama4_chunked_layers_cache_at_most_their_chunk() {
        let spec = import(r#"{"model_type": "llama4_text", "architectures": ["Llama4ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "intermediate_size": 32,
            "intermediate_size_mlp": 64, "num_local_experts": 2, "attention_chunk_size": 32}"#);
        // layers 0–2 chunked (RoPE), layer 3 full (no RoPE); 2 K/V heads of 16, bf16
        let per_token = 2 * 2 * 16 * 2;
        let tokens = 100 + 20 - 1;
        assert_eq!(kv_end(&spec, 1, 100, 20, KvCacheKind::Dynamic), per_token * (3 * 32 + tokens));
        assert_eq!(kv_end(&spec, 1, 100, 20, KvCacheKind::Static), per_token * (3 * 32 + tokens));
    }
}

/// vLLM: a Mamba model's request holds one fixed state page whatever its length (`MambaSpec`),
/// bf16 conv (`conv_kernel − 1` columns) and SSM states, split over the tensor-parallel ranks;
/// the pool then holds states only (no KV blocks) and its concurrency is the pool over that state.
#[test]
fn serving_counts_a_recurrent_state_per_request() {
    use vramcalc_core::serve::{capacity, request_bytes, ServeConfig};
    let spec = import(r#"{"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 3, "vocab_size": 100}"#);
    let cfg = ServeConfig::new(8 << 30, 4096);
    let state = 3 * (128 * 3 + 128 * 16) * 2;
    assert_eq!(request_bytes(&spec, &cfg, 10), state);
    assert_eq!(request_bytes(&spec, &cfg, 4000), state);
    let c = capacity(&spec, &cfg).unwrap();
    assert_eq!(c.kv_bytes_per_token, 0);
    assert_eq!(c.max_concurrency, c.kv_pool_bytes / state);
    assert_eq!(request_bytes(&spec, &ServeConfig { tensor_parallel: 2, ..cfg }, 10), state / 2);
}

/// `hybrid_traces.jsonl`: one training step (forward, causal-LM loss, backward; no optimizer)
/// of each class on a small config (hidden 64, 2–4 layers, each `config` in the record), batch 2
/// at 64 tokens (eager, and SDPA for the two with attention) and batch 1 at 100 tokens (not a
/// whole number of Mamba-2's or DeltaNet's chunks), fp32, traced by `tools/trace_hf.py`
/// (FakeTensorMode, every live storage after each aten op; torch 2.15, transformers 5.24 with
/// its PyTorch fallbacks: no `mamba_ssm`, `causal_conv1d` or `fla` kernels). The estimate with
/// `--optimizer sgd` is within 3 % of each (at the time of writing: Mamba −1.69 / −0.60 %,
/// Mamba-2 +0.72 / +0.41 %, Qwen3-Next −2.02 / −1.67 (SDPA) / +0.90 %, Llama 4 −1.23 / −1.42
/// (SDPA) / −1.07 %, Jamba −1.34 / −0.46 %, Bamba +0.55 / +0.31 %, Falcon-H1 −0.60 / −0.75 %);
/// `--nocapture` prints them.
#[test]
fn training_step_peaks_against_traced_pytorch() {
    use vramcalc_core::{AttentionImpl, OptimizerKind, Prepared, TrainConfig};
    let text = hf::data("hf/hybrid_traces.jsonl");
    let mut n = 0;
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let spec = import(&r["config"].to_string());
        let attention = if r["attention"] == "eager" { AttentionImpl::Eager } else { AttentionImpl::Sdpa };
        let cfg = TrainConfig { batch: r["batch"].as_u64().unwrap(), seq_len: r["seq_len"].as_u64(), attention, optimizer: OptimizerKind::Sgd, ..TrainConfig::default() };
        let est = Prepared::new(&spec, &cfg).unwrap().estimate().peak_bytes as f64;
        let measured = r["measured_peak_bytes"].as_u64().unwrap() as f64;
        let err = (est - measured) / measured * 100.0;
        println!("{} {}: estimated {est}, measured {measured} ({err:+.2} %)", r["family"], r["attention"]);
        assert!(err.abs() <= TOLERANCE_PCT, "{} {}: estimated {est}, measured {measured} ({err:+.2} %)", r["family"], r["attention"]);
        n += 1;
    }
    assert_eq!(n, 16);
}

/// The bound of `training_step_peaks_against_traced_pytorch`.
const TOLERANCE_PCT: f64 = 3.0;

/// The `tiny-mamba` example of `docs/spec-format.md` is `MambaForCausalLM(MambaConfig(hidden_size=64,
/// num_hidden_layers=2, vocab_size=100, time_step_rank=4))`: 71,872 parameters in transformers 5.24;
/// its generate-mode cache is 2 layers × (128 × 4 bf16 + 128 × 16 fp32) per sequence.
#[test]
fn spec_format_mamba_example_has_its_transformers_count() {
    let doc = std::fs::read_to_string(format!("{}/../../docs/spec-format.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let block = doc.split("```json").skip(1).filter_map(|b| b.split("```").next()).find(|b| b.contains("\"tiny-mamba\"")).unwrap();
    let spec = ModelSpec::from_json(block).unwrap();
    assert_eq!(params(&spec), 71_872);
    use vramcalc_core::{estimate, GenerateConfig, Mode, Precision, TrainConfig};
    let generate = GenerateConfig { prompt_len: Some(16), new_tokens: 4, ..GenerateConfig::default() };
    let cfg = TrainConfig { batch: 1, precision: Precision::Bf16, mode: Mode::Generate, generate, ..TrainConfig::default() };
    assert_eq!(estimate(&spec, &cfg).unwrap().generation.unwrap().kv_cache_bytes, 2 * (128 * 4 * 2 + 128 * 16 * 4));
}
