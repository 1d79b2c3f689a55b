//! The pipeline panel's share links: `#pipe.p=flux.1-dev,w=768,o=model,…`, every setting that
//! differs from its default as one `key=value` (values never contain `,` or `=`). A link names
//! a built-in pipeline (`p=`) or a hub repository (`h=owner/name`, fetched again when opened).
//! Reading it refuses an unknown key or a bad value by name.

use super::{spec, with};
use crate::state::pipeline::PipelineState;

/// The prefix that tells this link from the PyTorch workload's (`v1.…`).
pub const PREFIX: &str = "pipe.";

/// `(key, field id)`.
const KEYS: &[(&str, &str)] = &[
    ("m", "mode"),
    ("w", "width"),
    ("h", "height"),
    ("f", "frames"),
    ("b", "batch"),
    ("n", "images-per-prompt"),
    ("g", "guidance"),
    ("d", "dtype"),
    ("o", "offload"),
    ("t", "vae-tiling"),
    ("s", "vae-slicing"),
    ("r", "lora-r"),
    ("k", "checkpointing"),
    ("x", "optimizer"),
    ("l", "cached"),
    ("u", "gpu"),
    // kohya's trainer (`--mixed_precision` is `d`, `--network_dim` `r`)
    ("tr", "trainer"),
    ("fh", "full-half"),
    ("cd", "conv-dim"),
    ("cl", "cache-latents"),
    ("ct", "cache-te"),
    ("uo", "unet-only"),
    ("f8", "fp8-base"),
    // the diffusers trainer's full fine-tuning (the mixed precision is `d`)
    ("mt", "method"),
    ("em", "ema"),
    ("gn", "set-grads-to-none"),
];

fn values(s: &PipelineState) -> Vec<(&'static str, String)> {
    let o = |v: Option<String>| v.unwrap_or_else(|| "default".into());
    vec![
        ("m", s.mode.name().to_string()),
        ("w", s.width.map_or(String::new(), |v| v.to_string())),
        ("h", s.height.map_or(String::new(), |v| v.to_string())),
        ("f", s.frames.map_or(String::new(), |v| v.to_string())),
        ("b", s.batch.to_string()),
        ("n", s.images_per_prompt.to_string()),
        ("g", o(s.guidance.map(|g| g.name().to_string()))),
        ("d", o(s.dtype.map(|d| d.name().to_string()))),
        ("o", s.offload.name().to_string()),
        ("t", s.vae_tiling.map_or(String::new(), |v| v.to_string())),
        ("s", s.vae_slicing.to_string()),
        ("r", s.lora_r.to_string()),
        ("k", s.checkpointing.to_string()),
        ("x", s.optimizer.name().to_string()),
        ("l", s.cached.to_string()),
        ("u", s.gpu.clone()),
        ("tr", s.trainer.name().to_string()),
        ("fh", s.kohya.full_half.to_string()),
        ("cd", s.kohya.conv_dim.to_string()),
        ("cl", s.kohya.cache_latents.to_string()),
        ("ct", s.kohya.cache_te.to_string()),
        ("uo", s.kohya.unet_only.to_string()),
        ("f8", super::kohya::fp8_name(s.kohya.fp8).to_string()),
        ("mt", s.method.name().to_string()),
        ("em", super::full::ema_name(s.full.ema).to_string()),
        ("gn", s.full.set_grads_to_none.to_string()),
    ]
}

/// The link fragment (without `#`).
pub fn to_fragment(s: &PipelineState) -> String {
    let base = values(&PipelineState { preset: s.preset.clone(), ..PipelineState::default() });
    let mut parts = vec![match &s.hub {
        Some(h) => format!("h={}", h.hub),
        None => format!("p={}", s.preset),
    }];
    for ((k, v), (_, d)) in values(s).into_iter().zip(base) {
        if v != d {
            parts.push(format!("{k}={v}"));
        }
    }
    for (name, d) in &s.component_dtypes {
        parts.push(format!("c.{name}={}", d.name()));
    }
    format!("{PREFIX}{}", parts.join(","))
}

/// Reads a fragment written by [`to_fragment`] that names a preset; the error names the key.
pub fn from_fragment(fragment: &str) -> Result<PipelineState, String> {
    let (first, rest) = split(fragment)?;
    match first {
        ("p", preset) => {
            let p = spec(preset).map_err(|e| format!("link p: {e}"))?;
            read_rest(PipelineState { preset: preset.to_string(), ..PipelineState::default() }, &p, rest)
        }
        ("h", _) => Err("link h: a hub pipeline opens by fetching it (`open`)".into()),
        _ => Err("link: the pipeline (p= or h=) comes first".into()),
    }
}

/// [`from_fragment`], and a hub pipeline's link (`h=owner/name`) by fetching its files again
/// (this tab's access token, if any).
pub async fn open(fragment: &str) -> Result<PipelineState, String> {
    let (first, rest) = split(fragment)?;
    match first {
        ("h", id) => {
            let h = super::hub::load(id, "").await.map_err(|e| format!("link h: {e}"))?;
            let p = h.spec().map_err(|e| format!("link h: {e}"))?;
            read_rest(super::with_hub(&PipelineState::default(), h), &p, rest)
        }
        _ => from_fragment(fragment),
    }
}

/// A link as saved work keeps it, with the hub files of an `h=` link (no fetch).
pub fn from_saved(fragment: &str, hub: Option<crate::state::pipeline::HubPipeline>) -> Result<PipelineState, String> {
    let (first, rest) = split(fragment)?;
    match (first, hub) {
        (("h", id), Some(h)) if h.hub.to_string() == id => {
            let p = h.spec()?;
            read_rest(super::with_hub(&PipelineState::default(), h), &p, rest)
        }
        _ => from_fragment(fragment),
    }
}

type Pair<'a> = (&'a str, &'a str);

/// The first `key=value` and the rest.
fn split(fragment: &str) -> Result<(Pair<'_>, Vec<Pair<'_>>), String> {
    let body = fragment.trim_start_matches('#').strip_prefix(PREFIX).ok_or("not a pipeline link")?;
    let pairs = body.split(',').filter(|p| !p.is_empty()).map(|p| p.split_once('=').ok_or_else(|| format!("link: {p:?} is not key=value"))).collect::<Result<Vec<_>, _>>()?;
    let (first, rest) = pairs.split_first().ok_or("link: no pipeline")?;
    Ok((*first, rest.to_vec()))
}

/// The settings after the pipeline's key, on `s`.
fn read_rest(mut s: PipelineState, p: &vramcalc_core::diffusion::PipelineSpec, rest: Vec<Pair<'_>>) -> Result<PipelineState, String> {
    for (k, v) in rest {
        let id = match k.strip_prefix("c.") {
            Some(name) => super::COMPONENT_FIELDS.iter().find(|c| c.0 == name).map(|c| c.1).ok_or_else(|| format!("link {k}: no such component"))?,
            None => KEYS.iter().find(|x| x.0 == k).map(|x| x.1).ok_or_else(|| format!("link: unknown key {k:?}"))?,
        };
        // a size left out of `with` is the default: an empty text means the same
        s = match (id, v) {
            ("width", "") => PipelineState { width: None, ..s },
            ("height", "") => PipelineState { height: None, ..s },
            ("frames", "") => PipelineState { frames: None, ..s },
            _ => with(&s, p, id, v).map_err(|e| format!("link {k}: {e}"))?,
        };
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::pipeline::{KohyaOpts, PipeMode, Trainer};
    use vramcalc_core::diffusion::{Offload, WeightDType};
    use vramcalc_core::OptimizerKind;

    #[test]
    fn every_setting_travels_in_the_link() {
        let states = [
            PipelineState::default(),
            PipelineState {
                preset: "sdxl".into(),
                mode: PipeMode::Decode,
                width: Some(2048),
                height: Some(1536),
                batch: 4,
                images_per_prompt: 2,
                offload: Offload::Sequential,
                vae_tiling: Some(0),
                vae_slicing: true,
                dtype: Some(WeightDType::Bf16),
                component_dtypes: vec![("vae".into(), WeightDType::Fp32), ("unet".into(), WeightDType::Fp8)],
                gpu: "rtx-3060".into(),
                ..PipelineState::default()
            },
            PipelineState { preset: "wan2.1-t2v-14b".into(), mode: PipeMode::Train, frames: Some(49), lora_r: 64, checkpointing: false, cached: false, optimizer: OptimizerKind::Adam8bit, ..PipelineState::default() },
            PipelineState {
                preset: "sdxl".into(),
                mode: PipeMode::Train,
                trainer: Trainer::Kohya,
                dtype: Some(WeightDType::Fp16),
                kohya: KohyaOpts { full_half: true, conv_dim: 8, cache_latents: true, cache_te: true, unet_only: true, fp8: vramcalc_core::diffusion::kohya::Fp8Base::Unet },
                ..PipelineState::default()
            },
            PipelineState {
                preset: "sd-1.5".into(),
                mode: PipeMode::Train,
                method: crate::state::pipeline::TrainMethod::Full,
                dtype: Some(WeightDType::Fp32),
                full: crate::state::pipeline::FullOpts { ema: vramcalc_core::diffusion::full_train::Ema::Gpu, set_grads_to_none: true },
                ..PipelineState::default()
            },
        ];
        for s in states {
            let f = to_fragment(&s);
            assert!(f.starts_with(PREFIX) && !f.contains(' '), "{f}");
            assert_eq!(from_fragment(&f).as_ref(), Ok(&s), "{f}");
            assert_eq!(from_fragment(&format!("#{f}")).as_ref(), Ok(&s));
        }
        assert_eq!(to_fragment(&PipelineState::default()), "pipe.p=flux.1-dev");
    }

    #[test]
    fn a_pipeline_link_opens_the_pipeline_workload_over_the_saved_work() {
        use crate::share_link::{start, Notice};
        use crate::state::local::Workload;
        let s = crate::test_util::block_on(start("#pipe.p=sdxl,w=768,o=model", None));
        assert_eq!(s.state.workload, Workload::Pipeline);
        assert_eq!((s.state.model.pipeline.preset.as_str(), s.state.model.pipeline.width, s.state.model.pipeline.offload), ("sdxl", Some(768), Offload::Model));
        assert!(s.notice.is_none() && s.guard.is_none());
        let bad = crate::test_util::block_on(start("#pipe.p=sdxl,w=7", None));
        assert_eq!(bad.state.workload, Workload::PyTorch);
        assert!(matches!(bad.notice, Some(Notice::Broken(ref e)) if e.starts_with("link w:")), "{:?}", bad.notice);
    }

    #[test]
    fn bad_links_name_the_problem() {
        assert!(from_fragment("v1.p=resnet50").is_err());
        assert!(from_fragment("pipe.p=dalle").unwrap_err().starts_with("link p:"));
        assert!(from_fragment("pipe.w=512").unwrap_err().contains("comes first"));
        assert!(crate::test_util::block_on(open("pipe.h=black-forest-labs/FLUX.1-dev,w=768")).unwrap_err().starts_with("link h: could not reach"));
        assert!(from_fragment("pipe.p=sd-1.5,zz=1").unwrap_err().contains("unknown key \"zz\""));
        assert!(from_fragment("pipe.p=sd-1.5,o=disk").unwrap_err().starts_with("link o:"));
        assert!(from_fragment("pipe.p=sd-1.5,c.prior=fp8").unwrap_err().contains("no such component"));
        assert!(from_fragment("pipe.p=sd-1.5,w").unwrap_err().contains("key=value"));
        assert!(from_fragment("pipe.p=sd-1.5,m=train,mt=full,em=cpu").unwrap_err().starts_with("link em:"));
        assert!(from_fragment("pipe.p=sd-1.5,m=train,mt=dora").unwrap_err().starts_with("link mt:"));
    }
}
