//! One pipeline component read from its `config.json`: which class it is, its forward graph
//! for one pass (denoise, text encoding, VAE encode or decode) and what that forward needs.

use super::cfg::Cfg;
use super::dit::{FluxConfig, Sd3Config};
use super::text::{self, TextEncoder};
use super::unet::UnetConfig;
use super::vae::VaeConfig;
use super::wan::WanConfig;
use super::wan_vae::WanVaeConfig;
use crate::config::{Device, Precision};
use crate::error::{Error, Result};
use crate::graph::{Graph, StorageClass};
use crate::lower::{Builder, LowerOptions};
use crate::memory::simulate::{OptimizerCost, Plan};
use crate::units::DType;
use serde_json::{Map, Value};

/// A pipeline component.
#[derive(Debug, Clone, PartialEq)]
pub enum Component {
    Vae(VaeConfig),
    WanVae(WanVaeConfig),
    Unet(UnetConfig),
    Flux(FluxConfig),
    Sd3(Sd3Config),
    Wan(WanConfig),
    Text(TextEncoder),
}

/// What a component does in a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentKind {
    TextEncoder,
    Denoiser,
    Vae,
}

/// One forward of a component. Sizes are the pipeline's: pixels for images and video.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The denoiser on the latent of a `width × height` (× `frames`) output, `text_len` tokens.
    Denoise { width: u64, height: u64, frames: u64, text_len: u64 },
    /// A text encoder on `text_len` tokens.
    EncodeText { text_len: u64 },
    /// The VAE decoding the latent of a `width × height` (× `frames`) output.
    Decode { width: u64, height: u64, frames: u64 },
    /// The VAE encoding a `width × height` (× `frames`) input (training on uncached latents).
    EncodeImage { width: u64, height: u64, frames: u64 },
}

/// What one simulated forward needs, per the batch it was run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Forward {
    /// Parameter elements (exact: the modules' `parameters()`).
    pub params: u64,
    /// Parameters' bytes as stored.
    pub param_bytes: u64,
    /// Persistent buffers' bytes (SD3's position table, rotary tables, position ids).
    pub buffer_bytes: u64,
    /// Peak allocated over the forward with every weight resident.
    pub peak: u64,
    /// What sequential offload's onloaded weights add to the activation peak: the largest,
    /// over the ops, of the bytes live beside the weights plus the weights that op reads (a
    /// leaf module's), less the activation peak.
    pub seq_weights: u64,
    /// The same for block-level group offload: the weights outside any block (`layer` 0) plus
    /// the op's block's (its `layer`).
    pub group_weights: u64,
}

impl Forward {
    /// The peak without the weights: inputs, activations, temporaries.
    pub fn activations(&self) -> u64 {
        self.peak.saturating_sub(self.param_bytes).saturating_sub(self.buffer_bytes)
    }
}

impl Component {
    /// Reads a component from its `config.json` object: a diffusers config (`_class_name`) or
    /// a transformers text encoder's (`architectures`).
    pub fn from_config(obj: &Map<String, Value>) -> Result<Component> {
        let class = match (obj.get("_class_name"), obj.get("architectures")) {
            (Some(Value::String(c)), _) => c.clone(),
            (_, Some(Value::Array(a))) => a.first().and_then(|v| v.as_str()).unwrap_or_default().to_string(),
            _ => return Err(Error::Import("a component config needs `_class_name` (diffusers) or `architectures` (transformers)".into())),
        };
        let c = Cfg::new(obj, &class);
        Ok(match class.as_str() {
            "AutoencoderKL" => Component::Vae(VaeConfig::from_cfg(&c)?),
            "AutoencoderKLWan" => Component::WanVae(WanVaeConfig::from_cfg(&c)?),
            "UNet2DConditionModel" => Component::Unet(UnetConfig::from_cfg(&c)?),
            "FluxTransformer2DModel" => Component::Flux(FluxConfig::from_cfg(&c)?),
            "SD3Transformer2DModel" => Component::Sd3(Sd3Config::from_cfg(&c)?),
            "WanTransformer3DModel" => Component::Wan(WanConfig::from_cfg(&c)?),
            "CLIPTextModel" => Component::Text(text::clip(&c, false)?),
            "CLIPTextModelWithProjection" => Component::Text(text::clip(&c, true)?),
            "T5EncoderModel" => Component::Text(text::t5(obj, false)?),
            "UMT5EncoderModel" => Component::Text(text::t5(obj, true)?),
            other => {
                return Err(Error::Import(format!(
                    "component class `{other}` is not supported (AutoencoderKL, AutoencoderKLWan, UNet2DConditionModel, FluxTransformer2DModel, SD3Transformer2DModel, WanTransformer3DModel, CLIPTextModel, CLIPTextModelWithProjection, T5EncoderModel, UMT5EncoderModel)"
                )))
            }
        })
    }

    pub fn from_json(text: &str) -> Result<Component> {
        let v: Value = serde_json::from_str(text).map_err(|e| Error::Import(format!("not valid JSON: {e}")))?;
        let obj = v.as_object().ok_or_else(|| Error::Import("expected a JSON object".into()))?;
        Component::from_config(obj)
    }

    pub fn kind(&self) -> ComponentKind {
        match self {
            Component::Vae(_) | Component::WanVae(_) => ComponentKind::Vae,
            Component::Text(_) => ComponentKind::TextEncoder,
            _ => ComponentKind::Denoiser,
        }
    }

    /// The class name (`_class_name`).
    pub fn class(&self) -> &str {
        match self {
            Component::Vae(_) => "AutoencoderKL",
            Component::WanVae(_) => "AutoencoderKLWan",
            Component::Unet(_) => "UNet2DConditionModel",
            Component::Flux(_) => "FluxTransformer2DModel",
            Component::Sd3(_) => "SD3Transformer2DModel",
            Component::Wan(_) => "WanTransformer3DModel",
            Component::Text(t) => &t.class,
        }
    }

    /// The pass this component runs by default in a pipeline of the given sizes.
    pub fn default_pass(&self, width: u64, height: u64, frames: u64, text_len: u64) -> Pass {
        match self.kind() {
            ComponentKind::Vae => Pass::Decode { width, height, frames },
            ComponentKind::TextEncoder => Pass::EncodeText { text_len },
            ComponentKind::Denoiser => Pass::Denoise { width, height, frames, text_len },
        }
    }

    /// Builds the forward graph of `pass` (`training`: with autograd, for LoRA steps).
    pub fn graph(&self, pass: Pass, opts: LowerOptions) -> Result<Graph> {
        if let Component::Text(t) = self {
            let Pass::EncodeText { text_len } = pass else { return Err(self.wrong_pass(pass)) };
            let len = t.max_len.map_or(text_len, |m| m.min(text_len.max(1)));
            let r = crate::resolve::resolve(&t.spec, Some(len), opts)?;
            return Ok(r.graph);
        }
        let mut b = Builder::new(opts);
        self.lower_into(&mut b, pass)?;
        Ok(b.g)
    }

    /// Lowers `pass` (not of a text encoder) into `b`; returns the output. Parameters are
    /// frozen when `b`'s fine-tuning adds adapters (LoRA), and linears are named as diffusers'.
    pub fn lower_into(&self, b: &mut Builder, pass: Pass) -> Result<crate::graph::ValueId> {
        let layer_err = |e: String| Error::Config(format!("{}: {e}", self.class()));
        b.style = crate::finetune::NameStyle::Diffusers;
        b.frozen = b.opts.finetune.has_adapters();
        let b = &mut *b;
        let out = match (self, pass) {
            (Component::Vae(v), Pass::Decode { width, height, .. }) => {
                let s = v.scale();
                v.decode(b, (height / s).max(1), (width / s).max(1))
            }
            (Component::Vae(v), Pass::EncodeImage { width, height, .. }) => v.encode(b, height, width),
            (Component::WanVae(v), Pass::Decode { width, height, frames }) => v.decode(b, frames, height, width),
            (Component::WanVae(v), Pass::EncodeImage { width, height, frames }) => v.encode(b, frames, height, width),
            (Component::Unet(u), Pass::Denoise { width, height, text_len, .. }) => u.forward(b, (height / 8).max(1), (width / 8).max(1), text_len),
            (Component::Flux(f), Pass::Denoise { width, height, text_len, .. }) => f.forward(b, (height / 8).max(1), (width / 8).max(1), text_len),
            (Component::Sd3(s), Pass::Denoise { width, height, text_len, .. }) => s.forward(b, (height / 8).max(1), (width / 8).max(1), text_len),
            (Component::Wan(w), Pass::Denoise { width, height, frames, text_len }) => {
                w.forward(b, wan_latent_frames(frames), (height / 8).max(1), (width / 8).max(1), text_len)
            }
            _ => return Err(self.wrong_pass(pass)),
        }
        .map_err(layer_err)?;
        Ok(out)
    }

    fn wrong_pass(&self, pass: Pass) -> Error {
        Error::Config(format!("{} does not run {pass:?}", self.class()))
    }

    /// Simulates one inference forward (`torch.no_grad()`) of `pass` at `batch` samples with
    /// weights in `precision` on `device`.
    pub fn forward(&self, pass: Pass, precision: Precision, device: Device, batch: u64) -> Result<Forward> {
        let opts = LowerOptions { training: false, precision, device, ..LowerOptions::default() };
        let g = self.graph_at(pass, opts, batch)?;
        Ok(measure(&g, batch))
    }

    /// [`Component::graph`] for a pass at `batch`: the Wan VAE's decode graph depends on whether
    /// the batch is one (`WanVaeConfig::decode_at`); the others' do not.
    pub fn graph_at(&self, pass: Pass, opts: LowerOptions, batch: u64) -> Result<Graph> {
        match (self, pass) {
            (Component::WanVae(v), Pass::Decode { width, height, frames }) => {
                let mut b = Builder::new(opts);
                b.style = crate::finetune::NameStyle::Diffusers;
                v.decode_at(&mut b, frames, height, width, batch).map_err(|e| Error::Config(format!("{}: {e}", self.class())))?;
                Ok(b.g)
            }
            _ => self.graph(pass, opts),
        }
    }
}

pub use super::wan_vae::wan_latent_frames;

/// Peak and weight groups of an inference graph at `batch`.
pub fn measure(g: &Graph, batch: u64) -> Forward {
    let plan = Plan::new(g, false);
    let r = plan.simulate(g, batch.max(1), OptimizerCost::default(), true, None);
    let param_bytes = g.param_bytes();
    let buffer_bytes = g.buffer_bytes(batch.max(1));
    let is_param = |v: u32| g.storages[g.storage_of(v) as usize].class == StorageClass::Param;
    let bytes_of = |v: u32| g.storages[g.storage_of(v) as usize].bytes.fixed;
    // what each op reads (a leaf module's weights: sequential offload's onload) and each
    // layer's weights (a block: block-level group offload's onload; layer 0 the rest)
    let mut leaf_of = vec![0u64; g.ops.len()];
    let mut by_layer: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for (o, op) in g.ops.iter().enumerate() {
        let mut here = std::collections::HashSet::new();
        for &i in &op.inputs {
            if is_param(i) && here.insert(g.storage_of(i)) {
                leaf_of[o] = leaf_of[o].saturating_add(bytes_of(i));
                if seen.insert(g.storage_of(i)) {
                    *by_layer.entry(op.layer).or_default() += bytes_of(i);
                }
            }
        }
    }
    let outside = by_layer.get(&0).copied().unwrap_or(0);
    // The offload hooks onload weights for a module's forward and offload them after it
    // (accelerate `AlignDevicesHook.pre_forward` / `post_forward` per leaf module; diffusers
    // `GroupOffloadingHook` per block, the unmatched group for the whole forward), so the
    // peak is the largest, over the ops, of what is live then beside the weights plus the
    // weights onloaded for that op — not the activation peak plus the largest onload.
    // Measured: `tests/data/diffusion_pipeline.jsonl`.
    let (mut seq_peak, mut group_peak) = (0u64, 0u64);
    for pt in &r.timeline {
        let Some(op) = g.ops.get(pt.op as usize) else { continue };
        let other = pt.bytes.saturating_sub(param_bytes).saturating_sub(buffer_bytes);
        seq_peak = seq_peak.max(other.saturating_add(leaf_of[pt.op as usize]));
        let block = if op.layer == 0 { 0 } else { by_layer.get(&op.layer).copied().unwrap_or(0) };
        group_peak = group_peak.max(other.saturating_add(outside).saturating_add(block));
    }
    let activations = r.peak.saturating_sub(param_bytes).saturating_sub(buffer_bytes);
    Forward {
        params: g.param_numel(),
        param_bytes,
        buffer_bytes,
        peak: r.peak,
        seq_weights: seq_peak.saturating_sub(activations),
        group_weights: group_peak.saturating_sub(activations),
    }
}

/// Bytes per element of a weight dtype name's storage (for summaries).
pub fn dtype_of(precision: Precision) -> DType {
    match precision {
        Precision::Fp16 | Precision::AmpFp16 => DType::F16,
        Precision::Bf16 | Precision::AmpBf16 => DType::Bf16,
        Precision::Fp32 => DType::F32,
    }
}
