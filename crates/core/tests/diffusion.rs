//! Diffusion pipelines: parameter counts of every preset component against diffusers and
//! transformers (`tools/diffusion_param_counts.py`, data in `tests/data/diffusion_params.json`),
//! and the pipeline's stages per offload mode.

use vramcalc_core::diffusion::pipeline::component_params;
use vramcalc_core::diffusion::{presets, Component};

fn counts() -> serde_json::Value {
    serde_json::from_str(include_str!("data/diffusion_params.json")).unwrap()
}

#[test]
fn every_preset_component_has_its_exact_parameter_count() {
    let counts = counts();
    let mut bad = Vec::new();
    for (id, _, _, comps) in presets::PIPELINES {
        for (name, text) in comps.iter() {
            let key = format!("{id}/{name}");
            let want = counts[&key]["params"].as_u64().unwrap_or_else(|| panic!("{key} not measured"));
            let c = Component::from_json(text).unwrap_or_else(|e| panic!("{key}: {e}"));
            let got = component_params(&c).unwrap_or_else(|e| panic!("{key}: {e}"));
            if got != want {
                bad.push(format!("{key}: {got} != {want} ({:+})", got as i64 - want as i64));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}



/// Forward and decode peaks measured with diffusers/transformers under FakeTensorMode with
/// MemTracker (`tools/measure_diffusion.py`, CPU, `torch.no_grad()`): small configs of every
/// family at two sizes, VAE decodes with and without tiling and slicing.
#[test]
fn forward_peaks_match_measured_within_2_percent() {
    use vramcalc_core::config::Device;
    use vramcalc_core::diffusion::pipeline::{stage_forward, Family};
    use vramcalc_core::diffusion::{ComponentKind, Pass, PipelineSettings, WeightDType};
    let mut bad = Vec::new();
    let mut n = 0;
    for line in include_str!("data/diffusion_forward.jsonl").lines().filter(|l| !l.trim().is_empty()) {
        let tolerance = 0.02;
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let c = Component::from_config(r["config"].as_object().unwrap()).unwrap();
        let get = |k: &str| r[k].as_u64();
        let (w, h, f, l) = (get("width").unwrap_or(0), get("height").unwrap_or(0), get("frames").unwrap_or(1), get("text_len").unwrap_or(0));
        let pass = match c.kind() {
            ComponentKind::Vae => Pass::Decode { width: w, height: h, frames: f },
            ComponentKind::TextEncoder => Pass::EncodeText { text_len: l },
            ComponentKind::Denoiser => Pass::Denoise { width: w, height: h, frames: f, text_len: l },
        };
        let dt = WeightDType::parse(r["dtype"].as_str().unwrap()).unwrap();
        let s = PipelineSettings {
            vae_tiling: get("tiling").map(|t| if t == 1 { 0 } else { t }),
            vae_slicing: r["slicing"].as_bool().unwrap_or(false),
            device: Device::Cpu,
            ..Default::default()
        };
        let (fw, _, _, _) = stage_forward(Family::Sd, &c, pass, dt, get("batch").unwrap(), &s, String::new()).unwrap();
        let want = get("peak_bytes").unwrap();
        let err = fw.peak as f64 / want as f64 - 1.0;
        let label = format!("{} {w}x{h}x{f} L{l} b{} {}", r["name"], get("batch").unwrap(), dt.name());
        println!("{label:<44} measured {want:>11} estimated {:>11} {:+.2}%", fw.peak, err * 100.0);
        if fw.params != get("params").unwrap() {
            bad.push(format!("{label}: params {} != {}", fw.params, get("params").unwrap()));
        }
        if err.abs() > tolerance {
            bad.push(format!("{label}: {:+.2}% (tolerance {:.0}%)", err * 100.0, tolerance * 100.0));
        }
        n += 1;
    }
    assert!(n >= 30, "only {n} records");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

mod pipelines {
    use vramcalc_core::diffusion::{Guidance, Offload, PipelineSettings, PipelineSpec, WeightDType};

    fn est(id: &str, s: PipelineSettings) -> vramcalc_core::diffusion::PipelineEstimate {
        PipelineSpec::preset(id).unwrap().estimate(&s).unwrap()
    }

    fn stage<'a>(e: &'a vramcalc_core::diffusion::PipelineEstimate, name: &str) -> &'a vramcalc_core::diffusion::StageReport {
        e.stages.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no stage {name}"))
    }

    #[test]
    fn stages_run_in_diffusers_order_and_the_peak_is_the_largest() {
        let e = est("flux.1-dev", PipelineSettings::default());
        let names: Vec<&str> = e.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["encode:text_encoder", "encode:text_encoder_2", "denoise", "decode"]);
        assert_eq!(e.peak_bytes, e.stages.iter().map(|s| s.peak).max().unwrap());
        // without offload every component's weights are resident in every stage
        assert!(e.stages.iter().all(|s| s.resident.len() == 4 && s.cpu_weights == 0));
    }

    #[test]
    fn model_offload_keeps_one_component_on_the_gpu() {
        let none = est("flux.1-dev", PipelineSettings::default());
        let model = est("flux.1-dev", PipelineSettings { offload: Offload::Model, ..Default::default() });
        let weights = |name: &str| none.components.iter().find(|c| c.name == name).unwrap().weight_bytes;
        for s in &model.stages {
            assert_eq!(s.resident, std::slice::from_ref(&s.component));
            assert_eq!(s.gpu_weights, weights(&s.component), "{}", s.name);
            // the others wait in CPU RAM
            let total: u64 = none.components.iter().map(|c| c.weight_bytes).sum();
            assert_eq!(s.cpu_weights, total - weights(&s.component));
        }
        // Flux-dev's transformer alone is 23.8 GB in bf16: the denoise stage is the peak
        assert_eq!(model.peak_stage, "denoise");
        assert!(model.peak_bytes < none.peak_bytes);
    }

    #[test]
    fn sequential_and_group_offload_onload_less_than_a_component() {
        let model = est("sd3.5-large", PipelineSettings { offload: Offload::Model, ..Default::default() });
        let group = est("sd3.5-large", PipelineSettings { offload: Offload::Group, ..Default::default() });
        let seq = est("sd3.5-large", PipelineSettings { offload: Offload::Sequential, ..Default::default() });
        let d = |e: &vramcalc_core::diffusion::PipelineEstimate| stage(e, "denoise").gpu_weights;
        assert!(d(&seq) < d(&group) && d(&group) < d(&model) / 10, "{} {} {}", d(&seq), d(&group), d(&model));
        // the activations are the same forward's
        assert_eq!(stage(&seq, "denoise").activations, stage(&model, "denoise").activations);
    }

    #[test]
    fn cfg_doubles_the_batch_only_where_the_pipeline_batches_it() {
        let sdxl_cfg = est("sdxl", PipelineSettings::default());
        let sdxl_none = est("sdxl", PipelineSettings { guidance: Some(Guidance::None), ..Default::default() });
        assert_eq!(stage(&sdxl_cfg, "denoise").batch, 2);
        assert_eq!(stage(&sdxl_none, "denoise").batch, 1);
        assert!(stage(&sdxl_cfg, "denoise").activations > stage(&sdxl_none, "denoise").activations);
        // Flux-dev's distilled guidance is one forward; Wan runs its two predictions one by one
        assert_eq!(stage(&est("flux.1-dev", PipelineSettings::default()), "denoise").batch, 1);
        assert_eq!(stage(&est("wan2.1-t2v-1.3b", PipelineSettings::default()), "denoise").batch, 1);
        let err = PipelineSpec::preset("flux.1-schnell").unwrap().estimate(&PipelineSettings { guidance: Some(Guidance::Distilled), ..Default::default() });
        assert!(err.unwrap_err().to_string().contains("guidance_embeds"));
    }

    #[test]
    fn tiling_and_slicing_lower_the_decode_peak() {
        let base = PipelineSettings { width: Some(2048), height: Some(2048), batch: 2, ..Default::default() };
        let plain = stage(&est("sd3.5-medium", base.clone()), "decode").activations;
        let tiled = stage(&est("sd3.5-medium", PipelineSettings { vae_tiling: Some(0), ..base.clone() }), "decode").activations;
        let sliced = stage(&est("sd3.5-medium", PipelineSettings { vae_slicing: true, ..base.clone() }), "decode").activations;
        assert!(tiled < plain / 2 && sliced < plain, "{plain} {tiled} {sliced}");
        // a latent within one tile is not tiled (`_decode`)
        let small = PipelineSettings { width: Some(512), height: Some(512), ..Default::default() };
        assert_eq!(
            stage(&est("sd3.5-medium", small.clone()), "decode").peak,
            stage(&est("sd3.5-medium", PipelineSettings { vae_tiling: Some(0), ..small }), "decode").peak
        );
    }

    #[test]
    fn sdxl_upcasts_its_fp16_vae_and_quantised_denoisers_shrink() {
        let e = est("sdxl", PipelineSettings::default());
        assert!(stage(&e, "decode").note.contains("upcast"));
        let bf16 = est("flux.1-dev", PipelineSettings { offload: Offload::Model, ..Default::default() });
        let nf4 = est("flux.1-dev", PipelineSettings { offload: Offload::Model, component_dtypes: vec![("transformer".into(), WeightDType::Nf4)], ..Default::default() });
        let fp8 = est("flux.1-dev", PipelineSettings { offload: Offload::Model, component_dtypes: vec![("transformer".into(), WeightDType::Fp8)], ..Default::default() });
        let w = |e: &vramcalc_core::diffusion::PipelineEstimate| stage(e, "denoise").gpu_weights as f64;
        assert!((w(&fp8) / w(&bf16) - 0.5).abs() < 0.02, "{}", w(&fp8) / w(&bf16));
        assert!((w(&nf4) / w(&bf16) - 0.28).abs() < 0.03, "{}", w(&nf4) / w(&bf16));
    }

    #[test]
    fn model_index_reads_components_beside_it_and_errors_name_the_file() {
        let (_, _, index, comps) = vramcalc_core::diffusion::presets::files("sd-1.5").unwrap();
        let spec = PipelineSpec::from_model_index(index, |n| comps.iter().find(|c| c.0 == n).map(|c| c.1.to_string())).unwrap();
        assert_eq!(spec.components.len(), 3);
        let err = PipelineSpec::from_model_index(index, |n| if n == "unet" { None } else { comps.iter().find(|c| c.0 == n).map(|c| c.1.to_string()) }).unwrap_err();
        assert!(err.to_string().contains("unet/config.json"), "{err}");
        let bad = r#"{"_class_name": "UNet2DConditionModel", "block_out_channels": "wide"}"#;
        let err = vramcalc_core::diffusion::Component::from_json(bad).unwrap_err().to_string();
        assert!(err.contains("block_out_channels"), "{err}");
        let err = vramcalc_core::diffusion::Component::from_json(r#"{"_class_name": "Kandinsky3UNet"}"#).unwrap_err().to_string();
        assert!(err.contains("Kandinsky3UNet"), "{err}");
    }

    #[test]
    fn absurd_sizes_are_errors_not_panics() {
        let p = PipelineSpec::preset("wan2.1-t2v-14b").unwrap();
        for s in [
            PipelineSettings { width: Some(0), ..Default::default() },
            PipelineSettings { frames: Some(0), ..Default::default() },
            PipelineSettings { batch: 0, ..Default::default() },
            PipelineSettings { width: Some(1 << 40), ..Default::default() },
        ] {
            assert!(p.estimate(&s).is_err());
        }
    }
}

/// LoRA training steps measured with diffusers + peft (`tools/measure_diffusion_lora.py`: CPU,
/// FakeTensorMode + MemTracker, iteration 3, AdamW foreach over the adapters).
#[test]
fn lora_steps_match_measured_within_2_percent() {
    use vramcalc_core::config::{Device, OptimizerKind};
    use vramcalc_core::diffusion::train::lora_step;
    use vramcalc_core::diffusion::Pass;
    use vramcalc_core::finetune::{FineTune, Method, NameList};
    let mut bad = Vec::new();
    let mut n = 0;
    for line in include_str!("data/diffusion_lora.jsonl").lines().filter(|l| !l.trim().is_empty()) {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let c = Component::from_config(r["config"].as_object().unwrap()).unwrap();
        let get = |k: &str| r[k].as_u64().unwrap_or(1);
        let pass = Pass::Denoise { width: get("width"), height: get("height"), frames: get("frames"), text_len: get("text_len") };
        let ft = FineTune { method: Method::Lora, lora_r: get("lora_r") as u32, lora_targets: NameList::parse("to_q,to_k,to_v,to_out.0").unwrap(), ..FineTune::default() };
        let prec = vramcalc_core::Precision::parse(r["dtype"].as_str().unwrap()).unwrap();
        let ck = r["checkpointing"].as_bool().unwrap();
        let s = lora_step(&c, pass, prec, Device::Cpu, get("batch"), ft, ck, OptimizerKind::Adamw).unwrap();
        let want = get("peak_bytes");
        let err = s.peak as f64 / want as f64 - 1.0;
        let label = format!("{} {}x{}x{} b{} r{} ckpt {ck}", r["name"], get("width"), get("height"), get("frames"), get("batch"), get("lora_r"));
        println!("{label:<36} measured {want:>11} estimated {:>11} {:+.2}%  trainable {} / {}", s.peak, err * 100.0, s.trainable, get("trainable"));
        if s.trainable != get("trainable") || s.params != get("params") {
            bad.push(format!("{label}: trainable {} != {} or params {} != {}", s.trainable, get("trainable"), s.params, get("params")));
        }
        // the issue asks 3 % of a LoRA step; every record is held to 2 %
        let tolerance = 0.02;
        if err.abs() > tolerance {
            bad.push(format!("{label}: {:+.2}% (tolerance {:.0}%)", err * 100.0, tolerance * 100.0));
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} records");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// LoRA steps as kohya-ss/sd-scripts' `train_network.py` runs them (`tools/measure_kohya_lora.py`:
/// its `LoRAModule` on every Linear / 1×1 conv of diffusers' `Transformer2DModel`s, bf16 base
/// under CPU autocast, latents requiring grad, fp32 or `--full_bf16` network; CPU,
/// FakeTensorMode + MemTracker, iteration 3, AdamW). Records with `text_encoders` train kohya's
/// text-encoder LoRA too (the CLIP encoders inside the step), with `fp8_base` on fp8 weights.
#[test]
fn kohya_lora_steps_match_measured_within_3_percent() {
    use vramcalc_core::config::{Device, OptimizerKind, Precision};
    use vramcalc_core::diffusion::kohya::{kohya_step_with, Fp8Base, KohyaSettings};
    use vramcalc_core::diffusion::Pass;
    let mut bad = Vec::new();
    let (mut n, mut te, mut fp8s) = (0, 0, 0);
    for line in include_str!("data/diffusion_kohya.jsonl").lines().filter(|l| !l.trim().is_empty()) {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let c = Component::from_config(r["config"].as_object().unwrap()).unwrap();
        let get = |k: &str| r[k].as_u64().unwrap_or(1);
        let pass = Pass::Denoise { width: get("width"), height: get("height"), frames: 1, text_len: get("text_len") };
        let (ck, full) = (r["checkpointing"].as_bool().unwrap(), r["full_bf16"].as_bool().unwrap());
        let ks = KohyaSettings { mixed_precision: Precision::AmpBf16, full_half: full, network_dim: get("lora_r") as u32, checkpointing: ck, sd1_port: r["unet_port"] == "kohya-sd1", conv_dim: r["conv_dim"].as_u64().unwrap_or(0) as u32, optimizer: OptimizerKind::Adamw };
        // kohya's text-encoder LoRA (no --network_train_unet_only): the encoders' configs
        let tes: Vec<Component> = r["text_encoders"].as_array().map_or(Vec::new(), |a| a.iter().map(|t| Component::from_config(t.as_object().unwrap()).unwrap()).collect());
        let refs: Vec<&Component> = tes.iter().collect();
        // --fp8_base (records with "fp8_base": the UNet and the encoders but their embeddings)
        let fp8 = if r["fp8_base"].as_bool().unwrap_or(false) { Fp8Base::All } else { Fp8Base::Off };
        let s = kohya_step_with(&c, &refs, fp8, pass, ks, Device::Cpu, get("batch")).unwrap();
        let want = get("peak_bytes");
        let err = s.peak as f64 / want as f64 - 1.0;
        let port = if ks.sd1_port { " sd1-port" } else { "" };
        let port = if tes.is_empty() { port.to_string() } else { format!("{port} te-lora") };
        let port = if fp8 == Fp8Base::All { format!("{port} fp8-base") } else { port };
        te += usize::from(!tes.is_empty());
        fp8s += usize::from(fp8 == Fp8Base::All);
        let label = format!("{}{port} conv_dim {} {}x{} b{} r{} ckpt {ck} full_bf16 {full}", r["name"], ks.conv_dim, get("width"), get("height"), get("batch"), get("lora_r"));
        println!("{label:<44} measured {want:>11} estimated {:>11} {:+.2}%  trainable {} / {}", s.peak, err * 100.0, s.trainable, get("trainable"));
        if s.trainable != get("trainable") || s.params != get("params") {
            bad.push(format!("{label}: trainable {} != {} or params {} != {}", s.trainable, get("trainable"), s.params, get("params")));
        }
        if err.abs() > 0.03 {
            bad.push(format!("{label}: {:+.2}% (tolerance 3%)", err * 100.0));
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} records");
    assert!(te >= 6 && fp8s >= 3, "{te} text-encoder LoRA and {fp8s} fp8 records");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Whole tiny pipelines' GPU peaks per offload mode (SD, SDXL, Flux, SD3, Wan 2.1; SD3 and Wan
/// also with `--vae-tiling 64`), measured end to end by
/// `tools/measure_pipeline_offload.py` (diffusers' and accelerate's real offload hooks moving
/// modules onto a fake CUDA device under FakeTensorMode; allocated bytes, no caching allocator).
#[test]
fn pipeline_peaks_per_offload_mode_match_measured_within_3_percent() {
    use vramcalc_core::config::Device;
    use vramcalc_core::diffusion::{Offload, PipelineSettings, PipelineSpec, WeightDType};
    // each tiny pipeline's `model_index.json` and its components' `config.json`, as the tool wrote them
    macro_rules! pipeline {
        ($name:literal: $($c:literal),+) => {
            ($name, include_str!(concat!("data/diffusion_pipeline/", $name, "/model_index.json")),
             &[$(($c, include_str!(concat!("data/diffusion_pipeline/", $name, "/", $c, "/config.json")))),+][..])
        };
    }
    let files: &[(&str, &str, &[(&str, &str)])] = &[
        pipeline!("tiny-sd": "text_encoder", "unet", "vae"),
        pipeline!("tiny-sdxl": "text_encoder", "text_encoder_2", "unet", "vae"),
        pipeline!("tiny-flux": "text_encoder", "text_encoder_2", "transformer", "vae"),
        pipeline!("tiny-sd3": "text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae"),
        pipeline!("tiny-wan": "text_encoder", "transformer", "vae"),
        pipeline!("tiny-sd3-t5": "text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae"),
    ];
    let mut bad = Vec::new();
    let (mut n, mut tiled) = (0, 0);
    for line in include_str!("data/diffusion_pipeline.jsonl").lines().filter(|l| !l.trim().is_empty()) {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let name = r["name"].as_str().unwrap();
        let (_, index, comps) = files.iter().find(|f| f.0 == name).unwrap_or_else(|| panic!("no files for {name}"));
        let spec = PipelineSpec::from_model_index(index, |c| comps.iter().find(|x| x.0 == c).map(|x| x.1.to_string())).unwrap();
        let s = PipelineSettings {
            width: r["width"].as_u64(),
            height: r["height"].as_u64(),
            frames: r["frames"].as_u64(),
            vae_tiling: r["tiling"].as_u64(),
            offload: Offload::parse(r["mode"].as_str().unwrap()).unwrap(),
            dtype: Some(WeightDType::parse(r["dtype"].as_str().unwrap()).unwrap()),
            text_len: r["text_len"].as_u64(),
            device: Device::Cpu,
            ..Default::default()
        };
        let e = spec.estimate(&s).unwrap();
        let want = r["peak_bytes"].as_u64().unwrap();
        let err = e.peak_bytes as f64 / want as f64 - 1.0;
        let stages: Vec<String> = e.stages.iter().map(|st| format!("{}={} (w {} a {})", st.component, st.peak, st.gpu_weights, st.activations)).collect();
        let label = format!("{name} {}x{}x{} {} {}{}", s.width.unwrap(), s.height.unwrap(), e.frames, r["dtype"].as_str().unwrap(), s.offload.name(), s.vae_tiling.map(|t| format!(" tiles {t}")).unwrap_or_default());
        println!("{label:<28} measured {want:>10} estimated {:>10} {:+.2}%  est {} measured {}", e.peak_bytes, err * 100.0, stages.join(" "), r["stages"]);
        if err.abs() > 0.03 {
            bad.push(format!("{label}: {:+.2}%", err * 100.0));
        }
        // the CPU RAM the offloaded weights take (the stand-in's `cpu` storages once offloaded)
        let cpu = r["cpu_bytes_before_call"].as_u64().unwrap();
        if s.offload != Offload::None && (e.cpu_ram_bytes as f64 / cpu as f64 - 1.0).abs() > 0.03 {
            bad.push(format!("{label} CPU RAM: {} vs {cpu}", e.cpu_ram_bytes));
        }
        // the denoising loop's peak too (a tiny Flux peaks in its VAE decode)
        let denoise = e.stages.iter().find(|st| st.name == "denoise").unwrap();
        let want = r["stages"][&denoise.component].as_u64().unwrap();
        let derr = denoise.peak as f64 / want as f64 - 1.0;
        if derr.abs() > 0.03 {
            bad.push(format!("{label} denoise: {:+.2}% ({} vs {want})", derr * 100.0, denoise.peak));
        }
        // and the decode stage's (tiled with `tiling`: `pipe.vae.enable_tiling()` inside the pipeline)
        let decode = e.stages.iter().find(|st| st.name == "decode").unwrap();
        let want = r["stages"][&decode.component].as_u64().unwrap();
        let derr = decode.peak as f64 / want as f64 - 1.0;
        if derr.abs() > 0.03 {
            bad.push(format!("{label} decode: {:+.2}% ({} vs {want})", derr * 100.0, decode.peak));
        }
        // and every stage that reaches half the pipeline's peak (with model offload, SD3's
        // encoders beside the T5 still on the GPU: `tiny-sd3-t5`)
        for st in &e.stages {
            let want = r["stages"][&st.component].as_u64().unwrap();
            let serr = st.peak as f64 / want as f64 - 1.0;
            if 2 * want >= r["peak_bytes"].as_u64().unwrap() && serr.abs() > 0.03 {
                bad.push(format!("{label} {}: {:+.2}% ({} vs {want})", st.name, serr * 100.0, st.peak));
            }
        }
        tiled += usize::from(s.vae_tiling.is_some());
        n += 1;
    }
    assert!(n >= 72 && tiled >= 4, "only {n} records, {tiled} tiled");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
