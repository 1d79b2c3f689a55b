//! `vramcalc`: the terminal front end of vramcalc-core. It formats the core's `Estimate`; it never
//! computes memory itself. `main` returns `ExitCode`, `run` returns `anyhow::Result` (ripgrep's style).

mod args;
mod serve;
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
        args::Command::Presets { json } => table::presets(json),
        args::Command::Gpus { json } => table::gpus(json),
        args::Command::Spec { model } => Ok(model.load()?.to_json_pretty() + "\n"),
        args::Command::Show { model, json } => {
            let spec = model.load()?;
            let est = model.estimate_default(&spec)?;
            table::show(&spec, &est, json)
        }
        args::Command::Estimate {
            model,
            settings,
            json,
            what_if,
        } => {
            let spec = model.load()?;
            let est = model.estimate(&spec, &settings)?;
            let what_ifs = if what_if { Some(vramcalc_core::whatif::what_ifs(&spec, &est.config)?) } else { None };
            table::estimate(&spec, &est, what_ifs.as_deref(), settings.unit(), json)
        }
        args::Command::Serve(a) => serve::run(&a),
        args::Command::MaxBatch {
            model,
            settings,
            capacity,
            json,
        } => {
            let spec = model.load()?;
            let cap = capacity.bytes()?;
            table::max_batch(&spec, &model.config(&spec, &settings)?, cap, settings.unit(), json)
        }
    }?;
    // A closed pipe (`vramcalc … | head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
