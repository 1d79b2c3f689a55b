//! Mixture-of-experts Hugging Face configs (`mixtral`, `qwen2_moe`, `qwen3_moe`, `deepseek_v3`):
//! the reference configs in `tests/data/hf/` (copied from `../shared/reference/llm/hf/`, measured
//! with transformers 5.24 on the meta device) give exactly the counts of `params.json`; random
//! valid configs of each type give exactly the closed-form count written out below from the
//! modeling code, and never panic; fields the importer does not know are refused by name.

use proptest::prelude::*;
use serde_json::{json, Value};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::{ModelSpec, Prepared, TrainConfig};

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};

/// A config of `tests/data/hf/`.
fn data(name: &str) -> String {
    hf::data(&format!("hf/{name}"))
}

const TYPES: [&str; 4] = ["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3"];

#[test]
fn reference_configs_have_pytorch_parameter_counts() {
    hf::assert_reference_counts(&TYPES);
}

#[test]
fn counts_spelled_out() {
    // the same numbers as params.json (transformers 5.24, `XConfig()` defaults)
    for (model, n) in [
        ("mixtral", 46_702_792_704u64),
        ("qwen2_moe", 14_315_784_192),
        ("qwen3_moe", 15_350_731_776),
        ("deepseek_v3", 671_026_404_352),
    ] {
        assert_eq!(params(&from_config_json(&data(&format!("{model}.config.json"))).unwrap()), n, "{model}");
    }
}

/// `sum(p.numel())` of `…ForCausalLM`, term by term from the modeling code (untied `lm_head`).
fn closed_form(t: &str, c: &Value) -> u64 {
    let g = |k: &str| c[k].as_u64().unwrap();
    let (v, d, l) = (g("vocab_size"), g("hidden_size"), g("num_hidden_layers"));
    let outer = 2 * v * d + d; // embed_tokens, lm_head, final norm
    let norms = 2 * d; // input_layernorm, post_attention_layernorm
    if t == "deepseek_v3" {
        let (h, kl, r, n, vh) = (g("num_attention_heads"), g("kv_lora_rank"), g("qk_rope_head_dim"), g("qk_nope_head_dim"), g("v_head_dim"));
        let q = match c["q_lora_rank"].as_u64() {
            Some(ql) => d * ql + ql + ql * h * (n + r),
            None => d * h * (n + r),
        };
        let attn = q + d * (kl + r) + kl + kl * h * (n + vh) + h * vh * d;
        let (e, mi, shared) = (g("n_routed_experts"), g("moe_intermediate_size"), g("n_shared_experts"));
        let moe = e * 3 * d * mi + e * d + 3 * d * mi * shared;
        let k = g("first_k_dense_replace").min(l);
        return outer + l * (attn + norms) + k * 3 * d * g("intermediate_size") + (l - k) * moe;
    }
    let (h, kv) = (g("num_attention_heads"), g("num_key_value_heads"));
    let hd = d / h;
    let bias = t == "qwen2_moe";
    let mut attn = 2 * d * h * hd + 2 * d * kv * hd;
    if bias {
        attn += h * hd + 2 * kv * hd; // q, k, v biases; o_proj has none
    }
    if t == "qwen3_moe" {
        attn += 2 * hd; // q_norm, k_norm
    }
    let (e, key) = if t == "mixtral" { (g("num_local_experts"), "intermediate_size") } else { (g("num_experts"), "moe_intermediate_size") };
    let mut moe = e * 3 * d * g(key) + e * d;
    if t == "qwen2_moe" {
        moe += 3 * d * g("shared_expert_intermediate_size") + d; // shared_expert, shared_expert_gate
    }
    let dense = 3 * d * g("intermediate_size");
    let step = c.get("decoder_sparse_step").and_then(Value::as_u64).unwrap_or(1);
    let sparse = (0..l).filter(|i| (i + 1) % step == 0).count() as u64;
    outer + l * (attn + norms) + sparse * moe + (l - sparse) * dense
}

/// A random valid config of `model_type` with small dimensions.
fn config(t: &'static str) -> impl Strategy<Value = Value> {
    (1u64..=4, 1u64..=4, 1u64..=3, 1u64..=8, 1u64..=3, 1u64..=40, 1u64..=5, 1u64..=3, any::<bool>()).prop_map(
        move |(heads_per_kv, kv, head_mult, experts, layers, inter, k_pick, step, flag)| {
            let heads = heads_per_kv * kv;
            let hidden = heads * 2 * head_mult;
            let top_k = 1 + (k_pick - 1) % experts;
            let mut c = json!({"model_type": t, "vocab_size": 97, "hidden_size": hidden, "num_hidden_layers": layers,
                "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": inter * 3,
                "num_experts_per_tok": top_k, "architectures": [format!("{}ForCausalLM", match t {
                    "mixtral" => "Mixtral", "qwen2_moe" => "Qwen2Moe", "qwen3_moe" => "Qwen3Moe", _ => "DeepseekV3" })]});
            match t {
                "mixtral" => c["num_local_experts"] = json!(experts),
                "qwen2_moe" | "qwen3_moe" => {
                    c["num_experts"] = json!(experts);
                    c["moe_intermediate_size"] = json!(inter);
                    c["decoder_sparse_step"] = json!(step);
                    c["norm_topk_prob"] = json!(flag);
                    if t == "qwen2_moe" {
                        c["shared_expert_intermediate_size"] = json!(inter + 1);
                    }
                }
                _ => {
                    // n_group groups of at least 2 experts, top_k within topk_group groups
                    let n_group = 1 + (step - 1) % 2;
                    let per_group = 2 + experts % 3;
                    c["n_routed_experts"] = json!(n_group * per_group);
                    c["n_group"] = json!(n_group);
                    c["topk_group"] = json!(n_group);
                    c["num_experts_per_tok"] = json!(1 + (k_pick - 1) % (n_group * per_group));
                    c["n_shared_experts"] = json!(step - 1);
                    c["moe_intermediate_size"] = json!(inter);
                    c["first_k_dense_replace"] = json!(step - 1);
                    c["kv_lora_rank"] = json!(inter + 2);
                    c["q_lora_rank"] = if flag { json!(inter + 3) } else { Value::Null };
                    c["qk_rope_head_dim"] = json!(2 * head_mult);
                    c["qk_nope_head_dim"] = json!(inter % 7 + 1);
                    c["v_head_dim"] = json!(inter % 5 + 1);
                    c["num_key_value_heads"] = json!(heads);
                }
            }
            c
        },
    )
}

#[test]
fn spec_format_gpt_oss_example_has_the_documented_count() {
    let doc = std::fs::read_to_string(format!("{}/../../docs/spec-format.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let block = doc.split("```json").skip(1).filter_map(|b| b.split("```").next()).find(|b| b.contains("\"clamped_swiglu\"")).unwrap();
    let spec = ModelSpec::from_json(&format!(r#"{{"input": {{"shape": [16, 64]}}, "layers": {block}}}"#)).unwrap();
    // q 64·128 + 128, k and v 64·64 + 64 each, o 128·64 + 64, 4 sinks; router 4·64 + 4,
    // gate_up 4·128·64 + 4·128, down 4·64·64 + 4·64
    let attn = 64 * 128 + 128 + 2 * (64 * 64 + 64) + 128 * 64 + 64 + 4;
    let moe = 4 * 64 + 4 + 4 * 128 * 64 + 4 * 128 + 4 * 64 * 64 + 4 * 64;
    assert_eq!(params(&spec), attn + moe);
    assert_eq!(params(&spec), 75_080);
    assert!(doc.contains("75,080") && doc.contains("24,896") && doc.contains("50,180"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_configs_have_the_closed_form_count(
        (t, c) in prop::sample::select(TYPES.to_vec()).prop_flat_map(|t| config(t).prop_map(move |c| (t, c)))
    ) {
        let spec = from_config_json(&c.to_string()).map_err(|e| TestCaseError::fail(format!("{c}: {e}")))?;
        prop_assert_eq!(params(&spec), closed_form(t, &c), "{}", c);
        // estimates for both attention kinds and precisions run without panicking
        for attention in [vramcalc_core::AttentionImpl::Sdpa, vramcalc_core::AttentionImpl::Eager] {
            let cfg = TrainConfig { batch: 2, seq_len: Some(5), attention, ..TrainConfig::default() };
            let e = Prepared::new(&spec, &cfg).map_err(|e| TestCaseError::fail(format!("{c}: {e}")))?.estimate();
            prop_assert!(e.peak_bytes > e.params * 4, "{}", c);
        }
    }
}

#[test]
fn unknown_fields_and_quantization_are_refused_by_name() {
    let mut c: Value = serde_json::from_str(&data("mixtral.config.json")).unwrap();
    c["expert_capacity"] = json!(2);
    assert!(import_err(&c.to_string()).contains("field `expert_capacity` is not understood by the mixtral importer"), "{}", import_err(&c.to_string()));
    // a null is the class default, so an unknown null is harmless
    c["expert_capacity"] = Value::Null;
    assert!(from_config_json(&c.to_string()).is_ok());
    // DeepSeek-V3's published config ships fp8 weights
    let mut c: Value = serde_json::from_str(&data("deepseek_v3.config.json")).unwrap();
    c["quantization_config"] = json!({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]});
    assert!(from_config_json(&c.to_string()).is_ok(), "fp8 is a modelled format");
    c["quantization_config"] = json!({"quant_method": "compressed-tensors"});
    let e = import_err(&c.to_string());
    assert!(e.contains("quantization_config") && e.contains("compressed-tensors"), "{e}");
    // settings the spec cannot express are refused rather than approximated
    let mut c: Value = serde_json::from_str(&data("qwen3_moe.config.json")).unwrap();
    c["use_sliding_window"] = json!(true);
    assert!(import_err(&c.to_string()).contains("use_sliding_window"));
    let mut c: Value = serde_json::from_str(&data("deepseek_v3.config.json")).unwrap();
    c["scoring_func"] = json!("softmax");
    assert!(import_err(&c.to_string()).contains("scoring_func"));
}

#[test]
fn deepseek_v3_layers_and_mtp() {
    let c: Value = serde_json::from_str(&data("deepseek_v3.config.json")).unwrap();
    let spec = from_config_json(&c.to_string()).unwrap();
    // 3 dense layers, then 58 MoE layers: two repeats between the embedding and the final norm
    let json = serde_json::to_value(&spec).unwrap();
    let times: Vec<u64> = json["layers"].as_array().unwrap().iter().filter_map(|l| l["times"].as_u64()).collect();
    assert_eq!(times, [3, 58]);
    // num_nextn_predict_layers (the MTP module) is not instantiated by transformers: no change
    let mut more = c.clone();
    more["num_nextn_predict_layers"] = json!(3);
    assert_eq!(params(&from_config_json(&more.to_string()).unwrap()), 671_026_404_352);
    // published Qwen3-MoE configs name the experts `num_experts`, 5.24's class `num_local_experts`
    let mut q: Value = serde_json::from_str(&data("qwen3_moe.config.json")).unwrap();
    let n = q.as_object_mut().unwrap().remove("num_local_experts").unwrap();
    q["num_experts"] = n;
    assert_eq!(params(&from_config_json(&q.to_string()).unwrap()), 15_350_731_776);
}

#[test]
fn deepseek_v3_training_estimate_fits_the_model() {
    // bf16 weights and AdamW state for 671 B parameters dwarf the activations at batch 1, seq 4096
    let spec = from_config_json(&data("deepseek_v3.config.json")).unwrap();
    let cfg = TrainConfig { batch: 1, seq_len: Some(4096), ..TrainConfig::default() };
    let e = Prepared::new(&spec, &cfg).unwrap().estimate();
    assert_eq!(e.params, 671_026_404_352);
    assert!(e.peak_bytes > 4 * 4 * e.params, "{}", e.peak_bytes);
}

#[test]
fn spec_format_moe_example_has_the_documented_count() {
    let doc = std::fs::read_to_string(format!("{}/../../docs/spec-format.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let block = doc.split("```json").find(|b| b.contains("\"tiny-moe\"")).unwrap().split("```").next().unwrap();
    let spec = ModelSpec::from_json(block).unwrap();
    // embeddings and head 2·1000·256, per layer 2·256² + 2·256·64 + 2·256 + 8·3·256·512 + 8·256,
    // final norm 256
    assert_eq!(params(&spec), 2 * 1000 * 256 + 2 * (2 * 256 * 256 + 2 * 256 * 64 + 2 * 256 + 8 * 3 * 256 * 512 + 8 * 256) + 256);
    assert_eq!(params(&spec), 7_136_512);
    assert!(doc.contains("7,136,512"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any field of a reference config replaced by a value of another type or size: an import
    /// error or a spec, never a panic (nor a hang on `num_hidden_layers: 2^62`).
    #[test]
    fn odd_values_never_panic(t in prop::sample::select(TYPES.to_vec()), field in 0usize..64, value in prop_oneof![
        Just(json!(0)), Just(json!(-1)), Just(json!(1u64 << 62)), Just(json!(u64::MAX)), Just(json!("x")), Just(json!(null)),
        Just(json!([1, 2])), Just(json!(1.5)), Just(json!(true)), Just(json!({"a": 1}))]) {
        let mut c: Value = serde_json::from_str(&data(&format!("{t}.config.json"))).unwrap();
        let keys: Vec<String> = c.as_object().unwrap().keys().cloned().collect();
        let key = &keys[field % keys.len()];
        c[key.as_str()] = value;
        if let Ok(spec) = from_config_json(&c.to_string()) {
            let cfg = TrainConfig { batch: 1, seq_len: Some(4), ..TrainConfig::default() };
            let _ = Prepared::new(&spec, &cfg).map(|p| p.estimate());
        }
    }
}
