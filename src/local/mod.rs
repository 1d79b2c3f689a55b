//! The llama.cpp panel's logic (issue 24), pure and tested natively: which settings it shows
//! ([`fields`]) and what a field's text sets ([`with`]), the GPUs from them (the settings hold the core's `Params` itself),
//! and the answer ([`answer`]: every device's buffers from `vramcalc_core::llama_cpp::estimate`,
//! the largest context and the most GPU layers from `llama_cpp::fit`, the command line). The
//! header comes from a file (`read`, `fetch`) or, without one, from a built-in model's
//! `config.json` typed as `llama-quantize` types it ([`synth`]). `components::local` draws it.

pub mod fetch;
pub mod hub;
pub mod link;
pub mod lmstudio;
pub mod read;

use crate::form::{flag, named, whole, Field};
use crate::state::local::{GgufSource, LocalEngine, LocalSettings};
use vramcalc_core::gguf::{GgmlType, Header};
use vramcalc_core::llama_cpp::{fit, flags, Estimate, FlashAttn, GpuDevice, Hparams, Params, SplitMode, FFN_EXPS_REGEX, KV_CACHE_TYPES};
use vramcalc_core::presets;

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

    /// Every field shows (share links list them all).
    pub const ALL: ModelTraits = ModelTraits { n_layer: 0, moe: true, swa: true, n_ctx_train: 0 };
}

/// `-ot` presets a MoE model offers: `(id, the -ot text)`. The experts' pattern is llama.cpp's
/// own `LLM_FFN_EXPS_REGEX` (what `--cpu-moe` sets, `common/arg.cpp`).
pub fn ot_presets() -> [(&'static str, String); 3] {
    [("experts-cpu", format!("{FFN_EXPS_REGEX}=CPU")), ("up-down-cpu", r"\.ffn_(up|down)_exps=CPU".to_string()), ("none", String::new())]
}

/// Ollama's `OLLAMA_KV_CACHE_TYPE` values (`envconfig/config.go`, `llama/llama.go` `kvCacheTypeFromStr`).
const OLLAMA_KV: [&str; 3] = ["f16", "q8_0", "q4_0"];

fn opt(v: Option<u64>) -> String {
    v.map_or(String::new(), |n| n.to_string())
}

/// Every field of the settings, whatever the engine and model (links write them all); the
/// cards' list is `gpu` (`rtx-4090+rtx-3090`, `none`: CPU only), drawn by its own list.
pub fn all_fields(s: &LocalSettings) -> Vec<Field> {
    let p = &s.params;
    let o = &s.ollama;
    let kv = named(KV_CACHE_TYPES.iter().map(|t| t.name));
    let engines = LocalEngine::ALL.iter().map(|e| (e.id().to_string(), e.name().to_string())).collect();
    // empty: the engine's default, shown as a dash
    let unset = || vec![(String::new(), "–".to_string())];
    let mut ollama_kv = unset();
    ollama_kv.extend(named(OLLAMA_KV));
    let mut ollama_fa = unset();
    ollama_fa.extend(named(["1", "0"]));
    vec![
        Field::select("engine", engines, s.engine.id()),
        Field::number("c", p.n_ctx),
        Field::number("np", p.n_parallel),
        Field::select("ctk", kv.clone(), p.type_k.name),
        Field::select("ctv", kv, p.type_v.name),
        Field::select("fa", named(FlashAttn::ALL.map(FlashAttn::name)), p.flash_attn.name()),
        Field::text("ngl", p.n_gpu_layers.map_or("all".to_string(), |n| n.to_string())),
        Field::number("n-cpu-moe", p.n_cpu_moe),
        Field::text("ot", flags::overrides_text(&p.overrides)),
        Field::text("ts", flags::tensor_split_text(&p.tensor_split)),
        Field::select("sm", named(SplitMode::ALL.map(SplitMode::name)), p.split_mode.name()),
        Field::number("ub", p.n_ubatch),
        Field::number("b", p.n_batch),
        Field::check("kv-unified", p.kv_unified),
        Field::check("swa-full", p.swa_full),
        Field::check("no-mmap", !p.mmap),
        Field::text("num_ctx", opt(o.num_ctx)),
        Field::text("num_gpu", opt(o.num_gpu)),
        Field::text("num_batch", opt(o.num_batch)),
        Field::text("OLLAMA_NUM_PARALLEL", opt(o.num_parallel)),
        Field::select("OLLAMA_KV_CACHE_TYPE", ollama_kv, o.kv_cache_type.map_or("", |t| t.name)),
        Field::select("OLLAMA_FLASH_ATTENTION", ollama_fa, o.flash_attention.map_or("", |f| if f { "1" } else { "0" })),
        Field::text("OLLAMA_CONTEXT_LENGTH", opt(o.context_length)),
        Field::text("gpu", if s.cards.is_empty() { "none".to_string() } else { s.cards.join("+") }),
        Field::text("ram", s.host_ram.map_or(String::new(), |b| format!("{}", b as f64 / (1u64 << 30) as f64))),
    ]
}

const LMSTUDIO_IDS: [&str; 7] = ["c", "ngl", "b", "fa", "ctk", "ctv", "no-mmap"];

const OLLAMA_IDS: [&str; 7] = ["num_ctx", "num_gpu", "num_batch", "OLLAMA_NUM_PARALLEL", "OLLAMA_KV_CACHE_TYPE", "OLLAMA_FLASH_ATTENTION", "OLLAMA_CONTEXT_LENGTH"];

/// Whether field `id` applies to these settings and model (the form shows only those; `gpu` is
/// the cards' list, drawn apart).
fn applies(id: &str, s: &LocalSettings, m: ModelTraits) -> bool {
    let multi = s.cards.len() > 1;
    match id {
        "engine" | "ram" => true,
        "gpu" => false,
        _ if OLLAMA_IDS.contains(&id) => s.engine == LocalEngine::Ollama,
        _ if s.engine == LocalEngine::Ollama => false,
        // the load settings LM Studio has (`lmstudio`)
        _ if s.engine == LocalEngine::LmStudio => LMSTUDIO_IDS.contains(&id),
        "n-cpu-moe" => m.moe,
        "swa-full" => m.swa,
        "ts" | "sm" => multi,
        _ => true,
    }
}

/// The settings' fields the form shows, in llama.cpp's (or Ollama's) own names (`ids` are the
/// flags without dashes).
pub fn fields(s: &LocalSettings, m: ModelTraits) -> Vec<Field> {
    all_fields(s).into_iter().filter(|f| applies(f.id, s, m)).collect()
}

/// A number, or nothing (the engine's default) for empty text.
fn optional(text: &str, lo: u64, hi: u64) -> Result<Option<u64>, String> {
    match text.trim() {
        "" => Ok(None),
        t => whole(t, lo, hi).map(Some),
    }
}

/// The settings with field `id` set from `text`, or why the text is not a value. `gpus` (links
/// written before mixed cards: that many of the one card) is read too.
pub fn with(s: &LocalSettings, id: &str, text: &str) -> Result<LocalSettings, String> {
    let mut s = s.clone();
    let kv = |t: &str| KV_CACHE_TYPES.iter().copied().find(|k| k.name == t).ok_or_else(|| format!("{t}: not a KV cache type"));
    let p = &mut s.params;
    let o = &mut s.ollama;
    let e = |e: vramcalc_core::llama_cpp::LlamaError| e.to_string();
    match id {
        "engine" => {
            let engine = LocalEngine::ALL.into_iter().find(|e| e.id() == text).ok_or_else(|| format!("{text}: not an engine"))?;
            // llama.cpp's settings start from the defaults of the program that now runs them
            match (s.engine, engine) {
                (LocalEngine::LmStudio, LocalEngine::LlamaCpp) => *p = Params::default(),
                (e, LocalEngine::LmStudio) if e != LocalEngine::LmStudio => *p = lmstudio::defaults(),
                _ => {}
            }
            s.engine = engine;
        }
        "c" => p.n_ctx = whole(text, 0, 1 << 24)?,
        "np" => p.n_parallel = whole(text, 1, 256)?,
        "ctk" => p.type_k = kv(text)?,
        "ctv" => p.type_v = kv(text)?,
        "fa" => p.flash_attn = FlashAttn::from_name(text).map_err(e)?,
        "ngl" => {
            p.n_gpu_layers = match text.trim() {
                "" | "all" | "auto" | "-1" => None,
                t => Some(whole(t, 0, 10_000).map_err(|_| "expected a number of layers, or all".to_string())?),
            }
        }
        "n-cpu-moe" => p.n_cpu_moe = whole(text, 0, 10_000)?,
        "ot" => p.overrides = flags::parse_overrides(text).map_err(e)?,
        "ts" => p.tensor_split = flags::parse_tensor_split(text).map_err(e)?,
        "sm" => p.split_mode = SplitMode::from_name(text).map_err(e)?,
        "ub" => p.n_ubatch = whole(text, 1, 1 << 16)?,
        "b" => p.n_batch = whole(text, 1, 1 << 20)?,
        "kv-unified" => p.kv_unified = flag(text),
        "swa-full" => p.swa_full = flag(text),
        "no-mmap" => p.mmap = !flag(text),
        "num_ctx" => o.num_ctx = optional(text, 1, 1 << 24)?,
        "num_gpu" => o.num_gpu = optional(text, 0, 10_000)?,
        "num_batch" => o.num_batch = optional(text, 1, 1 << 16)?,
        "OLLAMA_NUM_PARALLEL" => o.num_parallel = optional(text, 1, 256)?,
        "OLLAMA_KV_CACHE_TYPE" => {
            o.kv_cache_type = match text {
                "" => None,
                t if OLLAMA_KV.contains(&t) => GgmlType::from_name(t),
                t => return Err(format!("{t}: Ollama takes f16, q8_0 or q4_0")),
            }
        }
        "OLLAMA_FLASH_ATTENTION" => {
            o.flash_attention = match text {
                "" => None,
                "1" | "true" => Some(true),
                "0" | "false" => Some(false),
                _ => return Err("expected 1 or 0".into()),
            }
        }
        "OLLAMA_CONTEXT_LENGTH" => o.context_length = optional(text, 1, 1 << 24)?,
        "gpu" => {
            s.cards = match text.trim() {
                "none" | "" => Vec::new(),
                t => t.split('+').map(|id| card(id.trim())).collect::<Result<_, _>>()?,
            }
        }
        "gpus" => {
            let n = whole(text, 1, 16)? as usize;
            if let Some(last) = s.cards.last().cloned() {
                s.cards.resize(n, last);
            }
        }
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

/// A card's `GPUS` id, checked.
pub fn card(id: &str) -> Result<String, String> {
    Ok(vramcalc_core::memory::device::gpu(id).ok_or_else(|| format!("{id}: unknown GPU"))?.id.to_string())
}

/// The settings without card `i`: its `-ts` share goes with it, and one card left needs none.
pub fn without_card(s: &LocalSettings, i: usize) -> LocalSettings {
    let mut s = s.clone();
    if i < s.cards.len() {
        s.cards.remove(i);
        if i < s.params.tensor_split.len() {
            s.params.tensor_split.remove(i);
        }
        if s.cards.len() < 2 {
            s.params.tensor_split.clear();
        }
    }
    s
}

/// The most cards the list takes.
pub const MAX_CARDS: usize = 16;

/// The GPUs, one per card.
pub fn gpus(s: &LocalSettings) -> Vec<GpuDevice> {
    s.cards.iter().filter_map(|id| vramcalc_core::memory::device::gpu(id)).map(|g| GpuDevice { name: g.id.to_string(), capacity: g.bytes }).collect()
}

/// The model's file name in the command line.
pub fn model_path(src: &GgufSource) -> String {
    match src {
        GgufSource::File { name, .. } => name.clone(),
        GgufSource::Hub(f) => f.path.rsplit('/').next().unwrap_or(&f.path).to_string(),
        GgufSource::Quant { model, quant } => format!("{model}-{quant}.gguf"),
    }
}

/// The answer for one header and settings (computed in the app's worker: `crate::worker::llama`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Answer {
    pub estimate: Estimate,
    /// The largest `-c` at which every device fits (up to the training context); `None` when
    /// not even 256 does, or when there is nothing to fit (no GPU and no RAM given).
    pub max_ctx: Option<u64>,
    /// The most layers on the GPUs (of `n_layer + 1`) and the host memory the rest then takes.
    pub max_ngl: Option<(u64, u64)>,
    /// Whether the reverse answers were asked (a GPU or the RAM is given).
    pub reverse: bool,
    /// The `llama-server` line (under Ollama: the one Ollama launches).
    pub command: String,
    /// Under LM Studio: the `lms load` line and the load settings it cannot carry.
    pub lms: Option<(String, Vec<String>)>,
    /// Under Ollama: the Modelfile (with the `ollama serve` environment as its first comment),
    /// and `(num_ctx, OLLAMA_NUM_PARALLEL)` of the run.
    pub ollama: Option<(String, u64, u64)>,
    pub tensor_bytes: u64,
    pub n_tensors: usize,
}

/// The llama.cpp run the settings launch on these GPUs: llama.cpp's own flags, or Ollama's
/// launch of `llama-server` (`Ollama::params`; with `num_gpu` unset, the most layers that fit,
/// as `vramcalc ollama` answers).
pub fn run_params(h: &Header, s: &LocalSettings, g: &[GpuDevice]) -> Result<Params, String> {
    match s.engine {
        LocalEngine::LlamaCpp | LocalEngine::LmStudio => Ok(s.params.clone()),
        LocalEngine::Ollama => {
            let vram = g.iter().map(|d| d.capacity).sum();
            let hp = Hparams::from_header(h).map_err(|e| e.to_string())?;
            let mut p = s.ollama.params(vram, hp.n_ctx_train);
            if p.n_gpu_layers.is_none() && !g.is_empty() {
                p.n_gpu_layers = Some(fit::max_gpu_layers(h, &p, g, s.host_ram).map_err(|e| e.to_string())?.map_or(0, |(n, _)| n));
            }
            Ok(p)
        }
    }
}

pub fn answer(h: &Header, s: &LocalSettings, src: &GgufSource) -> Result<Answer, String> {
    let g = gpus(s);
    let p = &run_params(h, s, &g)?;
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
    let ollama = (s.engine == LocalEngine::Ollama).then(|| {
        let num_ctx = p.n_ctx / p.n_parallel.max(1);
        (vramcalc_core::launch::modelfile::modelfile(&format!("./{}", model_path(src)), &s.ollama, num_ctx, s.ollama.num_gpu), num_ctx, p.n_parallel)
    });
    let lms = (s.engine == LocalEngine::LmStudio).then(|| lmstudio::command(&model_path(src), p, e.n_layer));
    Ok(Answer { max_ctx, max_ngl, reverse, command, ollama, lms, tensor_bytes: h.tensor_bytes(), n_tensors: h.tensors.len(), estimate: e })
}

/// Whether built-in model `model` as `llama-quantize` type `quant` fits every device with these
/// settings (`None`: it could not be sized).
pub fn quant_fit(model: &str, quant: &str, s: &LocalSettings) -> Option<bool> {
    let g = gpus(s);
    let h = synth(model, quant).ok()?;
    let p = run_params(&h, s, &g).ok()?;
    vramcalc_core::llama_cpp::estimate(&h, &p, &g, s.host_ram).ok().map(|e| e.fits())
}

/// [`quant_fit`] of every type in [`QUANTS`].
pub fn quant_fits(model: &str, s: &LocalSettings) -> Vec<(&'static str, Option<bool>)> {
    QUANTS.iter().map(|q| (*q, quant_fit(model, q, s))).collect()
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
        // every field of every engine reads back too, and each shows only under its engine
        let multi = LocalSettings {
            engine: LocalEngine::Ollama,
            ollama: vramcalc_core::llama_cpp::ollama::Ollama { num_ctx: Some(8192), kv_cache_type: Some(GgmlType::Q4_0), flash_attention: Some(true), ..Default::default() },
            params: Params { overrides: flags::parse_overrides(r"exps=CPU,attn=CUDA1").unwrap(), tensor_split: vec![1.0, 2.0], split_mode: SplitMode::None, ..Params::default() },
            cards: vec!["rtx-4090".into(), "rtx-3090".into()],
            host_ram: None,
        };
        for f in all_fields(&multi) {
            assert_eq!(with(&multi, f.id, &f.value).as_ref(), Ok(&multi), "{}", f.id);
        }
        let shown: Vec<&str> = fields(&multi, m).iter().map(|f| f.id).collect();
        assert!(shown.contains(&"OLLAMA_NUM_PARALLEL") && shown.contains(&"num_ctx") && !shown.contains(&"c") && !shown.contains(&"ot"), "{shown:?}");
        let llama = LocalSettings { engine: LocalEngine::LlamaCpp, ..multi.clone() };
        let shown: Vec<&str> = fields(&llama, m).iter().map(|f| f.id).collect();
        assert!(shown.contains(&"ot") && shown.contains(&"ts") && shown.contains(&"sm") && !shown.contains(&"num_ctx") && !shown.contains(&"gpu"), "{shown:?}");
        let one = LocalSettings { cards: vec!["rtx-4090".into()], ..llama };
        assert!(!fields(&one, m).iter().any(|f| f.id == "ts" || f.id == "sm"), "-ts and -sm need two GPUs");
    }

    #[test]
    fn ot_ts_sm_and_cards_read_as_the_cli_reads_them() {
        let s = LocalSettings::default();
        let ot = with(&s, "ot", r"blk\.[0-3]\.ffn_.*_exps=CPU").unwrap().params.overrides;
        assert_eq!(ot, flags::parse_overrides(r"blk\.[0-3]\.ffn_.*_exps=CPU").unwrap());
        // the core's errors, where typed
        assert_eq!(with(&s, "ot", "blk(=CPU").unwrap_err(), flags::parse_overrides("blk(=CPU").unwrap_err().to_string());
        assert!(with(&s, "ot", "exps=GPU0").unwrap_err().contains("unknown buffer type"));
        assert_eq!(with(&s, "ts", "3/1").unwrap().params.tensor_split, [3.0, 1.0]);
        assert!(with(&s, "ts", "3,a").is_err());
        assert_eq!(with(&s, "sm", "row").unwrap().params.split_mode, SplitMode::Row);
        assert!(with(&s, "sm", "rows").is_err());
        assert_eq!(with(&s, "gpu", "rtx-4090+a100-80gb").unwrap().cards, ["rtx-4090", "a100-80gb"]);
        assert_eq!(gpus(&with(&s, "gpu", "rtx-4090+a100-80gb").unwrap()).iter().map(|g| g.capacity).collect::<Vec<_>>(),
            [vramcalc_core::memory::device::gpu("rtx-4090").unwrap().bytes, vramcalc_core::memory::device::gpu("a100-80gb").unwrap().bytes]);
        assert!(with(&s, "gpu", "rtx-4090+nope").is_err());
        let three = LocalSettings { cards: vec!["rtx-4090".into(), "rtx-3090".into(), "a100-80gb".into()], ..with(&s, "ts", "3,2,1").unwrap() };
        let two = without_card(&three, 1);
        assert_eq!((two.cards.clone(), two.params.tensor_split.clone()), (vec!["rtx-4090".to_string(), "a100-80gb".to_string()], vec![3.0, 1.0]));
        assert_eq!(without_card(&two, 0).params.tensor_split, Vec::<f64>::new(), "one card: no split");
        assert_eq!(without_card(&two, 5), two);
        for (_, text) in ot_presets() {
            assert!(with(&s, "ot", &text).is_ok(), "{text}");
        }
    }

    #[test]
    fn mixed_cards_a_split_and_overrides_are_the_cores_estimate_per_device() {
        let h = tiny();
        let s = LocalSettings { cards: vec!["rtx-4090".into(), "rtx-3090".into()], ..LocalSettings::default() };
        let s = with(&with(&s, "ts", "3,1").unwrap(), "ot", &ot_presets()[0].1).unwrap();
        let a = answer(&h, &s, &src()).unwrap();
        assert_eq!(a.estimate, vramcalc_core::llama_cpp::estimate(&h, &s.params, &gpus(&s), s.host_ram).unwrap());
        assert_eq!(a.estimate.devices.len(), 3, "the host and two GPUs");
        assert!(a.command.contains("-ts 3,1") && a.command.contains("-ot '"), "{}", a.command);
        // all experts on the CPU: more on the host than with the experts on the GPUs
        let plain = answer(&h, &LocalSettings { params: Params { tensor_split: vec![3.0, 1.0], ..Params::default() }, ..s.clone() }, &src()).unwrap();
        assert!(a.estimate.devices[0].model > plain.estimate.devices[0].model);
        // the reverse answers follow the settings: 3 cards hold at least what 2 do
        let three = with(&s, "gpu", "rtx-4090+rtx-3090+rtx-3090").unwrap();
        let three = LocalSettings { params: Params { tensor_split: vec![], ..three.params.clone() }, ..three };
        assert!(answer(&h, &three, &src()).unwrap().estimate.devices.len() == 4);
        // values past the cards are ignored, as llama.cpp's load_tensors ignores them
        let long = answer(&h, &with(&s, "ts", "1,1,7").unwrap(), &src()).unwrap();
        let two = answer(&h, &with(&s, "ts", "1,1").unwrap(), &src()).unwrap();
        assert_eq!(long.estimate.devices, two.estimate.devices);
    }

    #[test]
    fn ollama_is_llama_cpp_as_ollama_launches_it() {
        use vramcalc_core::llama_cpp::ollama::Ollama;
        let h = tiny();
        let o = Ollama { num_ctx: Some(4096), num_parallel: Some(4), kv_cache_type: Some(GgmlType::Q8_0), ..Ollama::default() };
        let s = LocalSettings { engine: LocalEngine::Ollama, ollama: o.clone(), ..LocalSettings::default() };
        let a = answer(&h, &s, &src()).unwrap();
        let g = gpus(&s);
        let mut p = o.params(g[0].capacity, 32768);
        p.n_gpu_layers = Some(fit::max_gpu_layers(&h, &p, &g, s.host_ram).unwrap().unwrap().0);
        assert_eq!((p.n_ctx, p.n_parallel, p.type_v), (16384, 4, GgmlType::Q8_0), "num_ctx × OLLAMA_NUM_PARALLEL");
        assert_eq!(a.estimate, vramcalc_core::llama_cpp::estimate(&h, &p, &g, s.host_ram).unwrap());
        let (modelfile, num_ctx, np) = a.ollama.clone().unwrap();
        assert_eq!((num_ctx, np), (4096, 4));
        let parsed = vramcalc_core::launch::modelfile::parse(&modelfile).unwrap();
        assert_eq!((parsed.from.as_str(), parsed.parameter("num_ctx")), ("./tiny.gguf", Some("4096")));
        assert_eq!(parsed.ollama().unwrap().params(g[0].capacity, 32768).n_ctx, 16384, "the Modelfile runs what was sized");
        assert!(a.command.contains("-c 16384") && a.command.contains("-np 4") && a.command.contains("-ctk q8_0"), "{}", a.command);
        // Ollama's parallel slots and KV type change the answer as Ollama does
        let one = answer(&h, &LocalSettings { ollama: Ollama { num_ctx: Some(4096), ..Ollama::default() }, ..s.clone() }, &src()).unwrap();
        assert!(one.estimate.kv_bytes() < a.estimate.kv_bytes());
        assert!(answer(&h, &LocalSettings::default(), &src()).unwrap().ollama.is_none());
    }

    #[test]
    fn lm_studio_is_llama_cpp_under_its_defaults_and_names() {
        let h = tiny();
        let s = with(&LocalSettings::default(), "engine", "lm-studio").unwrap();
        assert_eq!(s.params, lmstudio::defaults(), "LM Studio's load defaults");
        let shown: Vec<&str> = fields(&s, ModelTraits::ALL).iter().map(|f| f.id).collect();
        assert_eq!(shown, ["engine", "c", "ctk", "ctv", "fa", "ngl", "b", "no-mmap", "ram"], "the load settings LM Studio has");
        let s = with(&with(&s, "c", "8192").unwrap(), "ctk", "q8_0").unwrap();
        let a = answer(&h, &s, &src()).unwrap();
        assert_eq!(a.estimate, vramcalc_core::llama_cpp::estimate(&h, &s.params, &gpus(&s), s.host_ram).unwrap());
        let (line, rest) = a.lms.clone().unwrap();
        assert_eq!(line, "lms load tiny.gguf --context-length 8192 --gpu max");
        assert_eq!(rest, ["K Cache Quantization Type: q8_0"]);
        assert!(a.command.contains("-c 8192") && a.command.contains("-fa off") && a.command.contains("-b 512"), "{}", a.command);
        // back to llama.cpp: llama.cpp's own defaults; the link reads LM Studio's back
        assert_eq!(with(&s, "engine", "llama-cpp").unwrap().params, Params::default());
        assert_eq!(link::from_fragment(&link::to_fragment(None, &s)).unwrap().1, s);
    }

    #[test]
    fn which_quant_fits_follows_the_settings() {
        let s = LocalSettings { params: Params { n_ctx: 8192, ..Params::default() }, ..LocalSettings::default() };
        let fits = quant_fits("qwen3-8b", &s);
        assert_eq!(fits.len(), QUANTS.len());
        let f = |fits: &[(&str, Option<bool>)], q: &str| fits.iter().find(|x| x.0 == q).unwrap().1;
        assert_eq!(f(&fits, "Q4_K_M"), Some(true), "an 8B Q4_K_M fits 24 GB at 8 k");
        // a 10 GB card: F16 (16 GB of weights) does not, Q2_K does
        let small = LocalSettings { cards: vec!["rtx-3080".into()], ..s.clone() };
        let fits = quant_fits("qwen3-8b", &small);
        assert_eq!((f(&fits, "F16"), f(&fits, "Q2_K")), (Some(false), Some(true)), "{fits:?}");
    }

    #[test]
    fn field_texts_set_llama_cpp_settings_or_say_why_not() {
        let s = LocalSettings::default();
        assert_eq!(with(&s, "ctk", "q8_0").unwrap().params.type_k, GgmlType::Q8_0);
        assert_eq!(with(&s, "ngl", "20").unwrap().params.n_gpu_layers, Some(20));
        assert_eq!(with(&s, "ngl", "all").unwrap().params.n_gpu_layers, None);
        assert_eq!(with(&s, "gpu", "none").unwrap().cards, Vec::<String>::new());
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
        let cpu = answer(&h, &LocalSettings { cards: vec![], host_ram: None, ..LocalSettings::default() }, &src()).unwrap();
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
