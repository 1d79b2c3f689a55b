//! Weight formats on a whole model: llama.cpp's GGUF mixes against the bits per weight it
//! publishes, and the tensors bitsandbytes leaves unquantised.

use vramcalc_core::formats::{bnb4_bytes, WeightFormat};
use vramcalc_core::{Mode, Precision, TrainConfig};

/// Llama-3.1-8B (`meta-llama/Llama-3.1-8B` config.json).
const LLAMA_31_8B: &str = r#"{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4096,
"intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
"vocab_size":128256,"max_position_embeddings":131072,"rms_norm_eps":1e-5,"tie_word_embeddings":false}"#;

/// One inference forward of `seq` tokens with weights `w` and the rest in `precision`.
fn infer(w: &str, precision: Precision, seq: u64) -> TrainConfig {
    TrainConfig {
        batch: 1,
        seq_len: Some(seq),
        mode: Mode::Infer,
        precision,
        weights: Some(WeightFormat::parse(w).unwrap()),
        ..TrainConfig::default()
    }
}

/// `(parameters, their bytes)` of `spec` with weights `w` and the rest in `precision`.
fn weights_in(spec: &vramcalc_core::ModelSpec, w: &str, precision: Precision) -> (u64, u64) {
    let e = vramcalc_core::estimate(spec, &infer(w, precision, 16)).unwrap();
    (e.params, e.param_bytes)
}

fn weights_of(spec: &vramcalc_core::ModelSpec, w: &str) -> (u64, u64) {
    weights_in(spec, w, Precision::Fp16)
}

/// llama.cpp `tools/quantize/README.md`, table "meta-llama/Llama-3.1-8B": bits/weight
/// Q3_K_S 3.6429, Q4_K_M 4.8944, Q5_K_M 5.7036, Q8_0 8.5008, F16 16.0005 (file bits / parameters,
/// the model's 1-D tensors in f32). The per-tensor types come from `llama_tensor_get_type`.
#[test]
fn gguf_mixes_match_the_bits_per_weight_llama_cpp_publishes() {
    let spec = vramcalc_core::import::hf::from_config_json(LLAMA_31_8B).unwrap();
    for (w, published) in [
        ("gguf-q3_k_s", 3.6429),
        ("gguf-q4_k_m", 4.8944),
        ("gguf-q5_k_m", 5.7036),
        ("gguf-q8_0", 8.5008),
        ("gguf-f16", 16.0005),
    ] {
        let (params, bytes) = weights_of(&spec, w);
        assert_eq!(params, 8_030_261_248);
        let bpw = bytes as f64 * 8.0 / params as f64;
        assert!((bpw - published).abs() < 0.0001, "{w}: {bpw:.4} bits/weight, llama.cpp publishes {published}");
    }
}

#[test]
fn quantised_llama_keeps_head_and_embeddings_in_fp16() {
    let spec = vramcalc_core::import::hf::from_config_json(LLAMA_31_8B).unwrap();
    let (h, kv, i, v, l) = (4096u64, 1024u64, 14336u64, 128256u64, 32u64);
    let fp16_rest = 2 * v * h * 2 + (2 * l + 1) * h * 2;
    let nf4 = |o: u64, n: u64| bnb4_bytes(o * n, false);
    let per_layer = 2 * nf4(h, h) + 2 * nf4(kv, h) + 3 * nf4(i, h);
    assert_eq!(weights_of(&spec, "nf4").1, fp16_rest + l * per_layer);
    let int8 = |o: u64, n: u64| o * n + o * 4;
    assert_eq!(weights_of(&spec, "int8").1, fp16_rest + l * (2 * int8(h, h) + 2 * int8(kv, h) + 2 * int8(i, h) + int8(h, i)));
    assert_eq!(weights_of(&spec, "fp16").1, 2 * 8_030_261_248);
}


/// Mixtral-8x7B: AWQ quantises the expert stacks matrix by matrix, bitsandbytes leaves them
/// in bf16; the router stays in bf16.
#[test]
fn moe_experts_are_quantised_and_the_router_is_not() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hf/mixtral.config.json")).unwrap();
    let spec = vramcalc_core::import::hf::from_config_json(&text).unwrap();
    let (h, kv, i, v, l, e) = (4096u64, 1024u64, 14336u64, 32000u64, 32u64, 8u64);
    let bytes = |w: &str| weights_in(&spec, w, Precision::Bf16).1;
    let bf16_rest = 2 * v * h * 2 + (2 * l + 1) * h * 2 + l * e * h * 2;
    // AWQ per matrix: in·out/2 + groups·out/2 + groups·out·2
    let awq = |o: u64, n: u64| n * o / 2 + n / 128 * o / 2 + n / 128 * o * 2;
    let attn = 2 * awq(h, h) + 2 * awq(kv, h);
    let experts = e * (awq(2 * i, h) + awq(h, i));
    assert_eq!(bytes("awq-int4"), bf16_rest + l * (attn + experts));
    // NF4: transformers 5.24's `replace_with_bnb_linear` swaps `nn.Linear`s only; the fused
    // expert stacks (`MixtralExperts.gate_up_proj`, an `nn.Parameter`) stay in bf16 (measured:
    // `bnb-nf4-moe` in tests/data/quant_layouts.json, `tools/measure_moe_bnb.py`)
    let nf4 = |n: u64| bnb4_bytes(n, false);
    let attn = 2 * nf4(h * h) + 2 * nf4(kv * h);
    assert_eq!(bytes("nf4"), bf16_rest + l * (attn + e * (2 * i * h + h * i) * 2));
}

/// A share link carries the weights by their `--weights` name (a field added after v1).
#[test]
fn share_links_carry_the_weights() {
    use vramcalc_core::share::{decode_preset, encode_preset, ModelSource, ShareState};
    for w in ["nf4-dq", "gptq-int4-g64", "gguf-q4_k_m", "fp8-block128"] {
        let state = ShareState {
            model: ModelSource::Preset { id: "gpt2".into() },
            config: infer(w, Precision::Fp16, 16),
            gpu: None,
            capacity_bytes: None,
            unit: vramcalc_core::ByteUnit::Mb,
            lang: "en".into(),
            ..ShareState::default()
        };
        let link = encode_preset(&state).unwrap();
        assert!(link.contains(&format!("weights={w}")), "{link}");
        assert_eq!(decode_preset(&link).unwrap(), state, "{link}");
    }
}

/// The dequantised weight a matmul holds while it runs: bitsandbytes 4-bit past 256 tokens,
/// AutoAWQ from 1024, never for GPTQ; LLM.int8's int8 input and int32 accumulator per token.
#[test]
fn dequantised_temporaries_follow_the_kernels() {
    let spec = vramcalc_core::import::hf::from_config_json(LLAMA_31_8B).unwrap();
    // (fixed, per-sample) workspace of the first block's q_proj ([4096, 4096])
    let scratch = |w: &str, seq: u64| {
        let p = vramcalc_core::Prepared::new(&spec, &infer(w, Precision::Fp16, seq)).unwrap();
        let g = &p.resolved.graph;
        let op = g.ops.iter().find(|o| o.name == "linear" && g.value(o.inputs[1]).shape.0 == [4096, 4096]).unwrap();
        (op.fwd_scratch.fixed, op.fwd_scratch.per_sample)
    };
    let weight = 4096 * 4096 * 2;
    assert_eq!(scratch("nf4", 256), (0, 0));
    assert_eq!(scratch("nf4", 512), (weight, 0));
    assert_eq!(scratch("awq-int4", 512), (0, 0));
    assert_eq!(scratch("awq-int4", 1024), (weight, 0));
    assert_eq!(scratch("gptq-int4", 4096), (0, 0));
    assert_eq!(scratch("int8", 512), (0, 512 * (4096 + 4 + 4096 * 4)));
}

/// gpt-oss-20b as published, with its `quantization_config` (`quant_method: "mxfp4"`): the 24 × 32
/// expert stacks (`[E, 5760, 2880]` and `[E, 2880, 2880]`: 19,110,297,600 weights) stored as
/// transformers' `integrations/mxfp4.py` loads them (`_blocks` uint8 `[…, in / 32, 16]`,
/// `_scales` uint8 `[…, in / 32]`: 17 bytes per 32), the expert biases (24 × 32 × (5760 + 2880))
/// in fp32 as `Mxfp4GptOssExperts` declares them, the other parameters (attention, router,
/// embeddings, head, norms) in bf16: 13,774,535,808 bytes, the checkpoint's ~13.8 GB.
#[test]
fn gpt_oss_mxfp4_experts_are_stored_as_the_checkpoint() {
    let mut cfg: serde_json::Value = serde_json::from_str(vramcalc_core::presets::hf_config("gpt-oss-20b").unwrap()).unwrap();
    cfg["quantization_config"] = serde_json::json!({"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"});
    let text = cfg.to_string();
    let format = vramcalc_core::formats::hf::weights_of_config_json(&text).unwrap();
    assert_eq!(format, Some(WeightFormat::Mxfp4));
    let spec = vramcalc_core::import::hf::from_config_json(&text).unwrap();
    let (params, bytes) = weights_in(&spec, "mxfp4", Precision::Bf16);
    assert_eq!(params, 20_914_757_184);
    let experts: u64 = 24 * 32 * (5760 * 2880 + 2880 * 2880);
    assert_eq!(experts, 19_110_297_600);
    let biases: u64 = 24 * 32 * (5760 + 2880);
    assert_eq!(bytes, experts / 32 * 17 + biases * 4 + (params - experts - biases) * 2);
    assert_eq!(bytes, 13_774_535_808);
    assert_eq!(WeightFormat::parse("mxfp4").unwrap().name(), "mxfp4");
}
