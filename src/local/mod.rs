//! The llama.cpp panel's logic (issue 24), pure and tested natively: which settings it shows
//! ([`fields`]) and what a field's text sets ([`with`]), the GPUs from them (the settings hold the core's `Params` itself),
//! and the answer ([`answer`]: every device's buffers from `vramcalc_core::llama_cpp::estimate`,
//! the largest context and the most GPU layers from `llama_cpp::fit`, the command line). The
//! header comes from a file (`read`, `fetch`) or, without one, from a built-in model's
//! `config.json` typed as `llama-quantize` types it ([`synth`]). `components::local` draws it.

pub mod fetch;
pub mod hub;
pub mod link;
pub mod read;

use crate::form::{flag, named, whole, Field};
use crate::state::local::{GgufSource, LocalSettings};
use vramcalc_core::gguf::{GgmlType, Header};
use vramcalc_core::llama_cpp::{fit, Estimate, FlashAttn, GpuDevice, Hparams, KV_CACHE_TYPES};
use vramcalc_core::{presets, GPUS};

/// The `llama-quantize` names offered without a file (each a recipe of `synth::recipe`).
pub const QUANTS: &[&str] = &["Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_0", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "Q8_0", "F16"];

/// Built-in models whose `config.json` the core can type without a file (llama, mistral,
/// qwen2, qwen3, qwen3_moe).
pub fn quant_models() -> Vec<&'static str> {
    presets::PRESETS.iter().map(|p| p.id).filter(|id| presets::hf_config(id).is_some_and(|c| synth_config(c, "Q8_0").is_ok())).collect()
}

fn synth_config(config: &str, quant: &str) -> Result<Header, String> {
    let json: serde_json::Value = serde_json::from_str(config).map_err(|e| format!("config.json: {e}"))?;
    let recipe = vramcalc_core::llama_cpp::synth::recipe(quant).ok_or_else(|| format!("{quant}: not a llama-quantize type ({})", QUANTS.join(", ")))?;
    vramcalc_core::llama_cpp::synth::header_from_config(&json, recipe).map_err(|e| e.to_string())
}

/// The header of built-in model `model` quantized as `quant`, without a file.
pub fn synth(model: &str, quant: &str) -> Result<Header, String> {
    let config = presets::hf_config(model).ok_or_else(|| format!("{model}: no config.json for this model"))?;
    synth_config(config, quant)
}

fn fa_name(f: FlashAttn) -> &'static str {
    match f {
        FlashAttn::On => "on",
        FlashAttn::Off => "off",
        FlashAttn::Auto => "auto",
    }
}

/// What the model's header says the fields depend on: MoE (`--n-cpu-moe`), sliding windows
/// (`--swa-full`), its layers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelTraits {
    pub n_layer: u32,
    pub moe: bool,
    pub swa: bool,
    pub n_ctx_train: u64,
}

impl ModelTraits {
    pub fn of(h: &Header) -> Option<ModelTraits> {
        let hp = Hparams::from_header(h).ok()?;
        Some(ModelTraits { n_layer: hp.n_layer, moe: hp.n_expert > 0, swa: hp.any_swa(), n_ctx_train: hp.n_ctx_train })
    }
}

/// The settings' fields, in llama.cpp's own flag names (`ids` are the flags without dashes).
pub fn fields(s: &LocalSettings, m: ModelTraits) -> Vec<Field> {
    let kv = named(KV_CACHE_TYPES.iter().map(|t| t.name));
    let mut gpus = vec![("none".to_string(), "CPU only".to_string())];
    gpus.extend(GPUS.iter().map(|g| (g.id.to_string(), g.name.to_string())));
    let mut out = vec![
        Field::number("c", s.params.n_ctx),
        Field::number("np", s.params.n_parallel),
        Field::select("ctk", kv.clone(), s.params.type_k.name),
        Field::select("ctv", kv, s.params.type_v.name),
        Field::select("fa", named(["auto", "on", "off"]), fa_name(s.params.flash_attn)),
        Field::text("ngl", s.params.n_gpu_layers.map_or("all".to_string(), |n| n.to_string())),
    ];
    if m.moe {
        out.push(Field::number("n-cpu-moe", s.params.n_cpu_moe));
    }
    out.extend([Field::number("ub", s.params.n_ubatch), Field::number("b", s.params.n_batch), Field::check("kv-unified", s.params.kv_unified)]);
    if m.swa {
        out.push(Field::check("swa-full", s.params.swa_full));
    }
    out.extend([
        Field::check("no-mmap", !s.params.mmap),
        Field::select("gpu", gpus, s.gpu.clone().unwrap_or_else(|| "none".into())),
        Field::number("gpus", s.n_gpus),
        Field::text("ram", s.host_ram.map_or(String::new(), |b| format!("{}", b as f64 / (1u64 << 30) as f64))),
    ]);
    out
}

/// The settings with field `id` set from `text`, or why the text is not a value.
pub fn with(s: &LocalSettings, id: &str, text: &str) -> Result<LocalSettings, String> {
    let mut s = s.clone();
    let kv = |t: &str| KV_CACHE_TYPES.iter().copied().find(|k| k.name == t).ok_or_else(|| format!("{t}: not a KV cache type"));
    match id {
        "c" => s.params.n_ctx = whole(text, 0, 1 << 24)?,
        "np" => s.params.n_parallel = whole(text, 1, 256)?,
        "ctk" => s.params.type_k = kv(text)?,
        "ctv" => s.params.type_v = kv(text)?,
        "fa" => {
            s.params.flash_attn = match text {
                "on" => FlashAttn::On,
                "off" => FlashAttn::Off,
                "auto" => FlashAttn::Auto,
                _ => return Err("expected on, off or auto".into()),
            }
        }
        "ngl" => {
            s.params.n_gpu_layers = match text.trim() {
                "" | "all" | "auto" | "-1" => None,
                t => Some(whole(t, 0, 10_000).map_err(|_| "expected a number of layers, or all".to_string())?),
            }
        }
        "n-cpu-moe" => s.params.n_cpu_moe = whole(text, 0, 10_000)?,
        "ub" => s.params.n_ubatch = whole(text, 1, 1 << 16)?,
        "b" => s.params.n_batch = whole(text, 1, 1 << 20)?,
        "kv-unified" => s.params.kv_unified = flag(text),
        "swa-full" => s.params.swa_full = flag(text),
        "no-mmap" => s.params.mmap = !flag(text),
        "gpu" => s.gpu = if text == "none" { None } else { Some(vramcalc_core::memory::device::gpu(text).ok_or_else(|| format!("{text}: unknown GPU"))?.id.to_string()) },
        "gpus" => s.n_gpus = whole(text, 1, 16)?,
        "ram" => {
            s.host_ram = match text.trim() {
                "" => None,
                t => Some(crate::capacity::parse_capacity(t).ok_or_else(|| "expected a size such as 64 (GiB) or 64GiB".to_string())?),
            }
        }
        _ => return Err(format!("{id}: no such setting")),
    }
    Ok(s)
}


/// The GPUs: `n_gpus` of the chosen card, or none.
pub fn gpus(s: &LocalSettings) -> Vec<GpuDevice> {
    let Some(g) = s.gpu.as_deref().and_then(vramcalc_core::memory::device::gpu) else { return Vec::new() };
    (0..s.n_gpus).map(|_| GpuDevice { name: g.id.to_string(), capacity: g.bytes }).collect()
}

/// The model's file name in the command line.
pub fn model_path(src: &GgufSource) -> String {
    match src {
        GgufSource::File { name, .. } => name.clone(),
        GgufSource::Hub(f) => f.path.rsplit('/').next().unwrap_or(&f.path).to_string(),
        GgufSource::Quant { model, quant } => format!("{model}-{quant}.gguf"),
    }
}

/// The answer for one header and settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub estimate: Estimate,
    /// The largest `-c` at which every device fits (up to the training context); `None` when
    /// not even 256 does, or when there is nothing to fit (no GPU and no RAM given).
    pub max_ctx: Option<u64>,
    /// The most layers on the GPUs (of `n_layer + 1`) and the host memory the rest then takes.
    pub max_ngl: Option<(u64, u64)>,
    /// Whether the reverse answers were asked (a GPU or the RAM is given).
    pub reverse: bool,
    pub command: String,
    pub tensor_bytes: u64,
    pub n_tensors: usize,
}

pub fn answer(h: &Header, s: &LocalSettings, src: &GgufSource) -> Result<Answer, String> {
    let p = &s.params;
    let g = gpus(s);
    let e = vramcalc_core::llama_cpp::estimate(h, p, &g, s.host_ram).map_err(|e| e.to_string())?;
    let reverse = !g.is_empty() || s.host_ram.is_some();
    let (max_ctx, max_ngl) = if reverse {
        let limit = Hparams::from_header(h).map_err(|e| e.to_string())?.n_ctx_train.max(p.n_ctx);
        let ctx = fit::max_context(h, p, &g, s.host_ram, limit).map_err(|e| e.to_string())?;
        let ngl = if g.is_empty() { None } else { fit::max_gpu_layers(h, p, &g, s.host_ram).map_err(|e| e.to_string())?.map(|(n, e)| (n, e.devices[0].total())) };
        (ctx, ngl)
    } else {
        (None, None)
    };
    let command = fit::server_command(&model_path(src), p, e.n_layer);
    Ok(Answer { max_ctx, max_ngl, reverse, command, tensor_bytes: h.tensor_bytes(), n_tensors: h.tensors.len(), estimate: e })
}

/// llama.cpp's type names of the weights, most bytes first (`Q8_0 96%, F32 4%`).
pub fn weight_types(h: &Header) -> Vec<(GgmlType, u64)> {
    let mut by: Vec<(GgmlType, u64)> = Vec::new();
    for t in &h.tensors {
        match by.iter_mut().find(|x| x.0 == t.ggml_type) {
            Some(x) => x.1 += t.n_bytes(),
            None => by.push((t.ggml_type, t.n_bytes())),
        }
    }
    by.sort_by_key(|b| std::cmp::Reverse(b.1));
    by
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::llama_cpp::Params;
    use crate::state::local::HubFile;

    const TINY: &[u8] = include_bytes!("../../tests/data/gguf/tiny-qwen3moe-Q8_0.gguf");

    fn tiny() -> Header {
        Header::parse(TINY).unwrap()
    }

    fn src() -> GgufSource {
        GgufSource::Hub(HubFile { repo: "test/tiny".into(), revision: "main".into(), path: "tiny.gguf".into() })
    }

    #[test]
    fn every_field_reads_back_what_it_shows() {
        let s = LocalSettings { params: Params { n_cpu_moe: 2, swa_full: true, n_gpu_layers: Some(3), ..Params::default() }, host_ram: Some(32 << 30), ..LocalSettings::default() };
        let m = ModelTraits { n_layer: 4, moe: true, swa: true, n_ctx_train: 4096 };
        let fs = fields(&s, m);
        assert!(fs.iter().any(|f| f.id == "n-cpu-moe") && fs.iter().any(|f| f.id == "swa-full"));
        for f in &fs {
            assert_eq!(with(&s, f.id, &f.value).as_ref(), Ok(&s), "{}", f.id);
        }
        let plain = fields(&s, ModelTraits::default());
        assert!(!plain.iter().any(|f| f.id == "n-cpu-moe" || f.id == "swa-full"));
    }

    #[test]
    fn field_texts_set_llama_cpp_settings_or_say_why_not() {
        let s = LocalSettings::default();
        assert_eq!(with(&s, "ctk", "q8_0").unwrap().params.type_k, GgmlType::Q8_0);
        assert_eq!(with(&s, "ngl", "20").unwrap().params.n_gpu_layers, Some(20));
        assert_eq!(with(&s, "ngl", "all").unwrap().params.n_gpu_layers, None);
        assert_eq!(with(&s, "gpu", "none").unwrap().gpu, None);
        assert_eq!(with(&s, "ram", "16").unwrap().host_ram, Some(16 << 30));
        assert_eq!(with(&s, "ram", "").unwrap().host_ram, None);
        assert!(with(&s, "ctk", "q4_k").is_err(), "llama.cpp's -ctk takes no k-quants");
        assert!(with(&s, "np", "0").is_err());
        assert!(with(&s, "ngl", "many").is_err());
        assert!(with(&s, "gpu", "rtx-9999").is_err());
        assert!(with(&s, "nope", "1").is_err());
    }

    #[test]
    fn the_answer_is_the_cores_estimate_with_its_reverse_answers() {
        let h = tiny();
        let s = LocalSettings { params: Params { n_ctx: 8192, type_k: GgmlType::Q8_0, type_v: GgmlType::Q8_0, ..Params::default() }, ..LocalSettings::default() };
        let a = answer(&h, &s, &src()).unwrap();
        let e = vramcalc_core::llama_cpp::estimate(&h, &s.params, &gpus(&s), s.host_ram).unwrap();
        assert_eq!(a.estimate, e);
        assert_eq!(a.estimate.devices.len(), 2, "the host and one GPU");
        assert!(a.estimate.fits());
        assert_eq!(a.max_ctx, Some(32768), "a tiny model fits its whole training context");
        assert_eq!(a.max_ngl.map(|x| x.0), Some(5), "4 layers and the output layer");
        assert!(a.command.starts_with("llama-server -m tiny.gguf -c 8192 -ngl all -fa auto -ctk q8_0 -ctv q8_0"), "{}", a.command);
        // the KV cache follows -c and -ctk/-ctv as the core says
        let f16 = answer(&h, &LocalSettings { params: Params { n_ctx: 8192, ..Params::default() }, ..LocalSettings::default() }, &src()).unwrap();
        assert!(f16.estimate.kv_bytes() > a.estimate.kv_bytes());
        // CPU only with no RAM given: nothing to fit, no reverse answers
        let cpu = answer(&h, &LocalSettings { gpu: None, host_ram: None, ..LocalSettings::default() }, &src()).unwrap();
        assert!(!cpu.reverse && cpu.max_ctx.is_none() && cpu.estimate.devices.len() == 1);
    }

    #[test]
    fn experts_on_the_cpu_move_bytes_to_the_host() {
        let h = tiny();
        let on_gpu = answer(&h, &LocalSettings::default(), &src()).unwrap().estimate;
        let moe = answer(&h, &LocalSettings { params: Params { n_cpu_moe: 4, ..Params::default() }, ..LocalSettings::default() }, &src()).unwrap().estimate;
        assert!(moe.devices[0].model > on_gpu.devices[0].model);
        assert!(moe.devices[1].model < on_gpu.devices[1].model);
    }

    #[test]
    fn a_model_and_a_quant_give_a_header_without_a_file() {
        let models = quant_models();
        assert!(models.contains(&"qwen3-8b") && models.contains(&"llama-3.1-8b") && models.contains(&"qwen3-30b-a3b"), "{models:?}");
        assert!(!models.contains(&"resnet50") && !models.contains(&"gemma-2-9b"));
        for q in QUANTS {
            assert!(synth("qwen3-8b", q).is_ok(), "{q}");
        }
        let q4 = synth("qwen3-8b", "Q4_K_M").unwrap();
        let q8 = synth("qwen3-8b", "Q8_0").unwrap();
        assert!(q4.tensor_bytes() < q8.tensor_bytes());
        assert!(weight_types(&q4).iter().any(|t| t.0 == GgmlType::Q4_K));
        assert!(synth("qwen3-8b", "Q9_X").unwrap_err().contains("not a llama-quantize type"));
        assert!(synth("resnet50", "Q4_K_M").is_err());
    }
}
