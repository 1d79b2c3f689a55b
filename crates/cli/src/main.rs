//! `vramcalc`: the terminal front end of vramcalc-core. It formats the core's `Estimate`; it never
//! computes memory itself. `main` returns `ExitCode`, `run` returns `anyhow::Result` (ripgrep's style).

mod args;
mod checkpoint;
mod finetune_args;
mod llama_cpp;
mod ollama;
mod reverse;
mod serve;
mod diffusion;
mod diffusion_full;
mod diffusion_reverse;
mod kohya;
mod dist;
mod launch;
#[cfg(test)]
mod launch_parse_back;
mod table;

use anyhow::Result;
use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vramcalc: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let cli = args::Cli::parse_from(llama_cpp::normalize_args(std::env::args_os()));
    // `estimate --fits` and `max` decide the exit code (1: does not fit)
    let mut code = ExitCode::SUCCESS;
    let text = match cli.command {
        args::Command::Presets { table: true, .. } => table::presets_table(),
        args::Command::Presets { json, .. } => table::presets(json),
        args::Command::Gpus { json } => table::gpus(json),
        args::Command::Spec { model } => Ok(model.load()?.to_json_pretty() + "\n"),
        args::Command::Show { model, json } => {
            let spec = model.load()?;
            let est = model.estimate_default(&spec)?;
            table::show(&spec, &est, json)
        }
        args::Command::Estimate { model, settings, dist, json, what_if, diffusion, fits, .. } if model.is_diffusion() => {
            diffusion_reverse::estimate(&model, &settings, &dist, &diffusion, json, what_if, fits.as_deref()).map(|(t, c)| {
                code = c;
                t
            })
        }
        args::Command::DiffusionTable { cards } => diffusion::table(&cards),
        args::Command::Estimate {
            model,
            settings,
            dist,
            json,
            what_if,
            fits,
            ..
        } if !dist.is_single() => {
            let spec = model.load()?;
            let (config, d) = (model.config(&spec, &settings)?, dist.config()?);
            let e = vramcalc_core::distributed::estimate(&spec, &config, &d)?;
            // with --fits, each what-if also says whether it alone makes the job fit that GPU
            let capacity = fits.as_deref().and_then(vramcalc_core::memory::device::gpu).map(|g| g.bytes);
            let what_ifs = if what_if { Some(vramcalc_core::whatif::job::what_ifs(&spec, &config, &d, capacity)?) } else { None };
            let text = if json {
                let mut v = dist::estimate_json(&spec, &e)?;
                if let (Some(w), Some(o)) = (&what_ifs, v.as_object_mut()) {
                    o.insert("what_ifs".into(), serde_json::to_value(&w.items)?);
                }
                serde_json::to_string_pretty(&v)? + "\n"
            } else {
                let mut text = table::estimate(&spec, &e.estimate, None, &[], &[], settings.unit(), false)? + &dist::estimate_text(&e, settings.unit())?;
                if let Some(w) = &what_ifs {
                    text += &dist::what_if_text(w, settings.unit())?;
                }
                text
            };
            match fits {
                Some(g) => reverse::fits_verdict(text, json, e.estimate.device_total_bytes, &g, settings.unit()).map(|(t, c)| {
                    code = c;
                    t
                }),
                None => Ok(text),
            }
        }
        args::Command::Estimate {
            model,
            settings,
            json,
            what_if,
            fits,
            checkpoint,
            ..
        } => {
            let spec = model.load()?;
            let est = model.estimate(&spec, &settings)?;
            let what_ifs = if what_if { Some(vramcalc_core::whatif::what_ifs(&spec, &est.config)?) } else { None };
            let tuning = if what_if { vramcalc_core::whatif::finetune::what_ifs(&spec, &est.config)? } else { Vec::new() };
            let gen_what_ifs = if what_if { vramcalc_core::whatif_gen::what_ifs(&spec, &est.config)? } else { Vec::new() };
            let text = table::estimate(&spec, &est, what_ifs.as_deref(), &tuning, &gen_what_ifs, settings.unit(), json)?;
            let notes = checkpoint::notes(model.hf_config.as_ref(), est.config.weights, &spec)?;
            let text = checkpoint::annotate(text, &checkpoint, &notes, &est, settings.unit(), json)?;
            match fits {
                Some(g) => reverse::fits_verdict(text, json, est.device_total_bytes, &g, settings.unit()).map(|(t, c)| {
                    code = c;
                    t
                }),
                None => Ok(text),
            }
        }
        args::Command::Max(a) => reverse::max(&a).map(|(t, c)| {
            code = c;
            t
        }),
        args::Command::Fits(a) => reverse::fits(&a),
        args::Command::Launch(a) => launch::run(&a),
        args::Command::Fix(a) => reverse::fix(&a).map(|(t, c)| {
            code = c;
            t
        }),
        args::Command::Serve(a) => serve::run(&a),
        args::Command::LlamaCpp(a) => llama_cpp::run(&a).map(|(t, c)| {
            code = c;
            t
        }),
        args::Command::Ollama(a) => ollama::run(&a),
        args::Command::MaxBatch { fit } => {
            let (spec, config, cap) = fit.load()?;
            if fit.dist.is_single() {
                table::max_batch(&spec, &config, cap, fit.settings.unit(), fit.json)
            } else {
                dist::max_batch(&spec, &config, &fit.dist.config()?, cap, fit.settings.unit(), fit.json)
            }
        }
        args::Command::Strategies { model, settings, world_sizes, gpu } => {
            let spec = model.load()?;
            let card = vramcalc_core::memory::device::gpu(&gpu).ok_or_else(|| anyhow::anyhow!("unknown GPU {gpu:?} (run `vramcalc gpus`)"))?;
            dist::strategies(&spec, &model.config(&spec, &settings)?, &world_sizes, card, settings.unit())
        }
        args::Command::FewestGpus { fit, max_gpus } => {
            let (spec, config, cap) = fit.load()?;
            dist::fewest_gpus(&spec, &config, &fit.dist.config()?, cap, max_gpus, fit.settings.unit(), fit.json)
        }
    }?;
    // A closed pipe (`vramcalc … | head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(code),
    }
}
