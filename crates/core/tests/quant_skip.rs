//! A quantised checkpoint's skip list applied per module (issue 25): the modules a
//! `quantization_config` keeps (`modules_to_not_convert`, `llm_int8_skip_modules`,
//! compressed-tensors' `ignore`, GPTQ's `modules_in_block_to_quantize`) count in the model dtype,
//! the rest in the stored format. The measured cases with skip lists are in `quant_layouts.rs`
//! (fp8, compressed-tensors, bitsandbytes: transformers' own module replacement); here the
//! published gpt-oss-20b checkpoint, and AWQ / GPTQ (CUDA-only kernels, not measurable here) by
//! their layouts read from source, each expected figure computed from those formulas, not from
//! the estimate.

use proptest::prelude::*;
use serde_json::{json, Value};
use vramcalc_core::formats::hf::weights_of_config_json;
use vramcalc_core::formats::skip::{SkipList, SkipRule};
use vramcalc_core::{Mode, Precision, TrainConfig};

/// The inference parameter bytes of `config` with its `quantization_config` (`None`: in bf16).
fn stored(config: &Value) -> u64 {
    let text = config.to_string();
    let spec = vramcalc_core::import::hf::from_config_json(&text).unwrap();
    let weights = weights_of_config_json(&text).unwrap();
    let c = TrainConfig { batch: 1, seq_len: Some(8), mode: Mode::Infer, precision: Precision::Bf16, weights, ..TrainConfig::default() };
    vramcalc_core::estimate(&spec, &c).unwrap().param_bytes
}

fn gpt_oss_20b() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/presets/configs/gpt-oss-20b.json")).unwrap();
    let mut cfg: Value = serde_json::from_str(&text).unwrap();
    cfg["quantization_config"] = serde_json::from_str(vramcalc_core::presets::published_quantization("gpt-oss-20b").unwrap()).unwrap();
    cfg
}

/// openai/gpt-oss-20b's `model.safetensors.index.json`: `{"metadata": {"total_size": 13761264768}}`
/// (the hub repository's index, read through the code search of a copy of it). The checkpoint
/// stores the expert biases in bf16; transformers loads them into `Mxfp4GptOssExperts`' float32
/// parameters (`integrations/mxfp4.py`, measured in `quant_layouts.rs`): 24 layers × 32 experts ×
/// (2·2880 + 2880) biases × 2 bytes more. Everything its `modules_to_not_convert` names
/// (attention, router, embeddings, `lm_head`) is bf16, the experts 17 bytes per 32 weights.
#[test]
fn gpt_oss_20b_as_published() {
    const TOTAL_SIZE: u64 = 13_761_264_768;
    let fp32_biases = 24 * 32 * (2 * 2880 + 2880) * 2;
    assert_eq!(stored(&gpt_oss_20b()), TOTAL_SIZE + fp32_biases);
}

/// A skip list that keeps the experts (`GptOssExperts`, not `Mxfp4GptOssExperts`:
/// `replace_with_mxfp4_linear` checks `should_convert_module(f"{name}.experts", …)`) leaves the
/// whole model in bf16, expert biases too; one that keeps one layer's keeps that layer's.
#[test]
fn gpt_oss_experts_kept() {
    let mut plain = gpt_oss_20b();
    plain.as_object_mut().unwrap().remove("quantization_config");
    let bf16 = stored(&plain);
    let mut all = gpt_oss_20b();
    all["quantization_config"]["modules_to_not_convert"].as_array_mut().unwrap().push(json!("model.layers.*.mlp.experts"));
    assert_eq!(stored(&all), bf16);
    // layer 3 alone: its two stacks at bf16 instead of 17/32 bytes, its biases bf16 instead of fp32
    let mut one = gpt_oss_20b();
    one["quantization_config"]["modules_to_not_convert"].as_array_mut().unwrap().push(json!("model.layers.3.mlp.experts"));
    let weights = 32 * (2 * 2880 * 2880 + 2880 * 2880);
    let per_layer = weights * 2 - weights / 32 * 17 - 32 * (3 * 2880) * 2;
    assert_eq!(stored(&one), stored(&gpt_oss_20b()) + per_layer);
}

/// A 2-layer LLaMA: hidden 256, intermediate 768, 4 heads of 64, 2 K/V heads.
fn llama(q: Value) -> Value {
    json!({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 768,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "max_position_embeddings": 512, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "quantization_config": q
    })
}

/// `(name, out, in)` of each decoder linear of [`llama`].
fn llama_linears() -> Vec<(String, u64, u64)> {
    let mut v = Vec::new();
    for l in 0..2 {
        for (n, o, i) in [("self_attn.q_proj", 256, 256), ("self_attn.k_proj", 128, 256), ("self_attn.v_proj", 128, 256), ("self_attn.o_proj", 256, 256), ("mlp.gate_proj", 768, 256), ("mlp.up_proj", 768, 256), ("mlp.down_proj", 256, 768)] {
            v.push((format!("model.layers.{l}.{n}"), o, i));
        }
    }
    v
}

fn bf16_total() -> u64 {
    let mut plain = llama(Value::Null);
    plain.as_object_mut().unwrap().remove("quantization_config");
    stored(&plain)
}

/// AutoAWQ `WQLinear_GEMM`: qweight int32 `[in, out/8]`, qzeros int32 `[in/g, out/8]`, scales
/// fp16 `[in/g, out]`. transformers' `AwqQuantizer` skips `modules_to_not_convert` plus its
/// default skips (`add_default_skips=True`: `lm_head`), by `should_convert_module`.
#[test]
fn awq_modules_to_not_convert() {
    let awq = |o: u64, i: u64| i * o / 2 + i / 128 * o / 2 + i / 128 * o * 2;
    let skips = ["model.layers.0.self_attn", "down_proj"];
    let q = json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": true, "modules_to_not_convert": skips});
    let kept = |n: &str| n.starts_with("model.layers.0.self_attn.") || n.ends_with("down_proj");
    let expected = llama_linears().iter().fold(bf16_total(), |t, (n, o, i)| if kept(n) { t } else { t - o * i * 2 + awq(*o, *i) });
    assert_eq!(stored(&llama(q)), expected);
}

/// gptqmodel `BaseQuantLinear` (4 bits, `desc_act`): qweight int32 `[in/8, out]`, qzeros int32
/// `[in/g, out/8]`, scales fp16 `[in/g, out]`, g_idx int32 `[in]`. Optimum's
/// `GPTQQuantizer.convert_model` replaces only the block linears whose name ends with an entry
/// of `modules_in_block_to_quantize`; `GPTQConfig` has no `modules_to_not_convert`, so that
/// field is not read (transformers' GPTQ path does not pass it anywhere).
#[test]
fn gptq_quantises_what_its_block_list_names() {
    let gptq = |o: u64, i: u64| i * o / 2 + i / 128 * o / 2 + i / 128 * o * 2 + i * 4;
    let q = json!({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true, "sym": true,
        "modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["mlp.up_proj"]],
        "modules_to_not_convert": ["model.layers.0"]});
    let quantised = |n: &str| ["q_proj", "k_proj", "v_proj", "up_proj"].iter().any(|s| n.ends_with(s));
    let expected = llama_linears().iter().fold(bf16_total(), |t, (n, o, i)| if quantised(n) { t - o * i * 2 + gptq(*o, *i) } else { t });
    assert_eq!(stored(&llama(q)), expected);
    // without the list every block linear is quantised
    let all = json!({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true});
    let expected = llama_linears().iter().fold(bf16_total(), |t, (_, o, i)| t - o * i * 2 + gptq(*o, *i));
    assert_eq!(stored(&llama(all)), expected);
}

/// compressed-tensors `ignore: ["lm_head", "re:.*mlp.gate$"]` on a MoE: the routers stay in the
/// model dtype (`re.match` of `.*mlp.gate$` on `model.layers.N.mlp.gate`, not `…gate_proj`), as
/// the role-based placement had them; a regex over the attention keeps it too.
#[test]
fn compressed_tensors_ignore_on_a_moe() {
    let q = |ignore: Value| json!({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ignore,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128}}}});
    let moe = |ignore: Value| json!({
        "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256, "intermediate_size": 640,
        "moe_intermediate_size": 192, "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
        "max_position_embeddings": 512, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "quantization_config": q(ignore)});
    let base = stored(&moe(json!(["lm_head", "re:.*mlp.gate$"])));
    // W4A16 g128: int32 `[out, in/8]` + bf16 scales `[out, in/128]` + int64[2] `weight_shape`
    let w4 = |o: u64, i: u64| o * i / 2 + o * (i / 128) * 2 + 16;
    let attn: u64 = [(256, 256), (128, 256), (128, 256), (256, 256)].iter().map(|&(o, i)| o * i * 2 - w4(o, i)).sum();
    assert_eq!(stored(&moe(json!(["lm_head", "re:.*mlp.gate$", "re:.*self_attn.*"]))), base + 2 * attn);
    // an exact name that is not a module's keeps nothing
    assert_eq!(stored(&moe(json!(["lm_head", "re:.*mlp.gate$", "model.layers.0.self_attn"]))), base);
}

#[test]
fn bad_patterns_are_errors_naming_them() {
    for (q, field) in [
        (json!({"quant_method": "awq", "modules_to_not_convert": ["model.layers.(0"]}), "modules_to_not_convert"),
        (json!({"quant_method": "awq", "modules_to_not_convert": "lm_head"}), "modules_to_not_convert"),
        (json!({"quant_method": "bitsandbytes", "load_in_4bit": true, "llm_int8_skip_modules": [3]}), "llm_int8_skip_modules"),
        (json!({"quant_method": "compressed-tensors", "ignore": ["re:[a-"]}), "ignore"),
        (json!({"quant_method": "gptq", "modules_in_block_to_quantize": [["q_proj", null]]}), "modules_in_block_to_quantize"),
    ] {
        let e = SkipList::of_quantization_config(&q).unwrap_err().to_string();
        assert!(e.contains(field), "{e}");
    }
    // a lookahead is Python's, not this matcher's: an error, not a silent miss
    let e = SkipList::of_quantization_config(&json!({"quant_method": "fp8", "modules_to_not_convert": ["(?=x)"]})).unwrap_err();
    assert!(e.to_string().contains("(?=x)"), "{e}");
    // through the importer too
    let e = vramcalc_core::import::hf::from_config_json(&llama(json!({"quant_method": "awq", "modules_to_not_convert": ["("]})).to_string());
    assert!(e.unwrap_err().to_string().contains("modules_to_not_convert"));
}

/// A hand-written spec's `unquantised` is checked when it is used.
#[test]
fn a_spec_field_with_a_bad_pattern_is_an_error() {
    let mut spec = vramcalc_core::import::hf::from_config_json(&llama(Value::Null).to_string()).unwrap();
    spec.unquantised = Some(SkipList { modules: vec!["model.layers.[".into()], rule: SkipRule::Transformers, head: false });
    let c = TrainConfig { batch: 1, seq_len: Some(8), mode: Mode::Infer, precision: Precision::Bf16, weights: Some(vramcalc_core::formats::WeightFormat::Awq { group_size: 128 }), ..TrainConfig::default() };
    let e = vramcalc_core::estimate(&spec, &c).unwrap_err().to_string();
    assert!(e.contains("model.layers.["), "{e}");
    // and it round-trips through the spec's JSON
    spec.unquantised = Some(SkipList { modules: vec!["lm_head".into(), "re:.*gate$".into()], rule: SkipRule::CompressedTensors, head: false });
    let back = vramcalc_core::ModelSpec::from_json(&spec.to_json_pretty()).unwrap();
    assert_eq!(back.unquantised, spec.unquantised);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// Random patterns (regex metacharacters, `re:` prefixes, any Unicode) never panic: an entry
    /// is read or refused with an error, and a read list matches any name without panicking.
    #[test]
    fn random_patterns_never_panic(
        pats in proptest::collection::vec("(re:)?[a-z.*+?()\\[\\]{}|^$\\\\0-9_:é-]{0,12}", 0..5),
        method in prop::sample::select(vec!["awq", "compressed-tensors", "bitsandbytes", "gptq", "mxfp4", "fp8"]),
        name in "[a-z._0-9é]{0,24}",
    ) {
        let field = match method { "compressed-tensors" => "ignore", "bitsandbytes" => "llm_int8_skip_modules", "gptq" => "modules_in_block_to_quantize", _ => "modules_to_not_convert" };
        let q = json!({"quant_method": method, field: pats});
        match SkipList::of_quantization_config(&q) {
            Ok(Some(list)) => {
                let m = list.matcher().expect("a list that was read compiles");
                let _ = m.keeps(&name);
                let _ = m.keeps_within(&name);
            }
            Ok(None) => prop_assert!(false, "a list was given"),
            Err(e) => prop_assert!(e.to_string().contains(field)),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Through the importer and the estimate: a config with random skip patterns imports and
    /// estimates, or is refused with an error naming the field; never a panic.
    #[test]
    fn random_patterns_through_the_importer(pats in proptest::collection::vec("(re:)?[a-z._*+?()\\[\\]|0-9]{0,16}", 0..4), ct in any::<bool>()) {
        let q = if ct {
            json!({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": pats,
                "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128}}}})
        } else {
            json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "modules_to_not_convert": pats})
        };
        let text = llama(q).to_string();
        match vramcalc_core::import::hf::from_config_json(&text) {
            Ok(spec) => {
                let weights = weights_of_config_json(&text).unwrap();
                let c = TrainConfig { batch: 1, seq_len: Some(8), mode: Mode::Infer, precision: Precision::Bf16, weights, ..TrainConfig::default() };
                prop_assert!(vramcalc_core::estimate(&spec, &c).is_ok());
            }
            Err(e) => prop_assert!(e.to_string().contains(if ct { "ignore" } else { "modules_to_not_convert" }), "{e}"),
        }
    }
}

/// The matcher against the loaders' own functions (`tools/skip_match_cases.py`: transformers
/// 5.24 `should_convert_module`, compressed-tensors 0.20 `match_name`) on the patterns hub
/// checkpoints use and random compositions of their parts, over LLaMA, MoE and VLM module names;
/// a pattern Python's `re` refuses is refused here too.
#[test]
fn matching_is_the_loaders() {
    let v: Value = serde_json::from_str(include_str!("data/skip_match_cases.json")).unwrap();
    let names: Vec<&str> = v["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let mut checked = 0;
    for case in v["cases"].as_array().unwrap() {
        let pattern = case[0].as_str().unwrap();
        for (rule, expected) in [(SkipRule::Transformers, case[1].as_str().unwrap()), (SkipRule::CompressedTensors, case[2].as_str().unwrap())] {
            let list = SkipList { modules: vec![pattern.to_string()], rule, head: false };
            match list.matcher() {
                Err(e) => assert!(expected.chars().all(|c| c == 'e'), "{rule:?} `{pattern}` refused here ({e}), read by Python: {expected}"),
                Ok(m) => {
                    assert!(!expected.contains('e'), "{rule:?} `{pattern}` read here, refused by Python");
                    for (name, want) in names.iter().zip(expected.chars()) {
                        assert_eq!(m.keeps(name), want == '1', "{rule:?} `{pattern}` on `{name}`");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 4000, "{checked}");
}
