//! Byte counts against figures computed by hand from each format's definition, and GGUF mixes
//! against the bits per weight llama.cpp publishes.

use super::ggml::{GgmlType, MixModel, TensorCategory};
use super::*;

const M: MixModel = MixModel { n_layer: 32, n_gqa: 4, n_expert: 1, is_70b: false, tied: false };
const BLOCK: TensorRole = TensorRole::BlockLinear { category: TensorCategory::AttnQ, index: 0, model: M };
const SQ: [u64; 2] = [4096, 4096];
const N: u64 = 4096 * 4096;

fn bytes(name: &str, role: TensorRole, shape: &[u64]) -> u64 {
    WeightFormat::parse(name).unwrap().tensor_bytes(role, shape, DType::F16)
}

#[test]
fn float_formats() {
    assert_eq!(bytes("fp32", BLOCK, &SQ), 4 * N);
    assert_eq!(bytes("bf16", BLOCK, &SQ), 2 * N);
    assert_eq!(bytes("fp16", TensorRole::Other, &[4096]), 2 * 4096);
}

#[test]
fn fp8_stores_a_byte_per_weight_and_its_scales() {
    // per tensor: one fp32 scale
    assert_eq!(bytes("fp8", BLOCK, &SQ), N + 4);
    // 128×128 blocks: 32 × 32 fp32 scales
    assert_eq!(bytes("fp8-block128", BLOCK, &SQ), N + 32 * 32 * 4);
    // [4096, 14336]: 32 × 112 blocks
    assert_eq!(bytes("fp8-block128", BLOCK, &[4096, 14336]), 4096 * 14336 + 32 * 112 * 4);
}

#[test]
fn bitsandbytes_int8_and_4bit() {
    // int8 CB + fp32 SCB per output row
    assert_eq!(bytes("int8", BLOCK, &SQ), N + 4096 * 4);
    // NF4: N/2 packed + N/64 fp32 absmax + 16-entry fp32 code
    assert_eq!(bytes("nf4", BLOCK, &SQ), N / 2 + N / 64 * 4 + 64);
    assert_eq!(bytes("fp4", BLOCK, &SQ), bytes("nf4", BLOCK, &SQ));
    // double quantisation: uint8 absmax per 64, fp32 per 256 blocks, one fp32 offset
    let blocks = N / 64;
    assert_eq!(bytes("nf4-dq", BLOCK, &SQ), N / 2 + blocks + blocks / 256 * 4 + 4 + 64);
    // an odd count rounds the packed bytes up: (n + 1) // 2
    assert_eq!(bnb4_bytes(3, false), 2 + 4 + 64);
    // ≈ 4.127 bits per weight without, ≈ 4.127 − 0.373 with double quantisation
    let bpw = |b: u64| b as f64 * 8.0 / N as f64;
    assert!((bpw(bytes("nf4", BLOCK, &SQ)) - 4.5).abs() < 0.01);
    assert!((bpw(bytes("nf4-dq", BLOCK, &SQ)) - 4.127).abs() < 0.01);
}

#[test]
fn gptq_and_awq_int4_packing() {
    // out = 4096, in = 11008 (LLaMA-7B down_proj), group 128 → 86 groups
    let shape = [4096, 11008];
    let groups = 11008 / 128;
    let gptq = 11008 / 8 * 4096 * 4 + groups * (4096 / 8) * 4 + groups * 4096 * 2 + 11008 * 4;
    assert_eq!(bytes("gptq-int4", BLOCK, &shape), gptq);
    let awq = 11008 * (4096 / 8) * 4 + groups * (4096 / 8) * 4 + groups * 4096 * 2;
    assert_eq!(bytes("awq-int4", BLOCK, &shape), awq);
    // group_size = -1: one group
    assert_eq!(bytes("gptq-int4-g0", BLOCK, &SQ), N / 2 + 4096 / 2 + 4096 * 2 + 4096 * 4);
    // 8-bit: four values per int32
    assert_eq!(bytes("gptq-int8", BLOCK, &SQ), N + 32 * 4096 + 32 * 4096 * 2 + 4096 * 4);
    // the head, embeddings and norms stay in the compute dtype
    for name in ["gptq-int4", "awq-int4", "nf4", "int8", "fp8"] {
        assert_eq!(bytes(name, TensorRole::Output { model: M }, &[128256, 4096]), 128256 * 4096 * 2, "{name}");
        assert_eq!(bytes(name, TensorRole::Embedding { model: M }, &[128256, 4096]), 128256 * 4096 * 2, "{name}");
    }
}

#[test]
fn gguf_blocks() {
    assert_eq!(bytes("gguf-q4_0", BLOCK, &SQ), N / 32 * 18);
    assert_eq!(bytes("gguf-q8_0", BLOCK, &SQ), N / 32 * 34);
    assert_eq!(bytes("gguf-q4_k_m", BLOCK, &SQ), N / 256 * 144);
    // 1-D tensors stay f32
    assert_eq!(bytes("gguf-q4_k_m", TensorRole::Other, &[4096]), 4096 * 4);
    assert_eq!(GgmlType::Q6K.bytes(1, 256), Some(210));
}

#[test]
fn names_round_trip_and_unknown_names_are_refused() {
    for name in WEIGHT_NAMES {
        assert_eq!(WeightFormat::parse(name).unwrap().name(), *name);
    }
    assert_eq!(WeightFormat::parse("gptq-int4-g64").unwrap(), WeightFormat::Gptq { bits: 4, group_size: 64 });
    let e = WeightFormat::parse("int3").unwrap_err().to_string();
    assert!(e.contains("int3") && e.contains("gguf-q4_k_m"), "{e}");
}

#[test]
fn kv_dtype_bytes() {
    assert_eq!(KvDtype::Fp16.bytes(128), 256);
    assert_eq!(KvDtype::Fp8.bytes(128), 128);
    assert_eq!(KvDtype::Int8.bytes(128), 4 * 34);
    assert_eq!(KvDtype::Q4.bytes(128), 4 * 18);
}

#[test]
fn quantization_config_selects_the_format() {
    use serde_json::json;
    let q = |v: serde_json::Value| hf::from_quantization_config(&v);
    assert_eq!(
        q(json!({"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true})),
        Ok(WeightFormat::Bnb4 { nf4: true, double_quant: true })
    );
    assert_eq!(q(json!({"quant_method": "bitsandbytes", "load_in_8bit": true})), Ok(WeightFormat::BnbInt8));
    assert_eq!(q(json!({"quant_method": "gptq", "bits": 4, "group_size": 128})), Ok(WeightFormat::Gptq { bits: 4, group_size: 128 }));
    assert_eq!(q(json!({"quant_method": "gptq", "bits": 4, "group_size": -1})), Ok(WeightFormat::Gptq { bits: 4, group_size: 0 }));
    assert_eq!(q(json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "GEMM"})), Ok(WeightFormat::Awq { group_size: 128 }));
    assert_eq!(q(json!({"quant_method": "fp8", "weight_block_size": [128, 128]})), Ok(WeightFormat::Fp8 { block: Some(128) }));
    let e = q(json!({"quant_method": "fp8", "weight_block_size": [128, 128], "expert_dtype": "fp4"})).unwrap_err().to_string();
    assert!(e.contains("expert_dtype") && e.contains("fp4"), "{e}");
    let e = q(json!({"quant_method": "hqq", "nbits": 4})).unwrap_err().to_string();
    assert!(e.contains("quantization_config") && e.contains("hqq"), "{e}");
    let e = q(json!({"quant_method": "gptq", "bits": 3})).unwrap_err().to_string();
    assert!(e.contains("3 bits"), "{e}");
}

#[test]
fn compressed_tensors_configs_select_their_scheme() {
    use super::ct::CtScheme;
    use serde_json::json;
    let group = |w: serde_json::Value, a: serde_json::Value| {
        json!({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
               "config_groups": {"group_0": {"targets": ["Linear"], "weights": w, "input_activations": a}}})
    };
    let q = |v: serde_json::Value| hf::from_quantization_config(&v);
    let w4 = json!({"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128});
    assert_eq!(q(group(w4, json!(null))), Ok(WeightFormat::Ct(CtScheme::Packed { bits: 4, group_size: 128, asym: false })));
    let mut fp8 = group(json!({"num_bits": 8, "type": "float", "strategy": "channel"}), json!({"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}));
    fp8["format"] = json!("float-quantized");
    assert_eq!(q(fp8), Ok(WeightFormat::Ct(CtScheme::Byte { float: true, channel: true })));
    let mut nv = group(json!({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}), json!({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}));
    nv["format"] = json!("nvfp4-pack-quantized");
    assert_eq!(q(nv), Ok(WeightFormat::Ct(CtScheme::Nvfp4 { w4a4: true })));
    // a block-wise FP8 scheme is not modelled: the error names the group and the strategy
    let mut block = group(json!({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}), json!(null));
    block["format"] = json!("float-quantized");
    let e = q(block).unwrap_err().to_string();
    assert!(e.contains("config_groups.group_0") && e.contains("block"), "{e}");
    let e = q(json!({"quant_method": "compressed-tensors"})).unwrap_err().to_string();
    assert!(e.contains("config_groups"), "{e}");
    for name in ["ct-w4a16-g128", "ct-w4a16-asym-g32", "ct-fp8", "nvfp4"] {
        assert_eq!(WeightFormat::parse(name).unwrap().name(), name);
    }
}
