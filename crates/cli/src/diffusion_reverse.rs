//! The reverse answer and the what-ifs of a diffusers pipeline (core `diffusion::reverse`):
//! `vramcalc max --of width|height|resolution|frames|batch --pipeline ID --gpu GPU …`,
//! `vramcalc estimate --pipeline ID … --what-if` and `--fits GPU`.

use crate::args::{ModelArgs, Settings};
use crate::diffusion::DiffusionArgs;
use crate::dist::DistArgs;
use anyhow::{anyhow, bail, Result};
use serde_json::json;
use std::fmt::Write as _;
use std::process::ExitCode;
use vramcalc_core::diffusion::reverse::{self, Knob, PipelineWhatIf};
use vramcalc_core::diffusion::PipelineSpec;
use vramcalc_core::{format_bytes, ByteUnit};

/// The pipeline named by `--pipeline` or `--model-index` (a single `--diffusers-config`
/// component has no pipeline to size).
fn spec_of(model: &ModelArgs) -> Result<PipelineSpec> {
    match (&model.pipeline, &model.model_index) {
        (Some(id), _) => Ok(PipelineSpec::preset(id)?),
        (_, Some(path)) => crate::diffusion::load_index(path),
        _ => bail!("--of, --what-if and --fits size a whole pipeline: give --pipeline or --model-index"),
    }
}

fn mode_is_infer(s: &Settings) -> Result<()> {
    match s.mode.as_deref().unwrap_or("infer") {
        "infer" => Ok(()),
        m => bail!("--mode {m}: the reverse answer and what-ifs are of a pipeline's inference (--mode infer)"),
    }
}

/// `vramcalc max --of KNOB --pipeline ID`: the largest value whose device total fits; exit 1
/// when not even the smallest does.
#[allow(clippy::too_many_arguments)]
pub fn max(of: &str, gpu_id: &str, model: &ModelArgs, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, as_json: bool) -> Result<(String, ExitCode)> {
    let knob = Knob::parse(of).ok_or_else(|| anyhow!("--of {of:?}: a pipeline's is one of {}", Knob::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")))?;
    mode_is_infer(s)?;
    let g = crate::reverse::card(gpu_id)?;
    let spec = spec_of(model)?;
    let base = crate::diffusion::settings(s, dist, d, Some(&spec))?;
    let unit = s.unit();
    let Some(l) = reverse::largest(&spec, &base, knob, g.bytes)? else {
        if as_json {
            let v = json!({"pipeline": spec.name, "gpu": g.id, "of": knob.name(), "value": null, "fits": false});
            return Ok((serde_json::to_string_pretty(&v)? + "\n", ExitCode::from(1)));
        }
        eprintln!("vramcalc: {}: does not fit {} ({}) even at the smallest {}", spec.name, g.id, format_bytes(g.bytes, unit), knob.name());
        return Ok((String::new(), ExitCode::from(1)));
    };
    let e = &l.estimate;
    if as_json {
        let v = json!({"pipeline": spec.name, "gpu": g.id, "capacity_bytes": g.bytes, "of": knob.name(), "value": l.value,
            "at_limit": l.at_limit, "width": e.width, "height": e.height, "frames": e.frames,
            "batch": l.settings.batch, "images_per_prompt": l.settings.images_per_prompt, "offload": e.offload,
            "peak_bytes": e.peak_bytes, "peak_stage": e.peak_stage, "device_total_bytes": l.total_bytes,
            "cpu_ram_bytes": e.cpu_ram_bytes, "fits": true});
        return Ok((serde_json::to_string_pretty(&v)? + "\n", ExitCode::SUCCESS));
    }
    let size = if e.frames > 1 { format!("{}×{}×{} frames", e.width, e.height, e.frames) } else { format!("{}×{}", e.width, e.height) };
    let limit = if l.at_limit { " (the search's limit: it may fit beyond)" } else { "" };
    let text = format!(
        "{}: the largest {} that fits {} ({}) is {}{limit}\n  {size}, batch {}, offload {}: peak {} ({}), device total {}, CPU RAM {}\n",
        spec.name,
        knob.name(),
        g.id,
        format_bytes(g.bytes, unit),
        l.value,
        l.settings.batch,
        e.offload,
        format_bytes(e.peak_bytes, unit),
        e.peak_stage,
        format_bytes(l.total_bytes, unit),
        format_bytes(e.cpu_ram_bytes, unit),
    );
    Ok((text, ExitCode::SUCCESS))
}

/// `estimate --pipeline … --what-if`: the estimate (text or JSON from `diffusion::run`) with
/// each trick alone; `--fits GPU`: the verdict and the exit code.
pub fn estimate(model: &ModelArgs, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, as_json: bool, what_if: bool, fits: Option<&str>) -> Result<(String, ExitCode)> {
    let text = crate::diffusion::run(model, s, dist, d, as_json)?;
    if !what_if && fits.is_none() {
        return Ok((text, ExitCode::SUCCESS));
    }
    if s.mode.as_deref() == Some("train") {
        if d.trainer == "kohya" {
            bail!("--what-if and --fits are diffusers' LoRA step's; leave them out with --trainer kohya");
        }
        if crate::diffusion_full::is_full(d, s)? {
            bail!("--what-if and --fits are diffusers' LoRA step's; leave them out for a full fine-tune (no --finetune lora)");
        }
        return train(model, s, dist, d, as_json, text, what_if, fits);
    }
    mode_is_infer(s)?;
    let spec = spec_of(model)?;
    let base = crate::diffusion::settings(s, dist, d, Some(&spec))?;
    let total = reverse::device_total(&spec.estimate(&base)?);
    let capacity = fits.map(crate::reverse::card).transpose()?.map(|g| g.bytes);
    let items = if what_if { reverse::what_ifs(&spec, &base)? } else { Vec::new() };
    let text = if as_json && what_if {
        let mut v: serde_json::Value = serde_json::from_str(&text)?;
        let list: Vec<serde_json::Value> = items
            .iter()
            .map(|w| {
                let mut x = serde_json::to_value(w).unwrap_or_default();
                if let Some(cap) = capacity {
                    x["fits"] = json!(w.total_bytes <= cap);
                }
                x
            })
            .collect();
        v["what_ifs"] = json!(list);
        serde_json::to_string_pretty(&v)? + "\n"
    } else if what_if {
        text + &what_if_text(&items, capacity, s.unit())
    } else {
        text
    };
    match fits {
        Some(g) => crate::reverse::fits_verdict(text, as_json, total, g, s.unit()),
        None => Ok((text, ExitCode::SUCCESS)),
    }
}

fn what_if_text(items: &[PipelineWhatIf], capacity: Option<u64>, unit: ByteUnit) -> String {
    let f = |b: u64| format_bytes(b, unit);
    let mut o = String::new();
    let _ = writeln!(o, "\nwhat-ifs (each alone)             peak        change   device total    CPU RAM  peak stage");
    for w in items {
        let change = if w.delta_bytes < 0 { format!("−{}", f(w.delta_bytes.unsigned_abs())) } else { format!("+{}", f(w.delta_bytes as u64)) };
        let verdict = match capacity {
            Some(c) if w.total_bytes <= c => "  fits",
            Some(_) => "  does not fit",
            None => "",
        };
        let _ = writeln!(o, "{:<30} {:>10} {:>13} {:>14} {:>10}  {}{verdict}", w.name, f(w.peak_bytes), change, f(w.total_bytes), f(w.cpu_ram_bytes), w.peak_stage);
    }
    o
}

/// `--mode train --what-if` / `--fits`: the LoRA step's what-ifs (core `train_whatif`), the
/// uncached one when the pipeline (its VAE and text encoders) is known.
#[allow(clippy::too_many_arguments)]
fn train(model: &ModelArgs, s: &Settings, dist: &DistArgs, d: &DiffusionArgs, as_json: bool, text: String, what_if: bool, fits: Option<&str>) -> Result<(String, ExitCode)> {
    use vramcalc_core::diffusion::{Component, ComponentKind};
    let (c, others, d) = match &model.diffusers_config {
        Some(path) => {
            let t = std::fs::read_to_string(path)?;
            (Component::from_json(&t)?, None, d.clone())
        }
        None => {
            let spec = spec_of(model)?;
            let (_, c) = spec.components.iter().find(|c| c.1.kind() == ComponentKind::Denoiser).ok_or_else(|| anyhow!("the pipeline has no denoiser"))?.clone();
            let ps = crate::diffusion::settings(s, dist, d, Some(&spec))?;
            // the pipeline's own size, as `estimate` trains at it
            (c, Some(vramcalc_core::diffusion::train_whatif::frozen_weights(&spec, &ps)?), crate::diffusion::pipeline_size(d, &spec))
        }
    };
    let d = &d;
    let setup = crate::diffusion::lora_setup(&c, s, dist, d)?;
    let total = setup.step(&c)?.peak + vramcalc_core::memory::device::CUDA_CONTEXT_BYTES + vramcalc_core::memory::device::CUBLAS_WORKSPACE_BYTES;
    let items = if what_if { vramcalc_core::diffusion::train_whatif::what_ifs(&c, &setup, others)? } else { Vec::new() };
    let f = |b: u64| format_bytes(b, s.unit());
    let text = if !what_if {
        text
    } else if as_json {
        let mut v: serde_json::Value = serde_json::from_str(&text)?;
        v["what_ifs"] = serde_json::to_value(&items)?;
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        let mut o = text + "\nwhat-ifs (each alone)                    peak        change\n";
        for w in &items {
            let change = if w.delta_bytes < 0 { format!("−{}", f(w.delta_bytes.unsigned_abs())) } else { format!("+{}", f(w.delta_bytes as u64)) };
            let _ = writeln!(o, "{:<36} {:>10} {:>13}", w.name, f(w.peak_bytes), change);
        }
        o
    };
    match fits {
        Some(g) => crate::reverse::fits_verdict(text, as_json, total, g, s.unit()),
        None => Ok((text, ExitCode::SUCCESS)),
    }
}
