//! The image/video pipeline panel's state (issue 27): a built-in diffusers pipeline and the
//! settings people change, as the core's types (`vramcalc_core::diffusion`). Plain data, tested
//! natively; share links carry it (`crate::pipeline::link`).

use vramcalc_core::diffusion::full_train::Ema;
use vramcalc_core::diffusion::kohya::Fp8Base;
use vramcalc_core::config::OptimizerKind;
use serde::{Deserialize, Serialize};
use vramcalc_core::diffusion::{Guidance, Offload, WeightDType};
use vramcalc_core::hub::HubRef;

/// `--mode infer|decode|train`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PipeMode {
    /// The whole pipeline: text encoding, the denoising loop, the VAE decode.
    #[default]
    Infer,
    /// The VAE decode alone.
    Decode,
    /// A LoRA training step of the denoiser on cached latents and text embeddings.
    Train,
}

impl PipeMode {
    pub const ALL: [PipeMode; 3] = [PipeMode::Infer, PipeMode::Decode, PipeMode::Train];
    pub fn name(self) -> &'static str {
        match self {
            PipeMode::Infer => "infer",
            PipeMode::Decode => "decode",
            PipeMode::Train => "train",
        }
    }
    pub fn parse(s: &str) -> Option<PipeMode> {
        PipeMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Whose script trains the LoRA (train mode): diffusers' `train_dreambooth_lora*.py`, or
/// kohya-ss/sd-scripts' `train_network.py` / `sdxl_train_network.py` (UNets; core
/// `diffusion::kohya_job`, as `vramcalc estimate --trainer kohya`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Trainer {
    #[default]
    Diffusers,
    Kohya,
}

impl Trainer {
    pub const ALL: [Trainer; 2] = [Trainer::Diffusers, Trainer::Kohya];
    pub fn name(self) -> &'static str {
        match self {
            Trainer::Diffusers => "diffusers",
            Trainer::Kohya => "kohya",
        }
    }
    pub fn parse(s: &str) -> Option<Trainer> {
        Trainer::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// What the diffusers trainer trains (train mode): a LoRA of the denoiser (its
/// `train_dreambooth_lora*.py` scripts), or the whole denoiser (`train_dreambooth.py`,
/// `train_text_to_image*.py`, `train_dreambooth_flux.py`; core `diffusion::full_train`, as
/// `vramcalc estimate --mode train` without `--finetune lora`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrainMethod {
    #[default]
    Lora,
    Full,
}

impl TrainMethod {
    pub const ALL: [TrainMethod; 2] = [TrainMethod::Lora, TrainMethod::Full];
    pub fn name(self) -> &'static str {
        match self {
            TrainMethod::Lora => "lora",
            TrainMethod::Full => "full",
        }
    }
    pub fn parse(s: &str) -> Option<TrainMethod> {
        TrainMethod::ALL.into_iter().find(|t| t.name() == s.trim())
    }
}

/// Full fine-tuning's own flags (with [`TrainMethod::Full`]), beside the shared ones (size,
/// batch, the mixed precision as `dtype`, checkpointing, optimizer). Defaults: the CLI's (off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullOpts {
    /// `--use-ema` (GPU), `--use-ema --offload-ema` (CPU), or none.
    pub ema: Ema,
    /// `--set-grads-to-none`.
    pub set_grads_to_none: bool,
}

impl Default for FullOpts {
    fn default() -> Self {
        FullOpts { ema: Ema::None, set_grads_to_none: false }
    }
}

/// kohya's own flags that change memory (with [`Trainer::Kohya`]), beside those it shares with
/// the panel's other settings: `--mixed_precision` is `dtype`, `--network_dim` `lora_r`,
/// `--gradient_checkpointing` and `--optimizer_type` theirs. Defaults are sd-scripts' (flags off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KohyaOpts {
    /// `--full_bf16` / `--full_fp16` (whichever the mixed precision is).
    pub full_half: bool,
    /// `--network_args conv_dim=N` (0: none).
    pub conv_dim: u32,
    pub cache_latents: bool,
    /// `--cache_text_encoder_outputs` (SDXL).
    pub cache_te: bool,
    /// `--network_train_unet_only` (off, kohya's default: the text encoders' LoRA trains too).
    pub unet_only: bool,
    /// `--fp8_base` / `--fp8_base_unet`: the frozen weights stored in fp8.
    pub fp8: Fp8Base,
}

impl Default for KohyaOpts {
    fn default() -> Self {
        KohyaOpts { full_half: false, conv_dim: 0, cache_latents: false, cache_te: false, unet_only: false, fp8: Fp8Base::Off }
    }
}

/// A diffusers repository read from the hub by id: its `model_index.json` and each model
/// component's `config.json`, as fetched (`crate::pipeline::hub`), so the saved work reopens it
/// without the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HubPipeline {
    pub hub: HubRef,
    pub index: String,
    /// `(component, its config.json)`.
    pub configs: Vec<(String, String)>,
}

/// Everything the panel sets. `None` sizes are the pipeline's defaults. Saved (LocalStorage,
/// undo) as its share link and the hub files ([`SavedPipeline`]), so saved work and links read
/// the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "SavedPipeline", from = "SavedPipeline")]
pub struct PipelineState {
    /// The built-in pipeline (the last one chosen, while `hub` is set).
    pub preset: String,
    /// A pipeline read from the hub, instead of the preset.
    pub hub: Option<HubPipeline>,
    pub mode: PipeMode,
    pub width: Option<u64>,
    pub height: Option<u64>,
    pub frames: Option<u64>,
    pub batch: u64,
    pub images_per_prompt: u64,
    pub guidance: Option<Guidance>,
    /// Every component's dtype (`None`: the pipeline's), unless `component_dtypes` names it.
    pub dtype: Option<WeightDType>,
    pub component_dtypes: Vec<(String, WeightDType)>,
    pub offload: Offload,
    /// `vae.enable_tiling()` (0: the VAE's own tile size).
    pub vae_tiling: Option<u64>,
    pub vae_slicing: bool,
    pub lora_r: u32,
    pub checkpointing: bool,
    pub optimizer: OptimizerKind,
    /// Training on cached latents and text embeddings (the VAE and text encoders not loaded);
    /// off: they stay loaded, frozen, beside the step.
    pub cached: bool,
    pub trainer: Trainer,
    pub kohya: KohyaOpts,
    /// The diffusers trainer's method, and full fine-tuning's flags.
    pub method: TrainMethod,
    pub full: FullOpts,
    /// The GPU the answer is checked against (`vramcalc_core::GPUS` id).
    pub gpu: String,
}

impl Default for PipelineState {
    fn default() -> Self {
        PipelineState {
            preset: "flux.1-dev".into(),
            hub: None,
            mode: PipeMode::Infer,
            width: None,
            height: None,
            frames: None,
            batch: 1,
            images_per_prompt: 1,
            guidance: None,
            dtype: None,
            component_dtypes: Vec::new(),
            offload: Offload::None,
            vae_tiling: None,
            vae_slicing: false,
            lora_r: 16,
            checkpointing: true,
            optimizer: OptimizerKind::Adamw,
            cached: true,
            trainer: Trainer::Diffusers,
            kohya: KohyaOpts::default(),
            method: TrainMethod::Lora,
            full: FullOpts::default(),
            gpu: "rtx-4090".into(),
        }
    }
}

impl PipelineState {
    pub fn is_default(&self) -> bool {
        *self == PipelineState::default()
    }

    /// The names of the settings that differ between `self` and `other` (undo coalesces
    /// successive edits of the same ones: typing in one field is one step).
    pub fn changed(&self, other: &PipelineState) -> Vec<&'static str> {
        let (a, b) = (self, other);
        [
            ("pipeline", a.preset != b.preset || a.hub != b.hub),
            ("mode", a.mode != b.mode),
            ("width", a.width != b.width),
            ("height", a.height != b.height),
            ("frames", a.frames != b.frames),
            ("batch", a.batch != b.batch),
            ("images-per-prompt", a.images_per_prompt != b.images_per_prompt),
            ("guidance", a.guidance != b.guidance),
            ("dtype", a.dtype != b.dtype || a.component_dtypes != b.component_dtypes),
            ("offload", a.offload != b.offload),
            ("vae-tiling", a.vae_tiling != b.vae_tiling),
            ("vae-slicing", a.vae_slicing != b.vae_slicing),
            ("lora-r", a.lora_r != b.lora_r),
            ("checkpointing", a.checkpointing != b.checkpointing),
            ("optimizer", a.optimizer != b.optimizer),
            ("cached", a.cached != b.cached),
            ("trainer", a.trainer != b.trainer),
            ("full-half", a.kohya.full_half != b.kohya.full_half),
            ("conv-dim", a.kohya.conv_dim != b.kohya.conv_dim),
            ("cache-latents", a.kohya.cache_latents != b.kohya.cache_latents),
            ("cache-te", a.kohya.cache_te != b.kohya.cache_te),
            ("unet-only", a.kohya.unet_only != b.kohya.unet_only),
            ("fp8-base", a.kohya.fp8 != b.kohya.fp8),
            ("method", a.method != b.method),
            ("ema", a.full.ema != b.full.ema),
            ("set-grads-to-none", a.full.set_grads_to_none != b.full.set_grads_to_none),
            ("gpu", a.gpu != b.gpu),
        ]
        .into_iter()
        .filter_map(|(n, d)| d.then_some(n))
        .collect()
    }
}

/// [`PipelineState`] as saved work holds it: its share link (`pipe.p=…`, `crate::pipeline::link`)
/// and, for a hub pipeline, the files read from the hub. Work that no longer reads opens the
/// default pipeline (as an unreadable save opens the default state).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedPipeline {
    pub link: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<HubPipeline>,
}

impl From<PipelineState> for SavedPipeline {
    fn from(s: PipelineState) -> SavedPipeline {
        SavedPipeline { link: crate::pipeline::link::to_fragment(&s), hub: s.hub }
    }
}

impl From<SavedPipeline> for PipelineState {
    fn from(s: SavedPipeline) -> PipelineState {
        crate::pipeline::link::from_saved(&s.link, s.hub).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Action, Model, Saved, State};
    use std::rc::Rc;
    use yew::Reducible;

    fn reduce(s: State, a: Action) -> State {
        (*Rc::new(s).reduce(a)).clone()
    }

    fn set(s: State, f: impl FnOnce(&mut PipelineState)) -> State {
        let mut p = s.model.pipeline.clone();
        f(&mut p);
        reduce(s, Action::SetPipeline(p))
    }

    #[test]
    fn pipeline_edits_are_undo_steps_and_typing_in_one_field_is_one() {
        let s = State::default();
        let s = set(s, |p| p.width = Some(7));
        let s = set(s, |p| p.width = Some(768)); // the same field: the same step
        let s = set(s, |p| p.offload = Offload::Model);
        let s = set(s, |p| p.component_dtypes = vec![("transformer".into(), WeightDType::Fp8)]);
        let s = reduce(s, Action::Undo);
        assert_eq!((s.model.pipeline.offload, s.model.pipeline.component_dtypes.len()), (Offload::Model, 0));
        let s = reduce(s, Action::Undo);
        assert_eq!((s.model.pipeline.width, s.model.pipeline.offload), (Some(768), Offload::None));
        let s = reduce(s, Action::Undo);
        assert!(s.model.pipeline.is_default());
        assert!(!s.can_undo());
        let s = reduce(reduce(s, Action::Redo), Action::Redo);
        assert_eq!((s.model.pipeline.width, s.model.pipeline.offload), (Some(768), Offload::Model));
        // a PyTorch model loaded meanwhile keeps the pipeline's settings; undoing it too
        let s = reduce(s, Action::LoadPreset(Model::preset("vgg16").unwrap()));
        assert_eq!(s.model.pipeline.offload, Offload::Model);
        let s = reduce(s, Action::Undo);
        assert_eq!((s.model.preset.as_deref(), s.model.pipeline.offload), (Some("resnet50"), Offload::Model));
    }

    #[test]
    fn kohya_settings_are_undo_steps() {
        let s = set(State::default(), |p| (p.mode, p.trainer) = (PipeMode::Train, Trainer::Kohya));
        let s = set(s, |p| p.kohya.cache_latents = true);
        let s = set(s, |p| p.kohya.conv_dim = 4);
        let s = set(s, |p| p.kohya.conv_dim = 8); // the same field: the same step
        let s = reduce(s, Action::Undo);
        assert_eq!((s.model.pipeline.kohya.cache_latents, s.model.pipeline.kohya.conv_dim), (true, 0));
        let s = reduce(s, Action::Undo);
        assert_eq!((s.model.pipeline.trainer, s.model.pipeline.kohya), (Trainer::Kohya, KohyaOpts::default()));
        let s = reduce(reduce(s, Action::Redo), Action::Redo);
        assert_eq!((s.model.pipeline.kohya.cache_latents, s.model.pipeline.kohya.conv_dim), (true, 8));
    }

    #[test]
    fn full_fine_tuning_settings_are_undo_steps() {
        let s = set(State::default(), |p| (p.preset, p.mode) = ("sd-1.5".into(), PipeMode::Train));
        let s = set(s, |p| p.method = TrainMethod::Full);
        let s = set(s, |p| p.full.ema = Ema::Gpu);
        let s = set(s, |p| p.full.ema = Ema::Cpu); // the same field: the same step
        let s = set(s, |p| p.full.set_grads_to_none = true);
        let s = reduce(s, Action::Undo);
        assert_eq!(s.model.pipeline.full, FullOpts { ema: Ema::Cpu, set_grads_to_none: false });
        let s = reduce(s, Action::Undo);
        assert_eq!((s.model.pipeline.method, s.model.pipeline.full), (TrainMethod::Full, FullOpts::default()));
        let s = reduce(s, Action::Undo);
        assert_eq!(s.model.pipeline.method, TrainMethod::Lora);
        let s = reduce(reduce(reduce(s, Action::Redo), Action::Redo), Action::Redo);
        assert_eq!((s.model.pipeline.method, s.model.pipeline.full), (TrainMethod::Full, FullOpts { ema: Ema::Cpu, set_grads_to_none: true }));
    }

    #[test]
    fn saved_work_keeps_the_pipeline_and_hub_files() {
        let (_, repo, index, comps) = vramcalc_core::diffusion::presets::files("sd-1.5").unwrap();
        let hub = HubPipeline { hub: HubRef::parse(repo).unwrap(), index: index.to_string(), configs: comps.iter().map(|c| (c.0.to_string(), c.1.to_string())).collect() };
        for p in [
            PipelineState { preset: "wan2.1-t2v-1.3b".into(), frames: Some(49), offload: Offload::Group, vae_slicing: true, batch: 2, ..PipelineState::default() },
            crate::pipeline::with_hub(&PipelineState { mode: PipeMode::Train, ..PipelineState::default() }, hub.clone()),
            PipelineState { mode: PipeMode::Train, cached: false, lora_r: 64, optimizer: OptimizerKind::Adam8bit, ..crate::pipeline::with_hub(&PipelineState::default(), hub.clone()) },
            PipelineState { preset: "sdxl".into(), mode: PipeMode::Train, trainer: Trainer::Kohya, kohya: KohyaOpts { cache_latents: true, conv_dim: 4, ..KohyaOpts::default() }, ..PipelineState::default() },
            PipelineState { preset: "sd-1.5".into(), mode: PipeMode::Train, method: TrainMethod::Full, batch: 2, full: FullOpts { ema: Ema::Cpu, set_grads_to_none: true }, ..PipelineState::default() },
        ] {
            let s = set(State::default(), |x| *x = p.clone());
            let text = serde_json::to_string(&s.saved()).unwrap();
            let back = State::from_saved(serde_json::from_str::<Saved>(&text).ok());
            assert_eq!(back.model.pipeline, p, "{text}");
            assert_eq!(back.model, s.model);
        }
        // the default pipeline is not written; work saved before it existed reads the default
        let text = serde_json::to_string(&State::default().saved()).unwrap();
        assert!(!text.contains("\"pipeline\""), "{text}");
        assert!(State::from_saved(serde_json::from_str(&text).ok()).model.pipeline.is_default());
        // an unreadable pipeline opens the default one and keeps the rest of the work
        let mut v = serde_json::to_value(set(State::default(), |p| p.batch = 3).saved()).unwrap();
        v["model"]["pipeline"]["link"] = "pipe.p=dalle".into();
        v["model"]["config"]["batch"] = 7.into();
        let s = State::from_saved(serde_json::from_value(v).ok());
        assert_eq!((s.model.pipeline.is_default(), s.model.config.batch), (true, 7));
    }

    #[test]
    fn links_written_before_open_the_same_settings() {
        use crate::pipeline::link::{from_fragment, to_fragment};
        for link in ["pipe.p=flux.1-dev", "pipe.p=sdxl,m=decode,w=2048,h=1536,b=4,n=2,d=bf16,o=sequential,t=0,s=true,u=rtx-3060,c.vae=fp32,c.unet=fp8", "pipe.p=wan2.1-t2v-14b,m=train,f=49,r=64,k=false,x=adam8bit", "pipe.p=wan2.1-t2v-1.3b,f=49,o=group",
            // kohya's trainer (2026-12-01; `uo` defaults to kohya's own default, off, since the
            // text encoders' LoRA is modelled — before any kohya link was published)
            "pipe.p=sdxl,m=train,w=768,b=2,d=fp16,r=32,k=false,x=adam8bit,tr=kohya,fh=true,cd=8,cl=true,ct=true,uo=true",
            "pipe.p=sd-1.5,m=train,tr=kohya,f8=all", "pipe.p=sdxl,m=train,tr=kohya,uo=true,f8=unet",
            // the diffusers trainer's full fine-tuning (2026-12-01)
            "pipe.p=sd-1.5,m=train,mt=full", "pipe.p=sd-1.5,m=train,b=4,d=fp16,k=false,x=adam8bit,mt=full,em=offload,gn=true", "pipe.p=sdxl,m=train,mt=full,em=gpu"] {
            let s = from_fragment(link).unwrap_or_else(|e| panic!("{link}: {e}"));
            assert_eq!(to_fragment(&s), link);
            let saved = SavedPipeline::from(s.clone());
            assert_eq!(PipelineState::from(saved), s);
        }
    }
}
