//! The image-text importers of issue 25 (`qwen2_5_vl`, `llava`, `paligemma`, and `siglip`'s two towers): every class in
//! `tests/data/hf/vlm_counts.json` (`tools/hf_vlm_counts.py`: transformers 5.24 on the meta
//! device, the library defaults and random small configs) imports as that class with exactly
//! `sum(p.numel() for p in model.parameters())`.

use vramcalc_core::import::hf::{from_config_json, smart_resize};
use vramcalc_core::ModelSpec;

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn vlm_classes_have_pytorch_parameter_counts() {
    let all: serde_json::Value = serde_json::from_str(&hf::data("hf/vlm_counts.json")).unwrap();
    let all = all.as_object().unwrap();
    for t in ["qwen2_5_vl", "llava", "paligemma", "siglip"] {
        assert!(all.contains_key(&format!("{t}-default")) && all.contains_key(&format!("{t}-3")), "{t}");
    }
    for (name, want) in all {
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}

/// `smart_resize` as `image_processing_qwen2_vl.py` computes it (values worked by hand from its
/// code: rounding to multiples of 28, halves to even, the pixel bounds).
#[test]
fn qwen_vl_images_resize_as_the_processor_does() {
    let (lo, hi) = (56 * 56, 28 * 28 * 1280);
    // 1024 → round(36.57) = 37 → 1036² > max: β = √(1024²/1003520), ⌊1024/β/28⌋ = 35 → 980
    assert_eq!(smart_resize(1024, 1024, 28, lo, hi).unwrap(), (980, 980));
    // within bounds: round(480/28 = 17.14) = 17 → 476, round(640/28 = 22.86) = 23 → 644
    assert_eq!(smart_resize(480, 640, 28, lo, hi).unwrap(), (476, 644));
    // a half rounds to even: 42/28 = 1.5 → 2, 70/28 = 2.5 → 2; 56·56 ≥ min
    assert_eq!(smart_resize(42, 70, 28, lo, hi).unwrap(), (56, 56));
    // too small: β = √(3136/(10·10)), ⌈10·β/28⌉ = 2 → 56
    assert_eq!(smart_resize(10, 10, 28, lo, hi).unwrap(), (56, 56));
    assert!(smart_resize(1, 300, 28, lo, hi).is_err());
    assert!(smart_resize(0, 300, 28, lo, hi).is_err());
}

const QWEN_TINY: &str = r#"{"model_type": "qwen2_5_vl", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300,
    "vision_config": {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 40, "out_hidden_size": 64}}"#;

/// The default image (1024 × 1024 → 980 × 980) gives (980/28)² = 1225 merged tokens, which the
/// prompt holds; the vision tower's input is `[C·T, H, W]`.
#[test]
fn qwen_vl_image_tokens_follow_the_dynamic_resolution() {
    let spec = import(QWEN_TINY);
    assert_eq!(spec.input.shape, vec![6, 980, 980]);
    let r = vramcalc_core::resolve::resolve(&spec, None, Default::default()).unwrap();
    let merged = r.layers.iter().find(|l| l.kind == "merge_tokens").map(|l| l.output_shape.0.to_vec());
    assert_eq!(merged, Some(vec![1225, 128]));
    // another image: 640 × 480 → 644 × 476 pixels, (476/28)·(644/28) = 17 · 23 merged tokens
    let obj: serde_json::Value = serde_json::from_str(QWEN_TINY).unwrap();
    let other = vramcalc_core::import::hf::from_config_with_image(obj.as_object().unwrap(), (640, 480)).unwrap();
    assert_eq!(other.input.shape, vec![6, 476, 644]);
    let r = vramcalc_core::resolve::resolve(&other, None, Default::default()).unwrap();
    assert_eq!(r.layers.iter().find(|l| l.kind == "merge_tokens").map(|l| l.output_shape.0[0]), Some(17 * 23));
    let llava: serde_json::Value = serde_json::from_str(r#"{"model_type": "llava"}"#).unwrap();
    assert!(vramcalc_core::import::hf::from_config_with_image(llava.as_object().unwrap(), (640, 480)).is_err());
    let m = import_err(r#"{"model_type": "qwen2_5_vl", "hidden_size": 64, "num_attention_heads": 4, "vision_config": {"out_hidden_size": 32, "depth": 1, "hidden_size": 32, "num_heads": 2}}"#);
    assert!(m.contains("out_hidden_size"), "{m}");
}

#[test]
fn vlm_fields_they_do_not_model_are_refused_by_name() {
    let m = import_err(r#"{"model_type": "llava", "vision_feature_layer": [-2, -5]}"#);
    assert!(m.contains("vision_feature_layer"), "{m}");
    let m = import_err(r#"{"model_type": "paligemma", "vision_config": {"vision_use_head": true}}"#);
    assert!(m.contains("vision_use_head"), "{m}");
    let m = import_err(r#"{"model_type": "llava", "text_config": {"model_type": "mistral", "num_hidden_layers": 1, "no_such_field": 3}}"#);
    assert!(m.contains("no_such_field"), "{m}");
}

/// `vlm_traces.jsonl`: one training step (forward, loss on the prompt's ids, backward; no
/// optimizer) of the real transformers 5.24 class on a small config (a 2-layer 128-wide tower on
/// one 112-pixel image in 14-pixel patches: 64 image tokens; a 2-layer 256-wide decoder,
/// vocabulary 1000), batch 2, a prompt of 128 tokens, eager and SDPA attention, traced by
/// `tools/trace_hf.py` (torch 2.15, CUDA dropout/SDPA emulation). Within 3 % of each. LLaVA at
/// its default `vision_feature_layer` (−2) runs the tower's last layer and `post_layernorm`
/// off the backward path (a `discarded` block): their saved tensors die at the forward's end,
/// their gradients stay `None` (traced: the bytes live after the forward differ between −1 and
/// −2 by exactly the estimate's 1,069,120 eager and 937,008 SDPA). There the eager peak is the
/// forward's (at the loss), where the Llama decoder's `DynamicCache` K/V copies that `repeat_kv`
/// reads are alive (`layer/attention.rs`). At the time of writing: LLaVA −2 +0.26 % (eager) and
/// +0.28 % (SDPA; before: +1.45 % and +3.86 %), LLaVA −1 +0.02 % (before: +0.3 %,
/// `post_layernorm` of the whole output), PaliGemma −0.01 % and −2.46 %. And
/// SigLIP's two towers (`SiglipModel`, 96-pixel images in 8-pixel patches with the attention-pooling
/// head, 64-token captions, `return_loss=True`): +0.01 %.
#[test]
fn vlm_training_steps_match_traced_pytorch() {
    hf::assert_traces("hf/vlm_traces.jsonl", 8, |_| 3.0);
}

/// The image-text importers name their layers as transformers 5.24's classes name their modules
/// (`tools/vlm_module_names.py`: `named_modules()` of LLaVA, PaliGemma, Qwen2.5-VL and Gemma 3 on
/// small configs, `data/hf/vlm_module_names.json`): every row's name is one of the model's
/// modules, and every `nn.Linear` of the model is a weight the spec names (a quantised
/// checkpoint's skip list applies to it by that name, `formats::modules`) — the tower's too.
#[test]
fn vlm_layers_carry_the_module_names() {
    use vramcalc_core::formats::modules::{of_weights, Module};
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hf/vlm_module_names.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for case in v["cases"].as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        let modules = case["modules"].as_object().unwrap();
        let spec = from_config_json(&case["config"].to_string()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = vramcalc_core::resolve::resolve(&spec, Some(8192), vramcalc_core::lower::LowerOptions::default()).unwrap();
        let mut named = 0;
        for l in &r.layers {
            if let Some(n) = &l.name {
                assert!(modules.contains_key(n), "{name}: {} ({}) is named {n}, not a module of the model", l.path, l.kind);
                named += 1;
            }
        }
        let rows: Vec<(&str, u32)> = r.layers.iter().map(|l| (l.kind.as_str(), l.depth)).collect();
        let names: Vec<Option<&str>> = r.layers.iter().map(|l| l.name.as_deref()).collect();
        let weights = of_weights(&r.graph, &rows, &names);
        for (m, class) in modules {
            if class != "Linear" {
                continue;
            }
            let found = weights.iter().any(|(_, w)| match w {
                Module::Named(ns) => ns.contains(m),
                Module::Within(parent) => m.starts_with(&format!("{parent}.")),
            });
            assert!(found, "{name}: the Linear {m} is no weight the spec names");
        }
        assert!(named > 10, "{name}: {named} named rows");
    }
}
