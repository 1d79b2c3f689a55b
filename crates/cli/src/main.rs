//! `vramcalc`: the terminal front end of vramcalc-core. It formats the core's `Estimate`; it never
//! computes memory itself. `main` returns `ExitCode`, `run` returns `anyhow::Result` (ripgrep's style).

mod args;
mod finetune_args;
mod serve;
mod diffusion;
mod dist;
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
    let cli = args::Cli::parse();
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
        args::Command::Estimate { model, settings, dist, json, what_if, diffusion } if model.is_diffusion() => {
            if what_if {
                anyhow::bail!("--what-if is not available for diffusion pipelines yet");
            }
            diffusion::run(&model, &settings, &dist, &diffusion, json)
        }
        args::Command::DiffusionTable { cards } => diffusion::table(&cards),
        args::Command::Estimate {
            model,
            settings,
            dist,
            json,
            what_if,
            ..
        } if !dist.is_single() => {
            if what_if {
                anyhow::bail!("--what-if covers one GPU; leave out --gpus, --strategy, --tp and --offload");
            }
            let spec = model.load()?;
            let e = vramcalc_core::distributed::estimate(&spec, &settings.config(&spec)?, &dist.config()?)?;
            if json {
                Ok(serde_json::to_string_pretty(&dist::estimate_json(&spec, &e)?)? + "\n")
            } else {
                Ok(table::estimate(&spec, &e.estimate, None, &[], &[], settings.unit(), false)? + &dist::estimate_text(&e, settings.unit())?)
            }
        }
        args::Command::Estimate {
            model,
            settings,
            json,
            what_if,
            ..
        } => {
            let spec = model.load()?;
            let est = model.estimate(&spec, &settings)?;
            let what_ifs = if what_if { Some(vramcalc_core::whatif::what_ifs(&spec, &est.config)?) } else { None };
            let tuning = if what_if { vramcalc_core::whatif::finetune::what_ifs(&spec, &est.config)? } else { Vec::new() };
            let gen_what_ifs = if what_if { vramcalc_core::whatif_gen::what_ifs(&spec, &est.config)? } else { Vec::new() };
            table::estimate(&spec, &est, what_ifs.as_deref(), &tuning, &gen_what_ifs, settings.unit(), json)
        }
        args::Command::Serve(a) => serve::run(&a),
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
            dist::strategies(&spec, &settings.config(&spec)?, &world_sizes, card, settings.unit())
        }
        args::Command::FewestGpus { fit, max_gpus } => {
            let (spec, config, cap) = fit.load()?;
            dist::fewest_gpus(&spec, &config, &fit.dist.config()?, cap, max_gpus, fit.settings.unit(), fit.json)
        }
    }?;
    // A closed pipe (`vramcalc … | head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
