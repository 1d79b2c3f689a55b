//! The reverse questions: `vramcalc max --of …` (the largest value that fits a GPU) and
//! `vramcalc estimate … --fits GPU` (exit 0 fits, 1 does not). Formats `vramcalc_core::solve`.
//!
//! Exit codes: 0 an answer (fits); 1 it does not fit (`max`: not even the smallest value);
//! 2 bad input, as everywhere in the CLI.

use crate::args::{ModelArgs, Settings};
use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use serde_json::json;
use std::fmt::Write as _;
use std::process::ExitCode;
use vramcalc_core::memory::device::{gpu, Gpu};
use vramcalc_core::serve::{self, ServeConfig};
use vramcalc_core::solve::{self, Answer, Setup, Variable};
use vramcalc_core::{format_bytes, thousands, ByteUnit, ModelSpec};

/// `vramcalc max`.
#[derive(Args)]
pub struct MaxArgs {
    /// batch | seq-len | prompt-len | new-tokens | context | concurrency | gpu-layers; with
    /// --pipeline or --model-index: width | height | resolution | frames | batch
    #[arg(long)]
    pub of: String,
    /// A GPU id from `vramcalc gpus` (e.g. `rtx-4090`).
    #[arg(long)]
    pub gpu: String,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub settings: Settings,
    #[command(flatten)]
    pub dist: crate::dist::DistArgs,
    #[command(flatten)]
    pub serving: ServingArgs,
    /// The image and video settings of a pipeline (`--width`, `--frames`, …).
    #[command(flatten)]
    pub diffusion: crate::diffusion::DiffusionArgs,
    #[arg(long)]
    pub json: bool,
}

/// vLLM's settings for `--of context` and `--of concurrency` (as `vramcalc serve` takes them;
/// `--tp`, `--precision`, `--weights` and `--kv-dtype` are the setup's own flags).
#[derive(Args)]
pub struct ServingArgs {
    /// `--of concurrency`: the context each sequence is sized for (vLLM's max_model_len).
    #[arg(long)]
    pub context: Option<u64>,
    /// `--of context`: the sequences held at once.
    #[arg(long)]
    pub concurrency: Option<u64>,
    #[arg(long, default_value_t = serve::DEFAULT_GPU_MEMORY_UTILIZATION)]
    pub gpu_memory_utilization: f64,
    #[arg(long, default_value_t = serve::DEFAULT_MAX_NUM_BATCHED_TOKENS)]
    pub max_num_batched_tokens: u64,
    #[arg(long, default_value_t = serve::DEFAULT_MAX_NUM_SEQS)]
    pub max_num_seqs: u64,
    /// No CUDA graphs (`--enforce-eager`).
    #[arg(long)]
    pub enforce_eager: bool,
}

pub fn card(id: &str) -> Result<&'static Gpu> {
    gpu(id).ok_or_else(|| anyhow!("unknown GPU {id:?} (run `vramcalc gpus`)"))
}

/// vLLM's config from the setup's flags, as `ServeConfig::for_setup` serves any setup: its
/// precision (a language model's own dtype when `--precision` is left out), `--weights` (or the
/// config's `quantization_config`), `--kv-dtype` and `--tp`; the serving flags on top.
pub fn serve_config(spec: &ModelSpec, model: &ModelArgs, s: &Settings, dist: &crate::dist::DistArgs, v: &ServingArgs, gpu_bytes: u64) -> Result<ServeConfig> {
    let mut config = model.config(spec, s)?;
    if config.weights.is_none() {
        config.weights = model.quantization()?;
    }
    let setup = ServeConfig::for_setup(&config, &dist.config()?, gpu_bytes, v.context.or(s.seq_len).unwrap_or(4096));
    Ok(ServeConfig {
        gpu_memory_utilization: v.gpu_memory_utilization,
        max_num_batched_tokens: v.max_num_batched_tokens,
        max_num_seqs: v.max_num_seqs,
        concurrency: v.concurrency,
        enforce_eager: v.enforce_eager,
        ..setup
    })
}

/// `vramcalc max`: the answer as text or `{"value": N, …}`; exit 1 when nothing fits.
pub fn max(a: &MaxArgs) -> Result<(String, ExitCode)> {
    if a.model.is_diffusion() {
        return crate::diffusion_reverse::max(&a.of, &a.gpu, &a.model, &a.settings, &a.dist, &a.diffusion, a.json);
    }
    let of = Variable::parse(&a.of).ok_or_else(|| {
        let all: Vec<&str> = Variable::ALL.iter().map(|v| v.name()).collect();
        anyhow!("--of {:?} is not one of {}", a.of, all.join(", "))
    })?;
    let g = card(&a.gpu)?;
    let spec = a.model.load()?;
    let result = if of.is_serving() {
        if of == Variable::Concurrency && a.serving.context.is_none() && a.settings.seq_len.is_none() {
            bail!("--of concurrency counts sequences of a --context (tokens each)");
        }
        solve::max_serving(&spec, &serve_config(&spec, &a.model, &a.settings, &a.dist, &a.serving, g.bytes)?, of)
    } else {
        let config = a.model.config(&spec, &a.settings)?;
        solve::max_value(&Setup { spec: &spec, config, dist: a.dist.config()? }, of, g.bytes)
    };
    let answer = match result {
        Ok(x) => x,
        Err(e) if solve::is_does_not_fit(&e) => {
            if a.json {
                let v = json!({"model": spec.display_name(), "gpu": g.id, "of": of, "value": null, "fits": false, "error": e.to_string()});
                return Ok((serde_json::to_string_pretty(&v)? + "\n", ExitCode::from(1)));
            }
            eprintln!("vramcalc: {}: {e}", spec.display_name());
            return Ok((String::new(), ExitCode::from(1)));
        }
        Err(e) => return Err(e.into()),
    };
    Ok((answer_text(&spec, g, &answer, a.settings.unit(), a.json)?, ExitCode::SUCCESS))
}

fn answer_text(spec: &ModelSpec, g: &Gpu, a: &Answer, unit: ByteUnit, as_json: bool) -> Result<String> {
    if as_json {
        let mut v = serde_json::to_value(a)?;
        v["model"] = spec.display_name().into();
        v["gpu"] = g.id.into();
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let f = |b: u64| format_bytes(b, unit);
    let mut o = String::new();
    let what = if a.of.is_serving() { "KV bytes held" } else { "device total" };
    writeln!(
        o,
        "{} on {}: largest {} that fits: {} ({what} {} of {}, margin {})",
        spec.display_name(),
        g.name,
        a.of,
        thousands(a.value),
        f(a.device_total_bytes),
        f(a.capacity_bytes),
        f(a.margin_bytes)
    )?;
    match &a.limit {
        Some(l) if l.phase == "-" => writeln!(o, "  {} {}: {}", a.of, thousands(l.value), l.at)?,
        Some(l) => writeln!(
            o,
            "  at {} {}: {} — peak in {} at {}, largest part {} ({})",
            a.of,
            thousands(l.value),
            f(l.device_total_bytes),
            l.phase,
            l.at,
            l.category,
            f(l.category_bytes)
        )?,
        None => writeln!(o, "  (the search's upper end, {}, fits)", thousands(a.upper_bound))?,
    }
    Ok(o)
}

/// `estimate --fits GPU`: the verdict added to the output (JSON: a `fits` object; text: a
/// line), and exit 0 when the device total fits the GPU's memory, 1 when not.
pub fn fits_verdict(text: String, as_json: bool, total: u64, gpu_id: &str, unit: ByteUnit) -> Result<(String, ExitCode)> {
    let g = card(gpu_id)?;
    let fits = total <= g.bytes;
    let code = if fits { ExitCode::SUCCESS } else { ExitCode::from(1) };
    let margin = g.bytes as i128 - total as i128;
    if as_json {
        let mut v: serde_json::Value = serde_json::from_str(&text)?;
        v["fits"] = json!({"gpu": g.id, "capacity_bytes": g.bytes, "device_total_bytes": total, "fits": fits, "margin_bytes": margin as i64});
        return Ok((serde_json::to_string_pretty(&v)? + "\n", code));
    }
    let m = if margin >= 0 { format_bytes(margin as u64, unit) } else { format!("−{}", format_bytes(margin.unsigned_abs() as u64, unit)) };
    let verdict = if fits { "fits" } else { "does NOT fit" };
    Ok((format!("{text}\n{verdict} {} ({}): device total {} of {}, margin {m}\n", g.id, g.name, format_bytes(total, unit), format_bytes(g.bytes, unit)), code))
}

/// `vramcalc fix`.
#[derive(Args)]
pub struct FixArgs {
    /// A GPU id from `vramcalc gpus` (e.g. `rtx-4090`).
    #[arg(long)]
    pub gpu: String,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub settings: Settings,
    #[command(flatten)]
    pub dist: crate::dist::DistArgs,
    /// Print the estimate of fix N (1 = the cheapest) instead of the list, as `estimate` would.
    #[arg(long)]
    pub apply: Option<usize>,
    /// Changes per fix (1 to 3).
    #[arg(long, default_value_t = 3)]
    pub max_changes: usize,
    /// More GPUs considered up to this many (1: none).
    #[arg(long, default_value_t = 8)]
    pub max_gpus: u64,
    /// Fixes listed.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    #[arg(long)]
    pub json: bool,
}

/// `vramcalc fix`: the cheapest sets of changes that make the setup fit, or (`--apply N`) the
/// estimate of one. Exit 0 with a list (or when it fits already), 1 when no fix is found.
pub fn fix(a: &FixArgs) -> Result<(String, ExitCode)> {
    use vramcalc_core::solve::fix::{self, FixOptions};
    let g = card(&a.gpu)?;
    let spec = a.model.load()?;
    let config = a.model.config(&spec, &a.settings)?;
    let setup = Setup { spec: &spec, config, dist: a.dist.config()? };
    let (_, total) = setup.totals()?;
    let options = FixOptions { max_changes: a.max_changes.clamp(1, 3), max_gpus: a.max_gpus.max(1), top: a.top.max(a.apply.unwrap_or(0)).max(1) };
    let fixes = fix::fixes(&setup, g.bytes, &options)?;
    let unit = a.settings.unit();
    let f = |b: u64| format_bytes(b, unit);
    if let Some(n) = a.apply {
        let Some(chosen) = n.checked_sub(1).and_then(|i| fixes.get(i)) else {
            bail!("--apply {n}: there are {} fixes (1 to {})", fixes.len(), fixes.len());
        };
        let e = vramcalc_core::distributed::estimate(&spec, &chosen.config, &chosen.dist)?;
        let flags = fix::flags(chosen);
        if a.json {
            let mut v = crate::dist::estimate_json(&spec, &e)?;
            v["applied"] = json!({"changes": chosen.changes, "flags": flags, "gpu": g.id, "capacity_bytes": g.bytes, "margin_bytes": chosen.margin_bytes});
            return Ok((serde_json::to_string_pretty(&v)? + "\n", ExitCode::SUCCESS));
        }
        let mut o = crate::table::estimate(&spec, &e.estimate, None, &[], &[], unit, false)? + &crate::dist::estimate_text(&e, unit)?;
        writeln!(o, "\napplied: {} (flags: {}); fits {} with a margin of {}", describe(&chosen.changes), flags.join(" "), g.id, f(chosen.margin_bytes))?;
        return Ok((o, ExitCode::SUCCESS));
    }
    let code = if total <= g.bytes || !fixes.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) };
    if a.json {
        let list: Vec<serde_json::Value> = fixes
            .iter()
            .enumerate()
            .map(|(i, x)| {
                json!({"rank": i + 1, "changes": x.changes, "tier": x.tier, "cost": x.cost, "peak_bytes": x.peak_bytes,
                    "device_total_bytes": x.device_total_bytes, "margin_bytes": x.margin_bytes, "flags": fix::flags(x)})
            })
            .collect();
        let v = json!({"model": spec.display_name(), "gpu": g.id, "capacity_bytes": g.bytes, "device_total_bytes": total,
            "fits": total <= g.bytes, "fixes": list});
        return Ok((serde_json::to_string_pretty(&v)? + "\n", code));
    }
    let mut o = String::new();
    if total <= g.bytes {
        writeln!(o, "{} fits {} already: device total {} of {}", spec.display_name(), g.name, f(total), f(g.bytes))?;
        return Ok((o, code));
    }
    writeln!(o, "{} does not fit {}: device total {} of {}", spec.display_name(), g.name, f(total), f(g.bytes))?;
    if fixes.is_empty() {
        writeln!(o, "no set of up to {} changes makes it fit (more GPUs up to {})", options.max_changes, options.max_gpus)?;
        return Ok((o, code));
    }
    writeln!(o, "cheapest fixes (take one with --apply N):")?;
    for (i, x) in fixes.iter().enumerate() {
        let tier = match x.tier {
            fix::Tier::SameResult => "same result",
            fix::Tier::ChangesTraining => "changes the training",
            fix::Tier::MoreGpus => "more GPUs",
        };
        writeln!(o, "{:>3}. [{tier}] {}", i + 1, describe(&x.changes))?;
        writeln!(o, "     peak {}, device total {}, margin {}   flags: {}", f(x.peak_bytes), f(x.device_total_bytes), f(x.margin_bytes), fix::flags(x).join(" "))?;
    }
    Ok((o, code))
}

fn describe(changes: &[vramcalc_core::solve::fix::Change]) -> String {
    changes.iter().map(|c| c.describe()).collect::<Vec<_>>().join(" + ")
}

/// `vramcalc fits`.
#[derive(Args)]
pub struct FitsArgs {
    /// GPU ids from `vramcalc gpus` (e.g. `rtx-4090`); several cards, mixed allowed, as
    /// `--gpu a,b` or `--gpu a --gpu b`.
    #[arg(long, value_delimiter = ',', required = true)]
    pub gpu: Vec<String>,
    /// qlora | lora | full | infer | generate | serve | llama-cpp
    #[arg(long)]
    pub workload: String,
    /// Sequence length (training, inference), prompt (generate), context (serve; default 4096).
    #[arg(long)]
    pub seq_len: Option<u64>,
    /// Samples per step (training, inference, generation).
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    /// Tokens generated per sequence (generate).
    #[arg(long, default_value_t = 256)]
    pub new_tokens: u64,
    /// Only these presets (comma-separated ids; default: every preset the workload applies to).
    #[arg(long, value_delimiter = ',')]
    pub presets: Vec<String>,
    /// Also a Hugging Face `config.json` (a model that is not a preset).
    #[arg(long)]
    pub hf_config: Option<std::path::PathBuf>,
    /// MB (10^6) or MiB (2^20)
    #[arg(long, default_value = "MB")]
    pub units: String,
    #[arg(long)]
    pub json: bool,
}

/// `vramcalc fits`: `{"rows": [{model, format, method, fits, margin_bytes, …}]}` or a table.
pub fn fits(a: &FitsArgs) -> Result<String> {
    use vramcalc_core::presets::{Family, PRESETS};
    use vramcalc_core::solve::fits::{FitsOptions, Workload};
    let cards: Vec<&Gpu> = a.gpu.iter().map(|id| card(id)).collect::<Result<_>>()?;
    let bytes: Vec<u64> = cards.iter().map(|g| g.bytes).collect();
    let w = Workload::parse(&a.workload).ok_or_else(|| {
        let all: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
        anyhow!("--workload {:?} is not one of {}", a.workload, all.join(", "))
    })?;
    let mut models: Vec<(String, ModelSpec)> = Vec::new();
    for p in PRESETS {
        let chosen = if a.presets.is_empty() { !w.needs_lm() || matches!(p.family, Family::Llm | Family::Moe) } else { a.presets.iter().any(|x| x == p.id) };
        if chosen {
            models.push((p.id.to_string(), vramcalc_core::import::preset(p.id)?));
        }
    }
    if let Some(unknown) = a.presets.iter().find(|x| !PRESETS.iter().any(|p| p.id == x.as_str())) {
        bail!("--presets: unknown preset `{unknown}` (run `vramcalc presets`)");
    }
    if let (Workload::LlamaCpp, Some(path)) = (w, &a.hf_config) {
        // llama.cpp reads the config.json itself (its tensor list), not the spec
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let name = path.display().to_string();
        let o = FitsOptions { batch: a.batch.max(1), seq_len: a.seq_len, new_tokens: a.new_tokens };
        let extra = vramcalc_core::solve::fits_llama::rows(&[(name.as_str(), &config)], &bytes, &o);
        if extra.is_empty() {
            bail!("--hf-config {}: llama.cpp's tensor list is built for model_type llama, mistral, qwen2, qwen3 and qwen3_moe", path.display());
        }
        return fits_output(a, &cards, w, [rows_of(&models, w, &bytes, &o), extra].concat());
    }
    if let Some(path) = &a.hf_config {
        let model = ModelArgs { preset: None, spec: None, hf_config: Some(path.clone()), pipeline: None, model_index: None, diffusers_config: None };
        let spec = model.load()?;
        models.push((spec.display_name().to_string(), spec));
    }
    let o = FitsOptions { batch: a.batch.max(1), seq_len: a.seq_len, new_tokens: a.new_tokens };
    let rows = rows_of(&models, w, &bytes, &o);
    fits_output(a, &cards, w, rows)
}

fn rows_of(
    models: &[(String, ModelSpec)],
    w: vramcalc_core::solve::fits::Workload,
    gpus: &[u64],
    o: &vramcalc_core::solve::fits::FitsOptions,
) -> Vec<vramcalc_core::solve::fits::Row> {
    let refs: Vec<(&str, &ModelSpec)> = models.iter().map(|(id, s)| (id.as_str(), s)).collect();
    vramcalc_core::solve::fits::table_on(&refs, w, gpus, o)
}

/// The table as JSON (`gpu`: the ids joined by commas, `gpus` each card, `capacity_bytes` all
/// together) or text.
fn fits_output(a: &FitsArgs, cards: &[&Gpu], w: vramcalc_core::solve::fits::Workload, rows: Vec<vramcalc_core::solve::fits::Row>) -> Result<String> {
    let ids: Vec<&str> = cards.iter().map(|g| g.id).collect();
    let total: u64 = cards.iter().map(|g| g.bytes).sum();
    if a.json {
        let gpus: Vec<_> = cards.iter().map(|g| json!({"id": g.id, "capacity_bytes": g.bytes})).collect();
        let v = json!({"gpu": ids.join(","), "gpus": gpus, "capacity_bytes": total, "workload": w, "reverse_of": w.reverse(), "rows": rows});
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let unit = if a.units.eq_ignore_ascii_case("mib") { ByteUnit::Mib } else { ByteUnit::Mb };
    let mut o = String::new();
    let names: Vec<&str> = cards.iter().map(|g| g.name).collect();
    writeln!(o, "What fits {} ({}) for {}:", names.join(" + "), format_bytes(total, unit), w.name())?;
    writeln!(o, "| model | format | method | fits | margin | largest {} |", w.reverse())?;
    writeln!(o, "|---|---|---|---|---:|---:|")?;
    for r in &rows {
        let m = if r.margin_bytes >= 0 { format_bytes(r.margin_bytes as u64, unit) } else { format!("−{}", format_bytes(r.margin_bytes.unsigned_abs(), unit)) };
        let rev = r.reverse_value.map_or("—".to_string(), thousands);
        writeln!(o, "| {} | {} | {} | {} | {m} | {rev} |", r.model, r.format, r.method, if r.fits { "yes" } else { "no" })?;
    }
    Ok(o)
}
