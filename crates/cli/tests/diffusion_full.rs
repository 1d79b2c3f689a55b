//! `estimate --mode train` without `--finetune lora`: diffusers' full fine-tune of the UNet.

mod common;

use common::{json, vramcalc};

fn refused(args: &[&str], needle: &str) {
    let (code, _, err) = vramcalc(args);
    assert_ne!(code, 0, "{args:?} was accepted");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The measured records' first tiny UNet, written to a `config.json` the CLI reads; the CLI's
/// peak on `--device cpu` is the measured step's within 3 %.
#[test]
fn diffusers_config_unet_matches_a_measured_step() {
    let data = include_str!("../../core/tests/data/diffusion_full.jsonl");
    let dir = std::env::temp_dir().join(format!("vramcalc-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut n = 0;
    for line in data.lines().filter(|l| !l.trim().is_empty()) {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        if r["script"] != "train_dreambooth.py" || r["batch"] != 1 || r["name"] != "unet-sd" {
            continue;
        }
        let path = dir.join("config.json");
        std::fs::write(&path, r["config"].to_string()).unwrap();
        let (w, h) = (r["width"].to_string(), r["height"].to_string());
        let mut args = vec!["estimate", "--diffusers-config", path.to_str().unwrap(), "--mode", "train", "--width", &w, "--height", &h, "--precision", "bf16", "--device", "cpu", "--batch", "1", "--json"];
        if r["checkpointing"] == true {
            args.push("--checkpointing");
        }
        let v = json(&args);
        assert_eq!(v["finetune"], "full");
        assert_eq!(v["script"], "train_dreambooth.py");
        assert_eq!(v["params"], r["params"]);
        assert_eq!(v["trainable_params"], r["params"], "every UNet parameter trains");
        let (got, want) = (v["peak_bytes"].as_f64().unwrap(), r["peak_bytes"].as_f64().unwrap());
        assert!((got / want - 1.0).abs() < 0.03, "{w}x{h} ckpt {}: {got} vs measured {want}", r["checkpointing"]);
        n += 1;
    }
    assert!(n >= 4, "{n} records");
}

#[test]
fn pipelines_keep_their_frozen_encoders_and_ema_adds_a_copy() {
    let base = ["estimate", "--pipeline", "sd-1.5", "--mode", "train", "--width", "512", "--height", "512", "--checkpointing", "--json"];
    let v = json(&base);
    let params = v["params"].as_u64().unwrap();
    assert_eq!(params, 859_520_964, "SD 1.5's UNet");
    assert_eq!(v["trainable_params"].as_u64().unwrap(), params);
    let resident: Vec<&str> = v["resident"].as_array().unwrap().iter().map(|r| r["component"].as_str().unwrap()).collect();
    assert_eq!(resident, ["text_encoder", "vae"], "train_dreambooth.py keeps the VAE and text encoder on the GPU");
    let frozen: u64 = v["resident"].as_array().unwrap().iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(v["peak_bytes"].as_u64().unwrap(), v["step_peak_bytes"].as_u64().unwrap() + frozen);
    // weights, gradients and AdamW's two moments: at least 16 bytes a parameter
    assert!(v["step_peak_bytes"].as_u64().unwrap() > 16 * params);

    let ema = json(&[&base[..], &["--use-ema"]].concat());
    assert_eq!(ema["script"], "train_text_to_image.py");
    assert_eq!(ema["ema_bytes"].as_u64().unwrap(), 4 * params);
    let t2i = json(&[&base[..], &["--set-grads-to-none"]].concat());
    assert_eq!(ema["peak_bytes"].as_u64().unwrap(), t2i["peak_bytes"].as_u64().unwrap() + 4 * params);
    let off = json(&[&base[..], &["--use-ema", "--offload-ema"]].concat());
    assert_eq!(off["peak_bytes"], t2i["peak_bytes"]);
    assert_eq!(off["devices"]["cpu_ram_bytes"].as_u64().unwrap(), 4 * params);
    let adam8 = json(&[&base[..], &["--optimizer", "adam8bit"]].concat());
    assert!(adam8["peak_bytes"].as_u64().unwrap() + 5 * params < v["peak_bytes"].as_u64().unwrap());

    // SDXL: train_text_to_image_sdxl.py precomputes embeddings and latents and frees the encoders
    let xl = json(&["estimate", "--pipeline", "sdxl", "--mode", "train", "--checkpointing", "--json"]);
    assert_eq!(xl["script"], "train_text_to_image_sdxl.py");
    assert!(xl["resident"].as_array().unwrap().is_empty());
    assert_eq!(xl["peak_bytes"], xl["step_peak_bytes"]);
    // Flux: train_dreambooth_flux.py keeps the VAE, deletes the text encoders after the prompt's embeddings
    let flux = json(&["estimate", "--pipeline", "flux.1-dev", "--mode", "train", "--checkpointing", "--optimizer", "adam8bit", "--json"]);
    assert_eq!(flux["script"], "train_dreambooth_flux.py");
    assert_eq!(flux["params"].as_u64().unwrap(), 11_901_408_320);
    let kept: Vec<&str> = flux["resident"].as_array().unwrap().iter().map(|r| r["component"].as_str().unwrap()).collect();
    assert_eq!(kept, ["vae"]);
    let (code, text, err) = vramcalc(&["estimate", "--pipeline", "sd-1.5", "--mode", "train"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("full fine-tune") && text.contains("peak allocated"), "{text}");
}

#[test]
fn what_is_not_modelled_is_refused() {
    let t = ["estimate", "--mode", "train"];
    refused(&[&t[..], &["--pipeline", "sd3.5-medium"]].concat(), "SD3Transformer2DModel");
    refused(&[&t[..], &["--pipeline", "wan2.1-t2v-1.3b"]].concat(), "--finetune lora");
    refused(&[&t[..], &["--pipeline", "flux.1-dev", "--use-ema"]].concat(), "no EMA");
    refused(&[&t[..], &["--pipeline", "sd-1.5", "--trainer", "kohya", "--network-train-unet-only"]].concat(), "add --finetune lora");
    refused(&[&t[..], &["--pipeline", "sd-1.5", "--train-text-encoder"]].concat(), "--train-text-encoder");
    refused(&[&t[..], &["--pipeline", "sd-1.5", "--offload-ema"]].concat(), "--use-ema");
    refused(&[&t[..], &["--pipeline", "sd-1.5", "--finetune", "lora", "--use-ema"]].concat(), "full fine-tuning's");
    refused(&[&t[..], &["--pipeline", "sd-1.5", "--what-if"]].concat(), "full fine-tune");
}
