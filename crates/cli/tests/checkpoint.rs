//! `estimate --safetensors-index / --safetensors`: the checkpoint as stored beside the modelled
//! weights (issue 25), on the headers `tools/make_safetensors_headers.py` wrote; and a preset
//! with a published `quantization_config` counted as stored.

use serde_json::Value;
use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn data(name: &str) -> String {
    format!("{}/../core/tests/data/safetensors/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn stored_and_modelled_are_shown_together() {
    let (code, out, err) = vramcalc(&["estimate", "--hf-config", &data("llama-bf16.config.json"), "--mode", "infer", "--safetensors-index", &data("llama-bf16.index.json")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("checkpoint as stored: 3.78 MB") && out.contains("they agree within 1 %"), "{out}");
    // the W4A16 file against the bf16 config: both figures, flagged
    let (code, out, err) = vramcalc(&["estimate", "--hf-config", &data("llama-bf16.config.json"), "--mode", "infer", "--safetensors", &data("llama-ct-w4a16.model.safetensors.header"), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let c = &v["checkpoint"];
    assert_eq!(c["stored_bytes"], 1_736_416);
    assert_eq!(c["modelled_weight_bytes"], v["param_bytes"]);
    assert_eq!(c["disagree"], true);
    let by = c["stored_bytes_by_dtype"].as_object().unwrap();
    assert_eq!(by.values().map(|b| b.as_u64().unwrap()).sum::<u64>(), 1_736_416);
    assert!(by.contains_key("I32") && by.contains_key("BF16"), "{by:?}");
    // with its own quantization_config the same file agrees to the byte
    let (_, out, _) = vramcalc(&["estimate", "--hf-config", &data("llama-ct-w4a16.config.json"), "--mode", "infer", "--safetensors", &data("llama-ct-w4a16.model.safetensors.header"), "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["checkpoint"]["stored_bytes"], v["param_bytes"]);
}

#[test]
fn a_bad_header_is_an_error_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("vramcalc-st-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.safetensors");
    let json = br#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}}"#;
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(json);
    std::fs::write(&path, bytes).unwrap();
    let (code, _, err) = vramcalc(&["estimate", "--preset", "gpt2", "--mode", "infer", "--safetensors", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.safetensors") && err.contains("w.data_offsets") && err.contains("at byte 9"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// gpt-oss-20b's checkpoint is published with `quant_method: "mxfp4"`: inference of the preset
/// loads its experts as stored (13,774,535,808 bytes: `tests/formats.rs`), not in bf16.
#[test]
fn a_published_quantization_counts_as_stored() {
    let (code, out, err) = vramcalc(&["estimate", "--preset", "gpt-oss-20b", "--mode", "infer", "--precision", "bf16", "--batch", "1", "--seq-len", "128", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["param_bytes"], 13_774_535_808u64);
    let (_, out, _) = vramcalc(&["estimate", "--preset", "gpt-oss-20b", "--mode", "infer", "--precision", "bf16", "--batch", "1", "--seq-len", "128", "--weights", "bf16", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["param_bytes"], 2 * 20_914_757_184u64);
}

/// A skip list is applied per module (the spec's `unquantised`): bitsandbytes keeps layer 0's
/// attention in bf16 and, with a list that leaves out `lm_head`, quantises the head; nothing is
/// left to note. Qwen2.5-VL's layers carry transformers 5.24's names (`model.visual.*`): AWQ's
/// `["model.visual"]` keeps the tower in the model dtype, `["visual"]` matches no module there
/// (`should_convert_module`: from the name's start, or a suffix) and the tower is counted packed.
#[test]
fn skip_lists_apply_per_module() {
    let dir = std::env::temp_dir().join(format!("vramcalc-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |cfg: &Value, name: &str| {
        let path = dir.join(name);
        std::fs::write(&path, cfg.to_string()).unwrap();
        let (code, out, err) = vramcalc(&["estimate", "--hf-config", path.to_str().unwrap(), "--mode", "infer", "--json"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(&out).unwrap()
    };
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(data("llama-bf16.config.json")).unwrap()).unwrap();
    let nf4 = serde_json::json!({"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4"});
    cfg["quantization_config"] = nf4.clone();
    let plain = run(&cfg, "plain.json");
    cfg["quantization_config"]["llm_int8_skip_modules"] = serde_json::json!(["model.layers.0.self_attn", "lm_head"]);
    let kept = run(&cfg, "kept.json");
    assert!(kept.get("quantization_notes").is_none(), "{kept}");
    assert!(kept["param_bytes"].as_u64() > plain["param_bytes"].as_u64());
    cfg["quantization_config"]["llm_int8_skip_modules"] = serde_json::json!(["model.layers.0.self_attn"]);
    let head = run(&cfg, "head.json");
    assert!(head["param_bytes"].as_u64() < kept["param_bytes"].as_u64());
    let vl = serde_json::json!({"model_type": "qwen2_5_vl", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 300, "vision_config": {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 32, "out_hidden_size": 64},
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm", "modules_to_not_convert": ["visual"]}});
    let bare = run(&vl, "vl.json");
    let mut vl = vl;
    vl["quantization_config"]["modules_to_not_convert"] = serde_json::json!(["model.visual"]);
    let kept = run(&vl, "vl-kept.json");
    for v in [&bare, &kept] {
        assert!(v["quantization_notes"].as_array().is_none_or(Vec::is_empty), "{v}");
    }
    assert!(kept["param_bytes"].as_u64() > bare["param_bytes"].as_u64(), "{kept} {bare}");
    std::fs::remove_dir_all(&dir).ok();
}
