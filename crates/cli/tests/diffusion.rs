//! The diffusion flags as scripts call them (issue 27's names, exactly).

use std::process::Command;

fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = vramcalc(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

const CORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../core/src/diffusion/configs");

#[test]
fn pipeline_json_has_peak_params_stages_and_devices() {
    let v = json(&["estimate", "--pipeline", "flux.1-dev", "--width", "1024", "--height", "1024", "--offload", "model", "--json"]);
    assert_eq!(v["params"], 123_060_480u64 + 4_762_310_656 + 11_901_408_320 + 83_819_683);
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 4);
    let peak = stages.iter().map(|s| s["peak_bytes"].as_u64().unwrap()).max().unwrap();
    assert_eq!(v["peak_bytes"], peak);
    for s in stages {
        assert!(s["name"].is_string() && s["resident"].is_array());
        assert_eq!(s["resident"].as_array().unwrap().len(), 1, "model offload: one component at a time");
    }
    assert_eq!(v["devices"]["gpu_bytes"], peak);
    assert!(v["devices"]["cpu_ram_bytes"].as_u64().unwrap() > 20_000_000_000);
}

#[test]
fn every_flag_of_the_issue_parses() {
    let v = json(&[
        "estimate", "--pipeline", "sdxl", "--mode", "infer", "--width", "768", "--height", "1024", "--batch", "2",
        "--images-per-prompt", "2", "--guidance", "cfg", "--offload", "sequential", "--vae-tiling", "--vae-slicing",
        "--precision", "fp16", "--json",
    ]);
    assert_eq!(v["width"], 768);
    let denoise = v["stages"].as_array().unwrap().iter().find(|s| s["name"] == "denoise").unwrap();
    assert_eq!(denoise["batch"], 8, "2 prompts × 2 images × CFG");
    let v = json(&["estimate", "--pipeline", "wan2.1-t2v-1.3b", "--frames", "33", "--text-len", "256", "--vae-tiling", "256", "--offload", "group", "--json"]);
    assert_eq!(v["frames"], 33);
    let v = json(&["estimate", "--pipeline", "flux.1-schnell", "--mode", "decode", "--json"]);
    assert_eq!(v["stages"].as_array().unwrap().len(), 1);
    let v = json(&["estimate", "--pipeline", "flux.1-dev", "--weights", "nf4", "--guidance", "distilled", "--json"]);
    let t = v["components"].as_array().unwrap().iter().find(|c| c["name"] == "transformer").unwrap();
    assert_eq!(t["dtype"], "nf4");
}

#[test]
fn model_index_and_one_component() {
    let index = format!("{CORE}/sd-1.5/model_index.json");
    let a = json(&["estimate", "--model-index", &index, "--json"]);
    let b = json(&["estimate", "--pipeline", "sd-1.5", "--json"]);
    assert_eq!(a["peak_bytes"], b["peak_bytes"]);
    let unet = format!("{CORE}/sdxl/unet/config.json");
    let v = json(&["estimate", "--diffusers-config", &unet, "--width", "1024", "--height", "1024", "--batch", "2", "--precision", "fp16", "--json"]);
    assert_eq!(v["params"], 2_567_463_684u64);
    assert!(v["peak_bytes"].as_u64().unwrap() > 2 * 2_567_463_684);
    let t5 = format!("{CORE}/flux.1-dev/text_encoder_2/config.json");
    let v = json(&["estimate", "--diffusers-config", &t5, "--text-len", "512", "--json"]);
    assert_eq!(v["params"], 4_762_310_656u64);
    let (code, out, _) = vramcalc(&["estimate", "--pipeline", "sd-1.5"]);
    assert_eq!(code, 0);
    assert!(out.contains("peak allocated") && out.contains("denoise"), "{out}");
}

#[test]
fn bad_values_are_clear_errors() {
    for (args, says) in [
        (vec!["estimate", "--pipeline", "sd-9"], "unknown pipeline"),
        (vec!["estimate", "--pipeline", "sdxl", "--offload", "params"], "--offload"),
        (vec!["estimate", "--pipeline", "sdxl", "--guidance", "strong"], "--guidance"),
        (vec!["estimate", "--pipeline", "sdxl", "--mode", "generate"], "--mode"),
        (vec!["estimate", "--pipeline", "sdxl", "--component-dtype", "unet2=fp8"], "no component"),
        (vec!["estimate", "--pipeline", "flux.1-schnell", "--guidance", "distilled"], "guidance_embeds"),
        (vec!["estimate", "--model-index", "/nonexistent/model_index.json"], "reading"),
    ] {
        let (code, _, err) = vramcalc(&args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn the_table_covers_every_preset_and_card() {
    let (code, out, err) = vramcalc(&["diffusion-table"]);
    assert_eq!(code, 0, "{err}");
    for id in ["sd-1.5", "sdxl", "sd3.5-medium", "sd3.5-large", "flux.1-dev", "flux.1-schnell", "wan2.1-t2v-1.3b", "wan2.1-t2v-14b"] {
        assert!(out.contains(&format!("| {id} |")), "{id}");
    }
    assert!(out.contains("| 8 GB | 12 GB | 16 GB | 24 GB |"));
}

#[test]
fn lora_training_of_the_denoiser() {
    let args = ["estimate", "--pipeline", "sdxl", "--mode", "train", "--finetune", "lora", "--lora-r", "16", "--lora-targets", "to_q,to_k,to_v,to_out.0", "--precision", "bf16", "--json"];
    let v = json(&args);
    assert_eq!(v["component"], "unet");
    let trainable = v["trainable_params"].as_u64().unwrap();
    assert!(trainable > 0 && trainable < v["params"].as_u64().unwrap() / 50);
    let mut ck: Vec<&str> = args.to_vec();
    ck.extend(["--checkpointing", "--optimizer", "adam8bit"]);
    let c = json(&ck);
    assert!(c["peak_bytes"].as_u64().unwrap() < v["peak_bytes"].as_u64().unwrap());
    // without --finetune lora: the full fine-tune (tests/diffusion_full.rs), every parameter trains
    let full = json(&["estimate", "--pipeline", "sdxl", "--mode", "train", "--json"]);
    assert_eq!(full["finetune"], "full");
    assert_eq!(full["trainable_params"], full["params"]);
    assert!(full["params"].as_u64().unwrap() < v["params"].as_u64().unwrap(), "no adapters");
}

#[test]
fn max_of_a_pipeline_fits_and_one_step_more_does_not() {
    let v = json(&["max", "--of", "resolution", "--pipeline", "sdxl", "--gpu", "rtx-4090", "--json"]);
    let total = v["device_total_bytes"].as_u64().unwrap();
    assert!(total <= v["capacity_bytes"].as_u64().unwrap());
    let (w, h) = (v["width"].as_u64().unwrap(), v["height"].as_u64().unwrap());
    assert_eq!((w, h), (v["value"].as_u64().unwrap(), w), "square by default");
    // 8 px more does not fit (`estimate --fits` exits 1)
    let (code, _, err) = vramcalc(&["estimate", "--pipeline", "sdxl", "--width", &(w + 8).to_string(), "--height", &(h + 8).to_string(), "--fits", "rtx-4090"]);
    assert_eq!(code, 1, "{err}");
    let (code, _, _) = vramcalc(&["estimate", "--pipeline", "sdxl", "--width", &w.to_string(), "--height", &h.to_string(), "--fits", "rtx-4090"]);
    assert_eq!(code, 0);
    let f = json(&["max", "--of", "frames", "--pipeline", "wan2.1-t2v-1.3b", "--gpu", "rtx-4090", "--offload", "model", "--json"]);
    assert_eq!(f["value"].as_u64().unwrap() % 4, 1, "4k + 1 frames");
    // nothing fits: exit 1 with `value: null`; frames of an image pipeline: bad input
    let (code, out, _) = vramcalc(&["max", "--of", "batch", "--pipeline", "flux.1-dev", "--gpu", "rtx-3060", "--json"]);
    assert_eq!(code, 1);
    assert!(out.contains("\"value\": null"), "{out}");
    let (code, _, err) = vramcalc(&["max", "--of", "frames", "--pipeline", "sdxl", "--gpu", "rtx-4090"]);
    assert_eq!(code, 2);
    assert!(err.contains("frames"), "{err}");
}

#[test]
fn pipeline_what_ifs_in_json_with_their_verdicts() {
    // Flux-dev in bf16 without offload does not fit 24 GB: exit 1, the what-ifs say what does
    let (code, out, err) = vramcalc(&["estimate", "--pipeline", "flux.1-dev", "--what-if", "--fits", "rtx-4090", "--json"]);
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let w = v["what_ifs"].as_array().unwrap();
    let get = |n: &str| w.iter().find(|x| x["name"] == n).unwrap_or_else(|| panic!("no {n}: {w:?}"));
    assert_eq!(get("offload model")["fits"], true);
    assert!(get("nf4 denoiser")["delta_bytes"].as_i64().unwrap() < 0);
    assert_eq!(v["fits"]["fits"], false);
}

#[test]
fn lora_what_ifs_and_fits() {
    let v = json(&["estimate", "--pipeline", "sd-1.5", "--mode", "train", "--finetune", "lora", "--lora-r", "8", "--width", "512", "--height", "512", "--what-if", "--json"]);
    let w = v["what_ifs"].as_array().unwrap();
    let get = |n: &str| w.iter().find(|x| x["name"] == n).unwrap_or_else(|| panic!("no {n}: {w:?}"))["delta_bytes"].as_i64().unwrap();
    assert!(get("gradient checkpointing") < 0);
    assert!(get("uncached latents and text embeddings") > 0);
    let (code, out, err) = vramcalc(&["estimate", "--pipeline", "sd-1.5", "--mode", "train", "--finetune", "lora", "--fits", "h100-80gb"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fits"), "{out}");
}

/// `--trainer kohya`: kohya's flag names, its LoRA targets (every linear of the transformer
/// blocks: more than diffusers' attention-only default), the VAE and text encoders on the GPU
/// until cached, `--full-bf16` halving the network's state, and the text encoders' LoRA
/// (kohya's default without `--network-train-unet-only`).
#[test]
fn kohya_lora_step_with_its_flags() {
    let base = ["estimate", "--pipeline", "sdxl", "--mode", "train", "--finetune", "lora", "--precision", "bf16", "--width", "512", "--height", "512"];
    let with = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(extra);
        a.push("--json");
        json(&a)
    };
    let diffusers = with(&["--lora-r", "16"]);
    let cached = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents", "--cache-text-encoder-outputs"]);
    assert_eq!(cached["trainer"], "kohya");
    assert!(cached["trainable_params"].as_u64().unwrap() > diffusers["trainable_params"].as_u64().unwrap());
    assert_eq!(cached["resident"].as_array().unwrap().len(), 0);
    let uncached = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only"]);
    let names: Vec<&str> = uncached["resident"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["text_encoder", "text_encoder_2", "vae"]);
    let extra: u64 = uncached["resident"].as_array().unwrap().iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(uncached["peak_bytes"].as_u64().unwrap(), cached["peak_bytes"].as_u64().unwrap() + extra);
    let full = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents", "--cache-text-encoder-outputs", "--full-bf16"]);
    assert!(full["peak_bytes"].as_u64().unwrap() < cached["peak_bytes"].as_u64().unwrap());
    let conv = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents", "--cache-text-encoder-outputs", "--conv-dim", "8"]);
    assert!(conv["trainable_params"].as_u64().unwrap() > cached["trainable_params"].as_u64().unwrap());
    // kohya's default: the text encoders' LoRA trains too, the encoders inside the step
    let te = with(&["--trainer", "kohya", "--network-dim", "16", "--cache-latents"]);
    assert_eq!(te["text_encoder_lora"], true);
    assert_eq!(te["text_encoders_trained"], 2);
    assert_eq!(cached["text_encoder_lora"], false);
    assert!(te["resident"].as_array().unwrap().is_empty(), "{te}");
    assert!(te["trainable_params"].as_u64().unwrap() > cached["trainable_params"].as_u64().unwrap());
    let unet_only = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents"]);
    assert!(te["peak_bytes"].as_u64().unwrap() > unet_only["peak_bytes"].as_u64().unwrap());
    // --fp8-base: the frozen UNet and text encoders in fp8 (the step's weights halve; without
    // checkpointing autocast's bf16 copies of them stay saved for the backward)
    let fp8 = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents", "--cache-text-encoder-outputs", "--fp8-base", "--checkpointing"]);
    let bf16 = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents", "--cache-text-encoder-outputs", "--checkpointing"]);
    assert_eq!(fp8["fp8_base"], true);
    assert!(fp8["peak_bytes"].as_u64().unwrap() < bf16["peak_bytes"].as_u64().unwrap());
    let te_fp8 = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents", "--fp8-base"]);
    let te_unet_fp8 = with(&["--trainer", "kohya", "--network-dim", "16", "--network-train-unet-only", "--cache-latents", "--fp8-base-unet"]);
    let te_bytes = |v: &serde_json::Value| v["resident"].as_array().unwrap().iter().map(|r| r["bytes"].as_u64().unwrap()).sum::<u64>();
    assert!(te_bytes(&te_fp8) < te_bytes(&te_unet_fp8), "{te_fp8} {te_unet_fp8}");
    for (args, want) in [
        (vec!["--trainer", "kohya", "--precision", "fp32", "--fp8-base"], "--fp8-base"),
        (vec!["--fp8-base"], "--trainer kohya"),
        (vec!["--trainer", "kohya", "--cache-text-encoder-outputs"], "--network-train-unet-only"),
        (vec!["--cache-latents"], "--trainer kohya"),
        (vec!["--trainer", "kohya", "--network-train-unet-only", "--full-fp16"], "--full-fp16"),
    ] {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(args);
        let (code, _, err) = vramcalc(&a);
        assert_ne!(code, 0);
        assert!(err.contains(want), "{err}");
    }
}
