//! The bytes a quantised checkpoint's tensors have once transformers has loaded it, against the
//! layouts `tools/measure_quant_layouts.py` recorded (`tests/data/quant_layouts.json`:
//! transformers 5.24's own module replacement — `replace_with_fp8_linear`,
//! `replace_with_bnb_linear` with the weights quantised on CPU, compressed-tensors'
//! `apply_quantization_config` + `compress_model` — on tiny `LlamaForCausalLM` and
//! `Qwen3MoeForCausalLM` configs). Each case's `config.json` and `quantization_config` go
//! through the importer and `formats::hf`, and the inference estimate's parameter bytes must
//! equal the measured sum of the model's tensors (the rotary `inv_freq` buffers aside).

use serde_json::Value;
use vramcalc_core::formats::hf::weights_of_config_json;
use vramcalc_core::{Mode, Precision, TrainConfig};

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/quant_layouts.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

/// The measured bytes of a case's tensors: rotary buffers left out (the spec has none), and
/// bitsandbytes' nested `code`: quantised on the fly, every double-quantised weight's
/// `state2.code` is the one cached `name2qmap["dynamic"]` tensor of the device, which
/// `formats::bnb4_bytes` leaves out. (A pre-quantised checkpoint loads one 256-entry fp32
/// `nested_quant_map` per weight, `QuantState.from_dict`: 1 KiB per linear more, not counted.)
fn measured(case: &Value) -> u64 {
    case["tensors"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(n, _)| !n.ends_with("inv_freq"))
        .filter(|(n, _)| !n.ends_with("quant_state.nested_code"))
        .map(|(_, t)| t["bytes"].as_u64().unwrap())
        .sum()
}

fn modelled(case: &Value) -> (String, u64) {
    modelled_at(case, 8)
}

/// [`modelled`] at a prompt of `seq` tokens (an image-text model's holds its image tokens).
fn modelled_at(case: &Value, seq: u64) -> (String, u64) {
    let mut cfg = case["config"].clone();
    cfg["quantization_config"] = case["quantization_config"].clone();
    let text = cfg.to_string();
    let format = weights_of_config_json(&text).unwrap().expect("a format");
    let spec = vramcalc_core::import::hf::from_config_json(&text).unwrap();
    let c = TrainConfig { batch: 1, seq_len: Some(seq), mode: Mode::Infer, precision: Precision::Bf16, weights: Some(format), ..TrainConfig::default() };
    (format.name(), vramcalc_core::estimate(&spec, &c).unwrap().param_bytes)
}

#[test]
fn every_measured_layout_is_the_modelled_one() {
    let mut checked = Vec::new();
    for case in cases() {
        let name = case["case"].as_str().unwrap().to_string();
        if name.starts_with("mxfp4") {
            continue; // one module, checked below
        }
        let (format, bytes) = modelled(&case);
        assert_eq!(bytes, measured(&case), "{name} ({format})");
        checked.push(format);
    }
    for f in ["fp8-block128", "ct-w4a16-g128", "ct-w4a16-asym-g128", "ct-w8a8-int8", "ct-fp8", "nvfp4", "nf4", "nf4-dq", "int8"] {
        assert!(checked.iter().any(|c| c == f), "no measured case of {f}: {checked:?}");
    }
}

/// `Mxfp4GptOssExperts` of 4 experts, hidden 256, intermediate 256: packed blocks uint8
/// `[E, out, in / 2]` as parameters (the `[E, out, in / 32]` uint8 scales live in the triton
/// `PrecisionConfig`, not a parameter) — the 16 of the 17 bytes per 32 weights `mxfp4` counts.
#[test]
fn mxfp4_blocks_as_measured() {
    let case = cases().into_iter().find(|c| c["case"] == "mxfp4-experts").unwrap();
    let t = &case["tensors"];
    let (e, h, i) = (4u64, 256u64, 256u64);
    assert_eq!(t["gate_up_proj"]["bytes"].as_u64(), Some(e * 2 * i * h / 32 * 16));
    assert_eq!(t["down_proj"]["bytes"].as_u64(), Some(e * h * i / 32 * 16));
    // the expert biases are float32 parameters (the loader keeps that dtype: `formats::apply`)
    assert_eq!(t["gate_up_proj_bias"]["dtype"], "float32");
    assert_eq!(t["down_proj_bias"]["bytes"].as_u64(), Some(e * h * 4));
    let f = vramcalc_core::formats::WeightFormat::Mxfp4;
    let role = vramcalc_core::formats::TensorRole::Other;
    assert_eq!(f.tensor_bytes(role, &[e, 2 * i, h], vramcalc_core::DType::Bf16), e * 2 * i * h / 32 * 17);
}

/// After one forward, compressed-tensors has decompressed the weights (transformers without
/// `use_optimized_inference`): the measured total grows back to the dense model and its scales.
#[test]
fn compressed_tensors_decompress_on_the_first_forward() {
    for case in cases().into_iter().filter(|c| c["case"].as_str().unwrap().starts_with("ct-") && c["case"] != "ct-w4a16-moe") {
        let after = case["total_bytes_after_forward"].as_u64().unwrap();
        let mut cfg = case["config"].clone();
        cfg.as_object_mut().unwrap().remove("quantization_config");
        let spec = vramcalc_core::import::hf::from_config_json(&cfg.to_string()).unwrap();
        let c = TrainConfig { batch: 1, seq_len: Some(8), mode: Mode::Infer, precision: Precision::Bf16, ..TrainConfig::default() };
        let dense = vramcalc_core::estimate(&spec, &c).unwrap().param_bytes;
        assert!(after > dense && after < dense + dense / 20, "{}: {after} after the forward, dense {dense}", case["case"]);
    }
}

/// A saved double-quantised bitsandbytes checkpoint, loaded back: `QuantState.from_dict` gives
/// every weight its own 256-entry fp32 `nested_quant_map` (where quantising on the fly shares one
/// cached code), 1 KiB per linear beyond what `nf4-dq` counts — the known difference the docs
/// name (docs/quantised-checkpoints.md).
#[test]
fn a_prequantised_double_quant_checkpoint_has_one_nested_code_per_weight() {
    let case = cases().into_iter().find(|c| c["case"] == "bnb-nf4-dq-prequantised-llama").unwrap();
    let t = case["tensors"].as_object().unwrap();
    let codes = t.iter().filter(|(n, _)| n.ends_with("quant_state.nested_code")).count() as u64;
    let linears = 2 * 7; // 2 layers × q, k, v, o, gate, up, down
    assert_eq!(codes, linears);
    let all: u64 = t.iter().filter(|(n, _)| !n.ends_with("inv_freq")).map(|(_, v)| v["bytes"].as_u64().unwrap()).sum();
    assert_eq!(all, modelled(&case).1 + linears * 256 * 4);
}

/// An image-text model's skip lists by module name (issue 25): the tiny Qwen2.5-VL of
/// `tools/qwen_vl_configs/tiny.json` through the same replacement (`tools/measure_vlm_quant.py`,
/// `tests/data/vlm_quant_layouts.json`). The importer names the tower `model.visual.*` and the text
/// model `model.language_model.*`, so bitsandbytes' default skips keep `lm_head` only, `["model.visual",
/// "lm_head"]` keeps the tower too, and `["visual"]` — no module's name from its start, no suffix
/// (`should_convert_module`) — keeps nothing, the head quantised as well; compressed-tensors'
/// `re:model\.visual\..*` keeps the tower. The fp8 quantizer first renames its list by the
/// class's checkpoint renamings (the hub's `visual.blocks.0` is `model.visual.blocks.0`), and so
/// does the importer.
#[test]
fn vlm_skip_lists_keep_what_the_quantiser_keeps() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vlm_quant_layouts.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let mut got = Vec::new();
    for case in v["cases"].as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        // the default image (1024 × 1024): 1,225 image tokens in the prompt
        let (format, bytes) = modelled_at(case, 2048);
        assert_eq!(bytes, measured(case), "{name} ({format})");
        got.push((name.to_string(), bytes));
        if let Some(loaded) = case.get("modules_to_not_convert_as_loaded") {
            let mut cfg = case["config"].clone();
            cfg["quantization_config"] = case["quantization_config"].clone();
            let spec = vramcalc_core::import::hf::from_config_json(&cfg.to_string()).unwrap();
            assert_eq!(serde_json::to_value(&spec.unquantised.unwrap().modules).unwrap(), *loaded, "{name}");
        }
    }
    let at = |n: &str| got.iter().find(|g| g.0 == n).unwrap().1;
    assert!(at("bnb-nf4-qwen-vl-skip-visual") > at("bnb-nf4-qwen-vl") && at("bnb-nf4-qwen-vl") > at("bnb-nf4-qwen-vl-bare-visual"), "{got:?}");
    assert_eq!(got.len(), 5);
}
