//! LM Studio as llama.cpp with LM Studio's defaults and names. LM Studio's engine is closed
//! source; its load settings, their defaults and their names are read from its SDK,
//! lmstudio-ai/lmstudio-js `packages/lms-kv-config/src/schema.ts` (commit ce511216, the `llm.load`
//! scope): `contextLength` 2048 (machine dependent: the app may pick another), `llama.acceleration.offloadRatio`
//! `max`, `llama.evalBatchSize` 512, `llama.flashAttention` false, `llama.k/vCacheQuantizationType`
//! f16, `llama.tryMmap` true. Its CLI (`lms load`, lmstudio.ai/docs/cli/load) takes
//! `--context-length N` and `--gpu max|off|0-1`; the other settings are the app's load settings.
//! How LM Studio turns an offload ratio into layers is not published: the ratio written here is
//! the layers on the GPU over the model's layers (modelled).

use vramcalc_core::gguf::GgmlType;
use vramcalc_core::llama_cpp::{FlashAttn, Params};

/// The llama.cpp settings LM Studio loads a model with by default.
pub fn defaults() -> Params {
    Params { n_ctx: 2048, n_batch: 512, flash_attn: FlashAttn::Off, type_k: GgmlType::F16, type_v: GgmlType::F16, ..Params::default() }
}

/// The `lms load` line for these settings, and the load settings it cannot carry (LM Studio's
/// names, those that differ from its defaults).
pub fn command(model: &str, p: &Params, n_layer: u32) -> (String, Vec<String>) {
    let gpu = match p.n_gpu_layers {
        None => "max".to_string(),
        Some(0) => "off".to_string(),
        Some(n) if n > u64::from(n_layer) => "max".to_string(),
        Some(n) => format!("{:.3}", n as f64 / f64::from(n_layer.max(1))),
    };
    let line = format!("lms load {model} --context-length {} --gpu {gpu}", p.n_ctx);
    let d = defaults();
    let mut rest = Vec::new();
    if p.flash_attn != d.flash_attn {
        rest.push(format!("Flash Attention: {}", if p.flash_attn_on() { "on" } else { "off" }));
    }
    if p.type_k != d.type_k {
        rest.push(format!("K Cache Quantization Type: {}", p.type_k.name));
    }
    if p.type_v != d.type_v {
        rest.push(format!("V Cache Quantization Type: {}", p.type_v.name));
    }
    if p.n_batch != d.n_batch {
        rest.push(format!("Evaluation Batch Size: {}", p.n_batch));
    }
    if !p.mmap {
        rest.push("Try mmap(): off".to_string());
    }
    (line, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lms_line_and_the_load_settings_it_cannot_carry() {
        let d = defaults();
        assert_eq!(command("qwen3-8b", &d, 36), ("lms load qwen3-8b --context-length 2048 --gpu max".to_string(), vec![]));
        let p = Params { n_gpu_layers: Some(18), n_ctx: 8192, flash_attn: FlashAttn::On, type_k: GgmlType::Q8_0, ..d.clone() };
        let (line, rest) = command("m", &p, 36);
        assert_eq!(line, "lms load m --context-length 8192 --gpu 0.500");
        assert_eq!(rest, ["Flash Attention: on", "K Cache Quantization Type: q8_0"]);
        assert!(command("m", &Params { n_gpu_layers: Some(0), ..d }, 36).0.ends_with("--gpu off"));
    }
}
