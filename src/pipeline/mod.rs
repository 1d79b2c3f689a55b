//! The image/video pipeline panel's logic (issue 27), pure and tested natively: its fields and
//! what a field's text sets ([`fields`], [`with`]), and the answer ([`answer`]): the core's
//! pipeline estimate stage by stage (`PipelineSpec::estimate_stages`; `decode` keeps the VAE
//! stage alone, as `vramcalc estimate --mode decode` does) or a LoRA training step of the
//! denoiser (`diffusion::train::lora_step`, cached latents and text embeddings, as the CLI's
//! `--mode train`), or kohya sd-scripts' LoRA job (`kohya`, core `diffusion::kohya_job`, as
//! `--trainer kohya`), or diffusers' full fine-tuning of the denoiser (`full`, core
//! `diffusion::full_train::full_job`, as `--mode train` without `--finetune lora`). `components::pipeline` draws it; `link` writes and reads its share links.

pub mod full;
pub mod hub;
pub mod kohya;
pub mod link;
pub mod whatif;

use crate::form::{flag, named, whole, Field};
use crate::state::pipeline::{HubPipeline, PipeMode, PipelineState, TrainMethod, Trainer};
use vramcalc_core::diffusion::pipeline::{Family, PipelineEstimate};
use vramcalc_core::diffusion::train_whatif::{frozen_weights, LoraSetup};
use vramcalc_core::diffusion::{presets, Component, ComponentKind, Guidance, Offload, Pass, PipelineSettings, PipelineSpec, WeightDType};
use vramcalc_core::finetune::{FineTune, Method};
use vramcalc_core::memory::device::{gpu, CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES};
use serde::{Deserialize, Serialize};
use vramcalc_core::{Device, OptimizerKind, GPUS};

/// The components a pipeline may name, with their dtype field's id.
pub const COMPONENT_FIELDS: &[(&str, &str)] = &[
    ("text_encoder", "dtype-text_encoder"),
    ("text_encoder_2", "dtype-text_encoder_2"),
    ("text_encoder_3", "dtype-text_encoder_3"),
    ("unet", "dtype-unet"),
    ("transformer", "dtype-transformer"),
    ("vae", "dtype-vae"),
];

/// The optimizers offered for LoRA training (diffusers' scripts: AdamW, `--use_8bit_adam`).
pub const OPTIMIZERS: &[OptimizerKind] = &[OptimizerKind::Adamw, OptimizerKind::Adam8bit, OptimizerKind::PagedAdamw8bit, OptimizerKind::Adafactor, OptimizerKind::Sgd];

/// The preset's pipeline.
pub fn spec(preset: &str) -> Result<PipelineSpec, String> {
    PipelineSpec::preset(preset).map_err(|e| e.to_string())
}

/// The state's pipeline: the hub repository's, or the preset's.
pub fn spec_of(s: &PipelineState) -> Result<PipelineSpec, String> {
    match &s.hub {
        Some(h) => h.spec(),
        None => spec(&s.preset),
    }
}

impl HubPipeline {
    /// The pipeline its files describe, named by its hub id.
    pub fn spec(&self) -> Result<PipelineSpec, String> {
        let config = |name: &str| self.configs.iter().find(|c| c.0 == name).map(|c| c.1.clone());
        let mut p = PipelineSpec::from_model_index(&self.index, config).map_err(|e| format!("`{}`: {e}", self.hub))?;
        p.name = self.hub.to_string();
        Ok(p)
    }
}

/// The pipeline read from the hub, with the mode and GPU kept and the rest at its defaults.
pub fn with_hub(s: &PipelineState, h: HubPipeline) -> PipelineState {
    PipelineState { preset: s.preset.clone(), hub: Some(h), mode: s.mode, gpu: s.gpu.clone(), ..PipelineState::default() }
}

fn opt_name<T: Copy>(v: Option<T>, name: fn(T) -> &'static str) -> String {
    v.map_or("default".to_string(), |v| name(v).to_string())
}

fn with_default(names: &[&'static str]) -> Vec<(String, String)> {
    let mut o = vec![("default".to_string(), "default".to_string())];
    o.extend(named(names.iter().copied()));
    o
}

fn dtype_names() -> Vec<&'static str> {
    WeightDType::ALL.iter().map(|d| d.name()).collect()
}

fn dtype_field(s: &PipelineState) -> Field {
    Field::select("dtype", with_default(&dtype_names()), opt_name(s.dtype, WeightDType::name))
}

/// The fields of this setup (the mode decides which apply; frames for video only).
pub fn fields(s: &PipelineState, p: &PipelineSpec) -> Vec<Field> {
    let (dw, dh, df) = p.default_size();
    let video = p.family == Family::Wan;
    let mut pipelines = named(presets::ids());
    if let Some(h) = &s.hub {
        pipelines.insert(0, ("hub".to_string(), h.hub.to_string()));
    }
    let mut out = vec![
        Field::select("pipeline", pipelines, if s.hub.is_some() { "hub".to_string() } else { s.preset.clone() }),
        Field::select("mode", named(PipeMode::ALL.iter().map(|m| m.name())), s.mode.name()),
        Field::number("width", s.width.unwrap_or(dw)),
        Field::number("height", s.height.unwrap_or(dh)),
    ];
    if video {
        out.push(Field::number("frames", s.frames.unwrap_or(df)));
    }
    out.push(Field::number("batch", s.batch));
    if s.mode != PipeMode::Train {
        out.push(Field::number("images-per-prompt", s.images_per_prompt));
    }
    if s.mode == PipeMode::Infer {
        out.push(Field::select("guidance", with_default(&Guidance::ALL.iter().map(|g| g.name()).collect::<Vec<_>>()), opt_name(s.guidance, Guidance::name)));
    }
    if s.mode == PipeMode::Train {
        out.insert(2, Field::select("trainer", named(Trainer::ALL.iter().map(|t| t.name())), s.trainer.name()));
        if s.trainer == Trainer::Diffusers {
            out.insert(3, Field::select("method", named(TrainMethod::ALL.iter().map(|m| m.name())), s.method.name()));
        }
    }
    if s.mode == PipeMode::Train && s.trainer == Trainer::Kohya {
        kohya::fields(s, p, &mut out);
    } else if s.mode == PipeMode::Train && s.method == TrainMethod::Full {
        out.push(dtype_field(s));
        full::fields(s, &mut out);
    } else if s.mode != PipeMode::Train {
        out.push(dtype_field(s));
        for (name, id) in COMPONENT_FIELDS {
            let shown = p.components.iter().any(|c| c.0 == *name && (s.mode == PipeMode::Infer || c.1.kind() == ComponentKind::Vae));
            if shown {
                let v = s.component_dtypes.iter().find(|c| c.0 == *name).map(|c| c.1);
                out.push(Field::select(id, with_default(&dtype_names()), opt_name(v, WeightDType::name)));
            }
        }
        out.push(Field::select("offload", named(Offload::ALL.iter().map(|o| o.name())), s.offload.name()));
        out.push(Field::text("vae-tiling", s.vae_tiling.map_or(String::new(), |t| t.to_string())));
        out.push(Field::check("vae-slicing", s.vae_slicing));
    } else {
        out.push(dtype_field(s));
        out.push(Field::number("lora-r", u64::from(s.lora_r)));
        out.push(Field::check("checkpointing", s.checkpointing));
        out.push(Field::select("optimizer", named(OPTIMIZERS.iter().map(|o| o.name())), s.optimizer.name()));
        out.push(Field::check("cached", s.cached));
    }
    out.push(Field::select("gpu", GPUS.iter().map(|g| (g.id.to_string(), g.name.to_string())).collect(), s.gpu.clone()));
    out
}

fn parse_opt<T>(text: &str, parse: fn(&str) -> Option<T>, what: &str) -> Result<Option<T>, String> {
    match text {
        "default" | "" => Ok(None),
        t => parse(t).map(Some).ok_or_else(|| format!("{t}: not a {what}")),
    }
}

/// The state with field `id` set from `text`, or why the text is not a value. A size equal to
/// the pipeline's default is kept as the default.
pub fn with(s: &PipelineState, p: &PipelineSpec, id: &str, text: &str) -> Result<PipelineState, String> {
    let mut s = s.clone();
    let (dw, dh, df) = p.default_size();
    let size = |t: &str, d: u64| -> Result<Option<u64>, String> {
        let v = whole(t, 16, 16384)?;
        if v % 8 != 0 {
            return Err("a multiple of 8 pixels (the VAE's scale)".into());
        }
        Ok((v != d).then_some(v))
    };
    match id {
        "pipeline" if text == "hub" && s.hub.is_some() => {}
        "pipeline" if text == s.preset && s.hub.is_none() => {}
        "pipeline" => {
            spec(text)?;
            s = PipelineState { preset: text.to_string(), mode: s.mode, gpu: s.gpu, ..PipelineState::default() };
        }
        "mode" => s.mode = PipeMode::parse(text).ok_or_else(|| format!("{text}: infer, decode or train"))?,
        "width" => s.width = size(text, dw)?,
        "height" => s.height = size(text, dh)?,
        "frames" => {
            let f = whole(text, 1, 4096)?;
            if f % 4 != 1 {
                return Err("Wan's frames are 4k + 1 (81, 49, 17, …)".into());
            }
            s.frames = (f != df).then_some(f);
        }
        "batch" => s.batch = whole(text, 1, 256)?,
        "images-per-prompt" => s.images_per_prompt = whole(text, 1, 64)?,
        "guidance" => s.guidance = parse_opt(text, Guidance::parse, "guidance")?,
        "dtype" => s.dtype = parse_opt(text, WeightDType::parse, "dtype")?,
        "offload" => s.offload = Offload::parse(text).ok_or_else(|| format!("{text}: not an offload mode"))?,
        "vae-tiling" => {
            s.vae_tiling = match text.trim() {
                "" => None,
                t => Some(whole(t, 0, 16384).map_err(|_| "empty (off), 0 (the VAE's tile) or the tile's pixels".to_string())?),
            }
        }
        "vae-slicing" => s.vae_slicing = flag(text),
        "lora-r" | "network-dim" => s.lora_r = whole(text, 1, 1024)? as u32,
        "trainer" => s.trainer = Trainer::parse(text).ok_or_else(|| format!("{text}: diffusers or kohya"))?,
        "mixed-precision" => s.dtype = parse_opt(text, WeightDType::parse, "dtype")?,
        "full-half" => s.kohya.full_half = flag(text),
        "conv-dim" => s.kohya.conv_dim = whole(text, 0, 1024)? as u32,
        "cache-latents" => s.kohya.cache_latents = flag(text),
        "cache-te" => s.kohya.cache_te = flag(text),
        "unet-only" => s.kohya.unet_only = flag(text),
        "method" => s.method = TrainMethod::parse(text).ok_or_else(|| format!("{text}: lora or full"))?,
        "ema" => s.full.ema = full::ema_parse(text).ok_or_else(|| format!("{text}: none, gpu (--use-ema) or offload (--use-ema --offload-ema)"))?,
        "set-grads-to-none" => s.full.set_grads_to_none = flag(text),
        "fp8-base" => s.kohya.fp8 = kohya::fp8_parse(text).ok_or_else(|| format!("{text}: off, all (--fp8_base) or unet (--fp8_base_unet)"))?,
        "checkpointing" => s.checkpointing = flag(text),
        "cached" => s.cached = flag(text),
        "optimizer" => s.optimizer = OPTIMIZERS.iter().copied().find(|o| o.name() == text).ok_or_else(|| format!("{text}: not an optimizer"))?,
        "gpu" => s.gpu = gpu(text).ok_or_else(|| format!("{text}: unknown GPU"))?.id.to_string(),
        _ => match COMPONENT_FIELDS.iter().find(|c| c.1 == id) {
            Some((name, _)) => {
                s.component_dtypes.retain(|c| c.0 != *name);
                if let Some(d) = parse_opt(text, WeightDType::parse, "dtype")? {
                    s.component_dtypes.push((name.to_string(), d));
                }
            }
            None => return Err(format!("{id}: no such setting")),
        },
    }
    Ok(s)
}

/// The core's settings.
pub fn settings(s: &PipelineState) -> PipelineSettings {
    PipelineSettings {
        width: s.width,
        height: s.height,
        frames: s.frames,
        text_len: None,
        batch: s.batch,
        images_per_prompt: s.images_per_prompt,
        guidance: s.guidance,
        offload: s.offload,
        vae_tiling: s.vae_tiling,
        vae_slicing: s.vae_slicing,
        dtype: s.dtype,
        component_dtypes: s.component_dtypes.clone(),
        device: Device::Cuda,
    }
}

/// A LoRA step's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainAnswer {
    pub component: String,
    pub class: String,
    pub peak: u64,
    /// The frozen VAE and text encoders' weights (uncached latents), in `peak`.
    pub frozen: u64,
    pub params: u64,
    pub trainable: u64,
    pub width: u64,
    pub height: u64,
    pub frames: u64,
    pub trainer: Trainer,
    /// kohya's or a full fine-tune's frozen components on the GPU beside the step,
    /// `(component, bytes)` (their sum is `frozen`).
    pub resident: Vec<(String, u64)>,
    /// A full fine-tune's own figures (`None`: a LoRA step).
    pub full: Option<FullFigures>,
}

/// What a full fine-tuning job adds to the answer (core `full_train::FullJob`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FullFigures {
    /// The script the core picked (`Script::name`).
    pub script: String,
    /// The EMA copy's bytes (0: no EMA), on the GPU (in `peak`) or in CPU RAM.
    pub ema_bytes: u64,
    pub ema_on_gpu: bool,
}

/// The panel's answer; computed in the app's worker (`crate::worker::pipeline`), so it crosses
/// as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Answer {
    Stages(PipelineEstimate),
    Train(TrainAnswer),
}

impl Answer {
    /// Peak allocated on the GPU.
    pub fn peak(&self) -> u64 {
        match self {
            Answer::Stages(e) => e.peak_bytes,
            Answer::Train(t) => t.peak,
        }
    }
    /// The device total: the peak, the CUDA context and cuBLAS's workspace (as the CLI adds).
    pub fn device_total(&self) -> u64 {
        self.peak() + CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES
    }
    pub fn cpu_ram(&self) -> u64 {
        match self {
            Answer::Stages(e) => e.cpu_ram_bytes,
            Answer::Train(t) => t.full.as_ref().filter(|f| !f.ema_on_gpu).map_or(0, |f| f.ema_bytes),
        }
    }
}

/// `--mode decode`: the VAE stage alone (as `crates/cli/src/diffusion.rs` keeps it).
fn decode_only(mut e: PipelineEstimate) -> PipelineEstimate {
    e.stages.retain(|st| st.name == "decode");
    if let Some(top) = e.stages.first() {
        (e.peak_bytes, e.gpu_bytes, e.peak_stage, e.cpu_ram_bytes) = (top.peak, top.peak, top.name.clone(), top.cpu_weights);
    }
    e
}

pub fn answer(s: &PipelineState, p: &PipelineSpec) -> Result<Answer, String> {
    match s.mode {
        PipeMode::Infer => p.estimate_stages(&settings(s), true).map(Answer::Stages).map_err(|e| e.to_string()),
        PipeMode::Decode => p.estimate_stages(&settings(s), false).map(|e| Answer::Stages(decode_only(e))).map_err(|e| e.to_string()),
        PipeMode::Train if s.trainer == Trainer::Kohya => kohya::answer(s, p).map(Answer::Train),
        PipeMode::Train if s.method == TrainMethod::Full => full::answer(s, p).map(Answer::Train),
        PipeMode::Train => {
            let ((name, c), setup) = lora_setup(s, p)?;
            let step = setup.step(c).map_err(|e| e.to_string())?;
            // uncached: the VAE and text encoders stay loaded, frozen (as `--what-if` adds them)
            let frozen = if s.cached { 0 } else { frozen_weights(p, &settings(s)).map_err(|e| e.to_string())? };
            let Pass::Denoise { width, height, frames, .. } = setup.pass else { return Err("a LoRA step is of the denoiser".into()) };
            Ok(Answer::Train(TrainAnswer { component: name.clone(), class: c.class().to_string(), peak: step.peak.saturating_add(frozen), frozen, params: step.params, trainable: step.trainable, width, height, frames, trainer: Trainer::Diffusers, resident: Vec::new(), full: None }))
        }
    }
}

/// The pipeline's denoiser, named.
pub fn denoiser(p: &PipelineSpec) -> Option<&(String, Component)> {
    p.components.iter().find(|c| c.1.kind() == ComponentKind::Denoiser)
}

/// The pipeline's denoiser and the LoRA step the train mode runs on it (as the CLI's `--mode train`).
pub fn lora_setup<'a>(s: &PipelineState, p: &'a PipelineSpec) -> Result<(&'a (String, Component), LoraSetup), String> {
    let named = denoiser(p).ok_or("the pipeline has no denoiser")?;
    let (dw, dh, df) = p.default_size();
    let (width, height) = (s.width.unwrap_or(dw), s.height.unwrap_or(dh));
    let frames = if p.family == Family::Wan { s.frames.unwrap_or(df) } else { 1 };
    // the denoiser's text length as the CLI's `--mode train` takes it
    let text_len = match named.1 {
        Component::Unet(_) => 77,
        Component::Sd3(_) => 333,
        _ => 512,
    };
    let finetune = FineTune { method: Method::Lora, lora_r: s.lora_r, lora_alpha: f64::from(s.lora_r), ..FineTune::default() };
    let dt = s.dtype.unwrap_or(WeightDType::Bf16);
    let pass = Pass::Denoise { width, height, frames, text_len };
    Ok((named, LoraSetup { pass, precision: dt.compute(), device: Device::Cuda, batch: s.batch, finetune, checkpointing: s.checkpointing, optimizer: s.optimizer }))
}

/// The GPU's memory.
pub fn capacity(s: &PipelineState) -> Option<u64> {
    gpu(&s.gpu).map(|g| g.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_back_what_it_shows_in_every_mode() {
        for id in presets::ids() {
            let p = spec(id).unwrap();
            for mode in PipeMode::ALL {
                let s = PipelineState { preset: id.into(), mode, vae_tiling: Some(0), component_dtypes: vec![("vae".into(), WeightDType::Fp32)], ..PipelineState::default() };
                for f in fields(&s, &p) {
                    assert_eq!(with(&s, &p, f.id, &f.value).as_ref(), Ok(&s), "{id} {mode:?} {}", f.id);
                }
            }
        }
    }

    #[test]
    fn field_texts_set_the_pipeline_or_say_why_not() {
        let p = spec("flux.1-dev").unwrap();
        let s = PipelineState::default();
        assert_eq!(with(&s, &p, "width", "768").unwrap().width, Some(768));
        assert_eq!(with(&s, &p, "width", "1024").unwrap().width, None, "the default stays the default");
        assert!(with(&s, &p, "width", "1001").unwrap_err().contains("multiple of 8"));
        assert_eq!(with(&s, &p, "dtype-transformer", "fp8").unwrap().component_dtypes, vec![("transformer".to_string(), WeightDType::Fp8)]);
        assert_eq!(with(&s, &p, "offload", "model").unwrap().offload, Offload::Model);
        assert!(with(&s, &p, "offload", "disk").is_err());
        let sd = with(&s, &p, "pipeline", "sd-1.5").unwrap();
        assert_eq!((sd.preset.as_str(), sd.width), ("sd-1.5", None));
        assert!(with(&s, &p, "pipeline", "dalle").is_err());
        let wan = spec("wan2.1-t2v-1.3b").unwrap();
        assert!(fields(&s, &wan).iter().any(|f| f.id == "frames"));
        assert!(!fields(&s, &p).iter().any(|f| f.id == "frames"));
        assert!(with(&s, &wan, "frames", "80").is_err());
        assert_eq!(with(&s, &wan, "frames", "49").unwrap().frames, Some(49));
    }

    #[test]
    fn the_answer_is_the_cores_per_mode() {
        let p = spec("flux.1-dev").unwrap();
        let s = PipelineState::default();
        let Answer::Stages(e) = answer(&s, &p).unwrap() else { panic!("stages") };
        assert_eq!(e, p.estimate(&settings(&s)).unwrap());
        assert_eq!(e.stages.iter().map(|st| st.name.as_str()).collect::<Vec<_>>(), ["encode:text_encoder", "encode:text_encoder_2", "denoise", "decode"]);
        // model offload: one component's weights on the GPU at a time, the rest in CPU RAM
        let off = answer(&PipelineState { offload: Offload::Model, ..s.clone() }, &p).unwrap();
        assert!(off.peak() < e.peak_bytes && off.cpu_ram() > 0);
        let Answer::Stages(d) = answer(&PipelineState { mode: PipeMode::Decode, ..s.clone() }, &p).unwrap() else { panic!() };
        assert_eq!(d.stages.len(), 1);
        assert_eq!(d.peak_stage, "decode");
        let tiled = answer(&PipelineState { mode: PipeMode::Decode, vae_tiling: Some(0), width: Some(2048), height: Some(2048), ..s.clone() }, &p).unwrap();
        let plain = answer(&PipelineState { mode: PipeMode::Decode, width: Some(2048), height: Some(2048), ..s.clone() }, &p).unwrap();
        assert!(tiled.peak() < plain.peak(), "tiling lowers the decode's peak");
        let Answer::Train(t) = answer(&PipelineState { mode: PipeMode::Train, ..s.clone() }, &p).unwrap() else { panic!() };
        assert!(t.trainable > 0 && t.trainable < t.params / 100);
        let r64 = answer(&PipelineState { mode: PipeMode::Train, lora_r: 64, ..s.clone() }, &p).unwrap();
        assert!(r64.peak() > t.peak);
        assert!(answer(&PipelineState { width: Some(8), ..s }, &p).is_err());
    }
}
