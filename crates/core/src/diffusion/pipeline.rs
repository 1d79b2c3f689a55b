//! A diffusers pipeline as stages, in the order its `__call__` runs them (`pipelines/*/pipeline_*.py`):
//! the text encoders one after another (`encode_prompt`), the denoising loop (the denoiser's
//! forward, the same every step: steps add no memory), the VAE decode. Each stage's peak is its
//! component's simulated forward (`component.rs`) plus the weights its offload mode keeps on
//! the GPU (`offload.rs`); the pipeline's peak is the largest stage's.

pub use super::family::{Family, Guidance};
use super::component::{measure, wan_latent_frames, Component, ComponentKind, Forward, Pass};
use super::offload::{Offload, Weights};
use super::vae::{image_bytes, Tiling};
use crate::config::{Device, Precision};
use crate::error::{Error, Result};
use crate::finetune::BaseFormat;
use crate::graph::{Graph, Lin, StorageClass};
use crate::lower::LowerOptions;
use crate::units::DType;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A component's storage dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightDType {
    Fp32,
    Fp16,
    Bf16,
    /// `enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.bfloat16)`:
    /// linear and conv weights stored in 1 byte, each cast to bf16 for its forward.
    Fp8,
    /// bitsandbytes 4-bit NormalFloat (`BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")`):
    /// linear weights packed, dequantised per matmul; compute in bf16.
    Nf4,
}

crate::config::names!(WeightDType { Fp32 = "fp32", Fp16 = "fp16", Bf16 = "bf16", Fp8 = "fp8", Nf4 = "nf4" });

impl WeightDType {
    /// The dtype the component computes in.
    pub fn compute(self) -> Precision {
        match self {
            WeightDType::Fp32 => Precision::Fp32,
            WeightDType::Fp16 => Precision::Fp16,
            _ => Precision::Bf16,
        }
    }
}

/// What the user sets.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineSettings {
    pub width: Option<u64>,
    pub height: Option<u64>,
    /// Video frames (Wan; 81 by default).
    pub frames: Option<u64>,
    /// The T5/UMT5 prompt length (`max_sequence_length`); CLIP always runs at 77.
    pub text_len: Option<u64>,
    /// Prompts.
    pub batch: u64,
    pub images_per_prompt: u64,
    pub guidance: Option<Guidance>,
    pub offload: Offload,
    /// `enable_tiling()` with tiles of this many pixels (0: the VAE's `sample_size`).
    pub vae_tiling: Option<u64>,
    pub vae_slicing: bool,
    /// Every component's dtype (`torch_dtype`), unless `component_dtypes` names it.
    pub dtype: Option<WeightDType>,
    pub component_dtypes: Vec<(String, WeightDType)>,
    pub device: Device,
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings {
            width: None,
            height: None,
            frames: None,
            text_len: None,
            batch: 1,
            images_per_prompt: 1,
            guidance: None,
            offload: Offload::None,
            vae_tiling: None,
            vae_slicing: false,
            dtype: None,
            component_dtypes: Vec::new(),
            device: Device::Cuda,
        }
    }
}

/// A pipeline: its class and its model components by name, in `model_index.json`'s order.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineSpec {
    pub name: String,
    pub class: String,
    pub family: Family,
    pub components: Vec<(String, Component)>,
}

/// One stage's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// `encode:text_encoder`, `denoise`, `decode`.
    pub name: String,
    pub component: String,
    /// Peak allocated on the GPU during the stage.
    pub peak: u64,
    /// The component's activations and temporaries at their peak.
    pub activations: u64,
    /// Weights on the GPU during the stage.
    pub gpu_weights: u64,
    /// Weights in CPU RAM during the stage.
    pub cpu_weights: u64,
    /// Components whose weights are (all, or per block/leaf) on the GPU.
    pub resident: Vec<String>,
    /// The batch the component's forward runs at.
    pub batch: u64,
    /// Forwards this stage runs one after another (steps, CFG's two passes, tiles, slices).
    pub note: String,
}

/// One component's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentReport {
    pub name: String,
    pub class: String,
    pub params: u64,
    pub dtype: String,
    pub weight_bytes: u64,
}

/// The pipeline's answer (deserialised too: the app's worker computes it, issue 23).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineEstimate {
    pub peak_bytes: u64,
    pub peak_stage: String,
    pub params: u64,
    pub stages: Vec<StageReport>,
    pub components: Vec<ComponentReport>,
    /// The GPU's peak and the CPU RAM the weights need (the largest over the stages).
    pub gpu_bytes: u64,
    pub cpu_ram_bytes: u64,
    pub width: u64,
    pub height: u64,
    pub frames: u64,
    pub offload: String,
    pub guidance: String,
}

fn is_model_class(class: &str) -> bool {
    !["Tokenizer", "TokenizerFast", "Scheduler", "ImageProcessor", "FeatureExtractor", "Processor"].iter().any(|s| class.ends_with(s))
}

impl PipelineSpec {
    /// A built-in pipeline (`presets.rs`).
    pub fn preset(id: &str) -> Result<PipelineSpec> {
        let (_, repo, index, comps) = super::presets::files(id).ok_or_else(|| {
            Error::Config(format!("unknown pipeline `{id}`; presets: {}", super::presets::ids().collect::<Vec<_>>().join(", ")))
        })?;
        let mut spec = PipelineSpec::from_model_index(index, |name| comps.iter().find(|c| c.0 == name).map(|c| c.1.to_string()))?;
        spec.name = format!("{id} ({repo})");
        Ok(spec)
    }

    /// The components of a `model_index.json` whose `<name>/config.json` [`from_model_index`]
    /// reads, `(name, class)` in its order (models; not tokenizers, schedulers, processors or
    /// the safety checker), and the pipeline's class.
    ///
    /// [`from_model_index`]: PipelineSpec::from_model_index
    pub fn model_components(index: &str) -> Result<(String, Vec<(String, String)>)> {
        let v: Value = serde_json::from_str(index).map_err(|e| Error::Import(format!("model_index.json is not valid JSON: {e}")))?;
        let obj: &Map<String, Value> = v.as_object().ok_or_else(|| Error::Import("model_index.json must be an object".into()))?;
        let class = obj.get("_class_name").and_then(Value::as_str).ok_or_else(|| Error::Import("model_index.json has no `_class_name`".into()))?;
        Family::of(class)?;
        let mut out = Vec::new();
        for (name, entry) in obj {
            if name.starts_with('_') {
                continue;
            }
            let Some([lib, cls]) = entry.as_array().and_then(|a| <&[Value; 2]>::try_from(a.as_slice()).ok()) else { continue };
            let (Some(_), Some(cls)) = (lib.as_str(), cls.as_str()) else { continue };
            if is_model_class(cls) && name != "safety_checker" {
                out.push((name.clone(), cls.to_string()));
            }
        }
        Ok((class.to_string(), out))
    }

    /// Reads a `model_index.json`; `config(component)` gives the text of `<component>/config.json`.
    pub fn from_model_index(index: &str, config: impl Fn(&str) -> Option<String>) -> Result<PipelineSpec> {
        let (class, names) = PipelineSpec::model_components(index)?;
        let family = Family::of(&class)?;
        let mut components = Vec::new();
        for (name, cls) in names {
            let text = config(&name).ok_or_else(|| Error::Import(format!("component `{name}` ({cls}): its `{name}/config.json` is missing")))?;
            let c = Component::from_json(&text).map_err(|e| Error::Import(format!("{name}/config.json: {e}")))?;
            components.push((name, c));
        }
        Ok(PipelineSpec { name: class.clone(), class, family, components })
    }

    fn denoiser(&self) -> Result<&(String, Component)> {
        self.components.iter().find(|c| c.1.kind() == ComponentKind::Denoiser).ok_or_else(|| Error::Import("the pipeline has no unet or transformer".into()))
    }

    /// Parameters of every component.
    pub fn params(&self) -> Result<u64> {
        let mut n = 0u64;
        for (_, c) in &self.components {
            n = n.saturating_add(component_params(c)?);
        }
        Ok(n)
    }

    pub fn default_dtype(&self) -> WeightDType {
        match self.family {
            Family::Sd | Family::Sdxl => WeightDType::Fp16,
            _ => WeightDType::Bf16,
        }
    }

    fn dtype_of(&self, name: &str, kind: ComponentKind, s: &PipelineSettings) -> WeightDType {
        if let Some(&(_, d)) = s.component_dtypes.iter().find(|(n, _)| n == name) {
            return d;
        }
        // Wan's examples load the VAE in fp32 (`AutoencoderKLWan.from_pretrained(..., torch_dtype=torch.float32)`)
        if kind == ComponentKind::Vae && self.family == Family::Wan && s.dtype.is_none() {
            return WeightDType::Fp32;
        }
        s.dtype.unwrap_or(self.default_dtype())
    }

    /// The default size: the pipelines' `default_sample_size · vae_scale_factor` (SD 1.5: 512;
    /// SDXL, SD3, Flux: 1024; Wan: 832 × 480 × 81 frames).
    pub fn default_size(&self) -> (u64, u64, u64) {
        match self.family {
            Family::Sd => (512, 512, 1),
            Family::Wan => (832, 480, 81),
            _ => (1024, 1024, 1),
        }
    }

    /// The pipeline's peak, stage by stage.
    pub fn estimate(&self, s: &PipelineSettings) -> Result<PipelineEstimate> {
        self.estimate_stages(s, true)
    }

    /// `with_text`: the text encoding stages (off for `--mode decode` and cached embeddings).
    pub fn estimate_stages(&self, s: &PipelineSettings, with_text: bool) -> Result<PipelineEstimate> {
        let (dw, dh, df) = self.default_size();
        let (width, height) = (s.width.unwrap_or(dw), s.height.unwrap_or(dh));
        let frames = if self.family == Family::Wan { s.frames.unwrap_or(df) } else { 1 };
        if width < 16 || height < 16 || width > 16384 || height > 16384 || frames == 0 || frames > 4096 {
            return Err(Error::Config(format!("size {width}×{height}×{frames} is out of range (16 to 16384 pixels, 1 to 4096 frames)")));
        }
        if s.batch == 0 || s.images_per_prompt == 0 || s.batch.saturating_mul(s.images_per_prompt) > 4096 {
            return Err(Error::Config("batch and images per prompt must be at least 1 (and at most 4096 images)".into()));
        }
        let (dname, denoiser) = self.denoiser()?;
        let guidance = s.guidance.unwrap_or(match (self.family, denoiser) {
            (Family::Flux, Component::Flux(f)) if f.guidance_embeds => Guidance::Distilled,
            (Family::Flux, _) => Guidance::None,
            _ => Guidance::Cfg,
        });
        if guidance == Guidance::Distilled && !matches!(denoiser, Component::Flux(f) if f.guidance_embeds) {
            return Err(Error::Config("distilled guidance needs a transformer with `guidance_embeds` (Flux-dev)".into()));
        }
        let t5_len = s.text_len.unwrap_or(match self.family {
            Family::Sd3 => 256,
            _ => 512,
        });
        let denoise_text = match self.family {
            Family::Sd | Family::Sdxl => 77,
            // CLIP's 77 tokens and T5's joined on the sequence (`torch.cat([clip, t5], dim=-2)`)
            Family::Sd3 => 77 + t5_len,
            Family::Flux | Family::Wan => t5_len,
        };
        let images = s.batch.saturating_mul(s.images_per_prompt);
        // SD, SDXL, SD3 batch the two predictions (`torch.cat([latents] * 2)`); Flux's true CFG
        // and Wan call the transformer twice
        let batched_cfg = guidance == Guidance::Cfg && matches!(self.family, Family::Sd | Family::Sdxl | Family::Sd3);
        let denoise_batch = if batched_cfg { images * 2 } else { images };
        // The latents are `height // vae_scale_factor` with `vae_scale_factor = 2 **
        // (len(vae.config.block_out_channels) - 1)` (`StableDiffusionPipeline.__init__`, likewise
        // SDXL's, SD3's and Flux's); the denoisers' passes take pixels and divide by 8, so they
        // get pixels at a factor of 8 (exact: ⌊⌊8w/f⌋/8⌋ = ⌊w/f⌋). Wan's VAE is 8 in space.
        // Measured: a tiny SD pipeline with a 2-block VAE (`tests/data/diffusion_pipeline.jsonl`).
        let vae_scale = self.components.iter().find_map(|c| if let Component::Vae(v) = &c.1 { Some(v.scale()) } else { None }).unwrap_or(8).max(1);
        // with CFG the encoders run again for the negative prompt (`negative_prompt or ""`),
        // except SDXL's: `force_zeros_for_empty_prompt` (True in `__init__` and in SDXL's
        // `model_index.json`) makes the embeddings of an absent negative prompt zeros
        // (`zero_out_negative_prompt` in `StableDiffusionXLPipeline.encode_prompt`)
        let negative_encoded = guidance == Guidance::Cfg && self.family != Family::Sdxl;
        let mut runs: Vec<(String, Forward, u64, String)> = Vec::new();
        let mut weights: Vec<(String, Weights, String, u64)> = Vec::new();
        for (name, c) in &self.components {
            let dt = self.dtype_of(name, c.kind(), s);
            let (pass, batch, note) = match c.kind() {
                ComponentKind::TextEncoder => {
                    let len = if matches!(c, Component::Text(t) if t.max_len.is_some()) { 77 } else { t5_len };
                    let n = if negative_encoded { "prompt and negative prompt, one after the other" } else { "the prompt" };
                    (Pass::EncodeText { text_len: len }, s.batch, format!("{len} tokens; {n}"))
                }
                ComponentKind::Denoiser => {
                    let n = match (guidance, batched_cfg) {
                        (Guidance::Cfg, true) => "conditional and unconditional in one batch",
                        (Guidance::Cfg, false) => "conditional and unconditional forwards one after the other",
                        (Guidance::Distilled, _) => "guidance as an embedding: one forward",
                        (Guidance::None, _) => "one forward",
                    };
                    let (lw, lh) = (width.saturating_mul(8) / vae_scale, height.saturating_mul(8) / vae_scale);
                    (Pass::Denoise { width: lw, height: lh, frames, text_len: denoise_text }, denoise_batch, format!("each step; {n}"))
                }
                ComponentKind::Vae => (Pass::Decode { width, height, frames }, images, String::new()),
            };
            let (f, mut w, note, batch) = stage_forward(self.family, c, pass, dt, batch, s, note)?;
            // run more than once: the denoiser (every step), an encoder with CFG (the prompt,
            // then the negative prompt: `encode_prompt`)
            if c.kind() == ComponentKind::Denoiser || (c.kind() == ComponentKind::TextEncoder && negative_encoded) {
                w.repeat = w.buffers;
            }
            weights.push((name.clone(), w, dt.name().to_string(), f.params));
            if c.kind() != ComponentKind::TextEncoder || with_text {
                runs.push((name.clone(), f, batch, note));
            }
        }
        let _ = dname;
        // what `__call__` keeps beside the denoiser's forward and the decode (`context.rs`);
        // none for the decode alone (`with_text` off)
        let latent = self.components.iter().find_map(|c| match &c.1 {
            Component::Vae(v) => Some(v.latent_channels.saturating_mul(height / vae_scale).saturating_mul(width / vae_scale)),
            Component::WanVae(v) => Some(v.z_dim.saturating_mul(wan_latent_frames(frames)).saturating_mul(height / 8).saturating_mul(width / 8)),
            _ => None,
        });
        let ddt = super::component::dtype_of(self.dtype_of(dname, ComponentKind::Denoiser, s).compute());
        let ctx = match (latent, with_text) {
            (Some(l), true) => super::context::call_context(self.family, guidance, denoiser, l, images, denoise_text, ddt),
            _ => super::context::CallContext::default(),
        };
        // encoders run for the prompt, then all again for the negative prompt: with model
        // offload, the last encoder of the chain is still on the GPU during the others' second
        // run (accelerate `CpuOffload.pre_forward` offloads only `prev_module_hook`: the encoder
        // before it in `model_cpu_offload_seq`)
        let encoders: Vec<&String> = self.components.iter().filter(|c| c.1.kind() == ComponentKind::TextEncoder).map(|c| &c.0).collect();
        let last_encoder = match encoders.as_slice() {
            [_, .., last] if s.offload == Offload::Model && negative_encoded => Some(*last),
            _ => None,
        };
        let mut stages = Vec::new();
        for (name, f, batch, note) in &runs {
            let kind = self.components.iter().find(|c| &c.0 == name).map(|c| c.1.kind()).unwrap_or(ComponentKind::Denoiser);
            let stage = match kind {
                ComponentKind::TextEncoder => format!("encode:{name}"),
                ComponentKind::Denoiser => "denoise".to_string(),
                ComponentKind::Vae => "decode".to_string(),
            };
            let mut gpu = 0u64;
            let mut cpu = 0u64;
            let mut resident = Vec::new();
            for (wn, w, _, _) in &weights {
                let running = wn == name || (kind == ComponentKind::TextEncoder && Some(wn) == last_encoder);
                let on = s.offload.on_gpu(w, running);
                if on > 0 && (running || s.offload == Offload::None) {
                    resident.push(wn.clone());
                }
                gpu = gpu.saturating_add(on);
                cpu = cpu.saturating_add(s.offload.on_cpu(w, running));
            }
            let act = f.activations().saturating_add(match kind {
                ComponentKind::Denoiser => ctx.denoise,
                ComponentKind::Vae => ctx.decode,
                ComponentKind::TextEncoder => 0,
            });
            stages.push(StageReport { name: stage, component: name.clone(), peak: gpu.saturating_add(act), activations: act, gpu_weights: gpu, cpu_weights: cpu, resident, batch: *batch, note: note.clone() });
        }
        // between `enable_*_offload()` and the first forward (and again after
        // `maybe_free_model_hooks()`) every component is offloaded: model offload's
        // `self.to("cpu")` puts all of them in CPU RAM at once (measured: `cpu_bytes_before_call`)
        let idle_cpu = weights.iter().map(|(_, w, _, _)| s.offload.on_cpu(w, false)).fold(0, u64::saturating_add);
        let top = stages.iter().max_by_key(|st| st.peak).ok_or_else(|| Error::Config("the pipeline has no stages".into()))?;
        let components = weights
            .iter()
            .map(|(n, w, dt, p)| ComponentReport { name: n.clone(), class: self.components.iter().find(|c| &c.0 == n).map(|c| c.1.class().to_string()).unwrap_or_default(), params: *p, dtype: dt.clone(), weight_bytes: w.all + w.buffers })
            .collect();
        Ok(PipelineEstimate {
            peak_bytes: top.peak,
            peak_stage: top.name.clone(),
            params: weights.iter().map(|w| w.3).fold(0, u64::saturating_add),
            gpu_bytes: top.peak,
            cpu_ram_bytes: stages.iter().map(|st| st.cpu_weights).max().unwrap_or(0).max(idle_cpu),
            stages,
            components,
            width,
            height,
            frames,
            offload: s.offload.name().into(),
            guidance: guidance.name().into(),
        })
    }

}

/// One component's forward for its stage, in its dtype, with the VAE's tiling and slicing
/// and SDXL's fp32 upcast of an fp16 VAE.
pub fn stage_forward(family: Family, c: &Component, pass: Pass, dt: WeightDType, batch: u64, s: &PipelineSettings, note: String) -> Result<(Forward, Weights, String, u64)> {
    let mut precision = dt.compute();
    let mut note = note;
    if let (Component::Vae(v), Family::Sdxl, Precision::Fp16) = (c, family, precision) {
        if v.force_upcast {
            // `needs_upcasting = vae.dtype == float16 and vae.config.force_upcast`: `upcast_vae()`
            precision = Precision::Fp32;
            note = "fp16 VAE upcast to fp32 for the decode (force_upcast)".into();
        }
    }
    let opts = LowerOptions { training: false, precision, device: s.device, ..LowerOptions::default() };
    let mut batch = batch;
    let mut extra = 0u64;
    if let (Component::Vae(v), Pass::Decode { width, height, .. }) = (c, pass) {
        let scale = v.scale();
        let out_dt = super::component::dtype_of(precision);
        if s.vae_slicing && batch > 1 {
            // `decode`: `z.split(1)`, one `_decode` each, then `torch.cat(decoded_slices)`
            extra = extra.saturating_add(image_bytes(v.out_channels, height, width, out_dt).saturating_mul(batch - 1));
            note = join(note, &format!("sliced: {batch} decodes of 1"));
            batch = 1;
        }
        if let Some(tile) = s.vae_tiling {
            let tile = if tile == 0 { v.sample_size } else { tile };
            if let Some(t) = Tiling::of(height / scale, width / scale, tile, scale) {
                let mut f = tiled_decode(c, &t, scale, v.out_channels, opts, batch, out_dt, width, height)?;
                f.peak = f.peak.saturating_add(extra);
                note = join(note, &format!("tiled: {} tiles of up to {} px", t.rows.len() * t.cols.len(), t.rows[0] * scale));
                let w = weights_of(c, &f);
                return Ok((f, w, note, batch));
            }
        }
    }
    if let (Component::WanVae(v), Pass::Decode { width, height, frames }, Some(tile)) = (c, pass, s.vae_tiling) {
        if let Some(mut f) = super::wan_tiled::tiled_decode(v, frames, height, width, tile, batch, opts, super::component::dtype_of(precision))? {
            f.peak = f.peak.saturating_add(extra);
            note = join(note, &format!("tiled: tiles of {} px", if tile == 0 { super::wan_tiled::TILE_PX } else { tile }));
            let w = weights_of(c, &f);
            return Ok((f, w, note, batch));
        }
    }
    let mut g = c.graph_at(pass, opts, batch)?;
    let transient = quantise(&mut g, dt);
    let mut f = measure(&g, batch);
    if let (Component::WanVae(_), Pass::Decode { frames, .. }) = (c, pass) {
        note = join(note, &format!("{} chunks of one latent frame", wan_latent_frames(frames)));
    }
    if let (Component::Text(t), Pass::EncodeText { text_len }) = (c, pass) {
        if let Some((fixed, per_sample)) = t.bucket_bytes(text_len, super::component::dtype_of(precision).size()) {
            let persistent = f.param_bytes.saturating_add(f.buffer_bytes);
            f.peak = f.peak.max(persistent.saturating_add(fixed).saturating_add(per_sample.saturating_mul(batch)));
        }
    }
    f.peak = f.peak.saturating_add(extra).saturating_add(transient);
    if matches!(c, Component::Text(_)) {
        // diffusers' block-level grouping looks at the top module's children for a
        // `ModuleList`: a transformers encoder's are `text_model` (CLIP) or `shared` and
        // `encoder` (T5), so the whole encoder is one group, onloaded for its forward
        // (`_apply_group_offloading_block_level` in `hooks/group_offloading.py`)
        f.group_weights = f.param_bytes;
    }
    let w = weights_of(c, &f);
    Ok((f, w, note, batch))
}

/// `tiled_decode`: the decoder on each tile in turn while the tiles decoded before it are kept;
/// then the blend and `torch.cat` of the rows and of the image beside all tiles.
#[allow(clippy::too_many_arguments)]
fn tiled_decode(c: &Component, t: &Tiling, scale: u64, channels: u64, opts: LowerOptions, batch: u64, dt: DType, width: u64, height: u64) -> Result<Forward> {
    let mut sizes: Vec<((u64, u64), Forward)> = Vec::new();
    let latent_channels = if let Component::Vae(v) = c { v.latent_channels } else { 0 };
    let latent = image_bytes(latent_channels, height / scale, width / scale, dt).saturating_mul(batch);
    let mut kept = 0u64;
    let mut peak = 0u64;
    let mut first = None;
    for (r, col) in t.tiles() {
        let f = match sizes.iter().find(|(k, _)| *k == (r, col)) {
            Some((_, f)) => *f,
            None => {
                let g = c.graph(Pass::Decode { width: col * scale, height: r * scale, frames: 1 }, opts)?;
                let f = measure(&g, batch);
                sizes.push(((r, col), f));
                f
            }
        };
        first.get_or_insert(f);
        // a tile is a view of the caller's whole `z` (`z[:, :, i : i + tile, j : j + tile]`):
        // the latent beside the tile's graph is the whole one, not the tile's input
        let z_extra = latent.saturating_sub(image_bytes(latent_channels, r, col, dt).saturating_mul(batch));
        peak = peak.max(f.peak.saturating_add(kept).saturating_add(z_extra));
        kept = kept.saturating_add(image_bytes(channels, r * scale, col * scale, dt).saturating_mul(batch));
    }
    let mut f = first.unwrap_or_default();
    let persistent = f.param_bytes.saturating_add(f.buffer_bytes);
    // the rows' `torch.cat`s and the image's beside the kept tiles
    let image = image_bytes(channels, height, width, dt).saturating_mul(batch);
    f.peak = peak.max(persistent.saturating_add(kept).saturating_add(image.saturating_mul(2)));
    Ok(f)
}

/// A component's weights as the offload modes move them. Persistent buffers: SD3's
/// `pos_embed` (`PatchEmbed`: `persistent = True if pos_embed_max_size else False`); Wan's rotary
/// tables and CLIP's `position_ids` are registered with `persistent=False`.
fn weights_of(c: &Component, f: &Forward) -> Weights {
    let persistent = if matches!(c, Component::Sd3(_)) { f.buffer_bytes } else { 0 };
    Weights { all: f.param_bytes, buffers: f.buffer_bytes, leaf: f.seq_weights, group: f.group_weights, persistent, repeat: 0 }
}

fn join(a: String, b: &str) -> String {
    if a.is_empty() { b.to_string() } else { format!("{a}; {b}") }
}

/// Parameters of a component (its pass at a small size).
pub fn component_params(c: &Component) -> Result<u64> {
    let pass = c.default_pass(64, 64, 1, 8);
    Ok(c.graph(pass, LowerOptions { training: false, precision: Precision::Bf16, ..LowerOptions::default() })?.param_numel())
}

/// Stores the weights of a graph built in bf16 as `dt` does; returns the transient the largest
/// weight needs in bf16 while its layer runs (the per-layer cast or dequantisation).
fn quantise(g: &mut Graph, dt: WeightDType) -> u64 {
    let mut largest = 0u64;
    if !matches!(dt, WeightDType::Fp8 | WeightDType::Nf4) {
        return 0;
    }
    for i in 0..g.params.len() {
        let v = g.params[i];
        let shape = g.value(v).shape.0.clone();
        let numel: u64 = shape.iter().product();
        let s = g.storage_of(v) as usize;
        let rows = shape.first().copied().unwrap_or(1);
        // nf4: `Linear4bit` replaces `nn.Linear` only (rank-2 weights); fp8 casting covers
        // linear and conv weights (rank >= 2)
        let eligible = if dt == WeightDType::Nf4 { shape.len() == 2 } else { shape.len() >= 2 };
        if !eligible || g.storages[s].class != StorageClass::Param {
            continue;
        }
        let bytes = match dt {
            WeightDType::Fp8 => numel,
            _ => crate::layer::bnb::stored_bytes(BaseFormat::Nf4, numel, rows, false).unwrap_or(numel),
        };
        g.storages[s].bytes = Lin { fixed: bytes, per_sample: 0 };
        largest = largest.max(numel.saturating_mul(DType::Bf16.size()));
    }
    largest
}
