//! `vramcalc estimate --hf-config` on the mixture-of-experts configs (core's `tests/data/hf/`).

use std::process::Command;

fn estimate(model_type: &str, extra: &[&str]) -> serde_json::Value {
    let config = format!("{}/../core/tests/data/hf/{model_type}.config.json", env!("CARGO_MANIFEST_DIR"));
    let mut args = vec!["estimate", "--hf-config", config.as_str(), "--batch", "1", "--seq-len", "64", "--json"];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(&args).output().expect("run vramcalc");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{model_type}: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn hf_config_accepts_the_moe_model_types() {
    for (model_type, params) in [
        ("mixtral", 46_702_792_704u64),
        ("qwen2_moe", 14_315_784_192),
        ("qwen3_moe", 15_350_731_776),
        ("deepseek_v3", 671_026_404_352),
    ] {
        let v = estimate(model_type, &[]);
        assert_eq!(v["params"], params, "{model_type}");
        assert!(v["peak_bytes"].as_u64().unwrap() > 4 * params, "{model_type}");
    }
}
