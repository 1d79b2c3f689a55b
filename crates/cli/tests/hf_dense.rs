//! `vramcalc estimate --hf-config` takes every dense Hugging Face family (issue 12) through the
//! same importer as the library: the reference configs give PyTorch's exact parameter counts, and
//! a field the importer does not understand is named on stderr.

use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn config(name: &str) -> String {
    format!("{}/../core/tests/data/hf/{name}.config.json", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_reference_config_estimates_with_exact_params() {
    let path = format!("{}/../core/tests/data/hf/params.json", env!("CARGO_MANIFEST_DIR"));
    let expected: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for name in ["distilbert", "falcon", "gemma2", "gpt_neox", "mistral", "opt", "phi3", "qwen2", "qwen3", "roberta"] {
        let params = expected[name]["params"].as_u64().unwrap();
        let (code, out, err) = vramcalc(&["estimate", "--hf-config", &config(name), "--batch", "1", "--seq-len", "16", "--json"]);
        assert_eq!(code, 0, "{name}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["params"], params, "{name}");
        assert!(v["peak_bytes"].as_u64().unwrap() > params * 4, "{name}: weights alone are 4 B a parameter");
    }
}

#[test]
fn an_unknown_field_is_named() {
    let dir = std::env::temp_dir().join(format!("vramcalc-hf-dense-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(config("mistral")).unwrap().replacen('{', "{\"moe_every_other_layer\": true, ", 1);
    let path = dir.join("mistral-odd.json");
    std::fs::write(&path, text).unwrap();
    let (code, _, err) = vramcalc(&["estimate", "--hf-config", path.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("moe_every_other_layer"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
