//! The multi-GPU flags (`--gpus`, `--strategy`, …) and their output. Formats what
//! `vramcalc_core::distributed` computes; computes no memory.

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;
use std::fmt::Write as _;
use vramcalc_core::distributed::{self, DistConfig, DistEstimate, DistPrepared, MpDtype, Offload, Strategy};
use vramcalc_core::units::{format_bytes, ByteUnit};
use vramcalc_core::{ModelSpec, TrainConfig};

#[derive(Args, Default)]
pub struct DistArgs {
    /// GPUs of the job (data-parallel × tensor-parallel); 1 is the single-GPU estimate.
    #[arg(long, default_value_t = 1)]
    pub gpus: u64,
    /// ddp | zero1 | zero2 | zero3 | fsdp | tp (default ddp when --gpus > 1)
    #[arg(long)]
    pub strategy: Option<String>,
    /// DDP: `.grad` are views into the reducer's buckets.
    #[arg(long)]
    pub gradient_as_bucket_view: bool,
    /// FSDP2: true | false (default true)
    #[arg(long)]
    pub reshard_after_forward: Option<String>,
    /// FSDP2 MixedPrecisionPolicy param_dtype: bf16 | fp16
    #[arg(long)]
    pub fsdp_param_dtype: Option<String>,
    /// FSDP2 MixedPrecisionPolicy reduce_dtype: fp32 | bf16
    #[arg(long)]
    pub fsdp_reduce_dtype: Option<String>,
    /// Tensor-parallel degree (Megatron layout); with --strategy tp it defaults to --gpus.
    #[arg(long, default_value_t = 1)]
    pub tp: u64,
    /// Megatron's sequence parallelism with --tp: norms, dropouts and residuals on S/t tokens.
    #[arg(long)]
    pub sequence_parallel: bool,
    /// DeepSpeed offload to CPU: optimizer | params
    #[arg(long)]
    pub offload: Option<String>,
}

fn parse<T>(v: &str, flag: &str, p: fn(&str) -> Option<T>, all: &[&str]) -> Result<T> {
    p(v).ok_or_else(|| anyhow!("--{flag} {v:?} is not one of {}", all.join(", ")))
}

impl DistArgs {
    pub fn config(&self) -> Result<DistConfig> {
        let strategy = match &self.strategy {
            Some(s) => parse(s, "strategy", Strategy::parse, &["ddp", "zero1", "zero2", "zero3", "fsdp", "tp"])?,
            None => Strategy::Ddp,
        };
        let reshard_after_forward = match self.reshard_after_forward.as_deref() {
            None | Some("true") => true,
            Some("false") => false,
            Some(v) => anyhow::bail!("--reshard-after-forward {v:?} is not one of true, false"),
        };
        let param = |v: &str| match v {
            "bf16" => Some(MpDtype::Bf16),
            "fp16" => Some(MpDtype::Fp16),
            _ => None,
        };
        let reduce = |v: &str| match v {
            "fp32" => Some(MpDtype::Fp32),
            "bf16" => Some(MpDtype::Bf16),
            _ => None,
        };
        let offload = |v: &str| match v {
            "optimizer" => Some(Offload::Optimizer),
            "params" => Some(Offload::Params),
            _ => None,
        };
        Ok(DistConfig {
            gpus: self.gpus,
            strategy,
            tp: self.tp,
            gradient_as_bucket_view: self.gradient_as_bucket_view,
            reshard_after_forward,
            fsdp_param_dtype: self.fsdp_param_dtype.as_deref().map(|v| parse(v, "fsdp-param-dtype", param, &["bf16", "fp16"])).transpose()?,
            fsdp_reduce_dtype: self.fsdp_reduce_dtype.as_deref().map(|v| parse(v, "fsdp-reduce-dtype", reduce, &["fp32", "bf16"])).transpose()?,
            offload: self.offload.as_deref().map(|v| parse(v, "offload", offload, &["optimizer", "params"])).transpose()?.unwrap_or_default(),
            sequence_parallel: self.sequence_parallel,
        })
    }

    /// Whether any multi-GPU setting was given (otherwise today's single-GPU path runs).
    pub fn is_single(&self) -> bool {
        self.gpus <= 1 && self.tp <= 1 && self.strategy.is_none() && self.offload.is_none() && !self.sequence_parallel
    }
}

/// The JSON of a distributed estimate: the estimate's, its breakdown with the strategy's keys,
/// and a `distributed` object.
pub fn estimate_json(spec: &ModelSpec, e: &DistEstimate) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(&e.estimate)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("model".into(), json!(spec.display_name()));
        o.insert("engine".into(), json!(e.estimate.config.engine()));
        if let Some(d) = &e.distributed {
            o.insert("distributed".into(), serde_json::to_value(d)?);
            if let (Some(b), serde_json::Value::Object(extra)) = (o.get_mut("breakdown").and_then(|b| b.as_object_mut()), serde_json::to_value(d.breakdown)?) {
                b.extend(extra);
            }
        }
    }
    Ok(v)
}

/// The lines the text output adds under the single-GPU table.
pub fn estimate_text(e: &DistEstimate, unit: ByteUnit) -> Result<String> {
    let mut o = String::new();
    let Some(d) = &e.distributed else { return Ok(o) };
    let f = |b: u64| format_bytes(b, unit);
    writeln!(o)?;
    let sp = if d.sequence_parallel { ", sequence-parallel" } else { "" };
    writeln!(o, "rank 0 of {} GPUs: {} (data-parallel {}, tensor-parallel {}{sp})", d.gpus, d.strategy, d.data_parallel, d.tensor_parallel)?;
    let b = &d.breakdown;
    for (k, v) in [
        ("sharded parameters", b.sharded_parameters),
        ("unsharded (gathered) parameters", b.unsharded_parameters),
        ("sharded gradients", b.sharded_gradients),
        ("all-gather buffers", b.all_gather_buffers),
        ("reduce-scatter buffers", b.reduce_scatter_buffers),
        ("gradient buckets", b.gradient_buckets),
    ] {
        if v > 0 {
            writeln!(o, "  {k:<33}{:>12}", f(v))?;
        }
    }
    if d.host_bytes > 0 {
        writeln!(o, "host memory (CPU, per rank)       {:>12}   (offloaded; not in the GPU peak)", f(d.host_bytes))?;
    }
    writeln!(o, "basis: {}", d.basis)?;
    Ok(o)
}

pub fn max_batch(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig, capacity: u64, unit: ByteUnit, as_json: bool) -> Result<String> {
    let p = DistPrepared::new(spec, config, dist)?;
    let best = p.max_batch(capacity);
    let at = best.map(|b| p.peak_at(b));
    let mut o = String::new();
    if as_json {
        let v = json!({"model": spec.display_name(), "capacity_bytes": capacity, "gpus": dist.gpus, "strategy": dist.strategy,
            "max_batch_per_gpu": best, "peak_bytes": at.map(|a| a.0), "device_total_bytes": at.map(|a| a.1)});
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(o);
    }
    match (best, at) {
        (Some(b), Some((peak, total))) => writeln!(o, "{}: {} × {}: largest batch per GPU that fits {}: {b} (rank 0: peak allocated {}, device total ≈ {})",
            spec.display_name(), dist.gpus, dist.strategy, format_bytes(capacity, unit), format_bytes(peak, unit), format_bytes(total, unit))?,
        _ => writeln!(o, "{}: {} × {}: even batch 1 per GPU does not fit {}", spec.display_name(), dist.gpus, dist.strategy, format_bytes(capacity, unit))?,
    }
    Ok(o)
}

pub fn fewest_gpus(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig, capacity: u64, max_gpus: u64, unit: ByteUnit, as_json: bool) -> Result<String> {
    let found = distributed::fewest_gpus(spec, config, dist, capacity, max_gpus)?;
    let mut o = String::new();
    if as_json {
        let v = json!({"model": spec.display_name(), "capacity_bytes": capacity, "strategy": dist.strategy, "batch_per_gpu": config.batch,
            "gpus": found.map(|f| f.0), "max_batch_per_gpu": found.map(|f| f.1)});
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(o);
    }
    match found {
        Some((n, b)) => writeln!(o, "{}: {} at batch {} per GPU fits {} on {n} GPUs (fewest, powers of two); largest batch per GPU there: {b}",
            spec.display_name(), dist.strategy, config.batch, format_bytes(capacity, unit))?,
        None => writeln!(o, "{}: {} at batch {} per GPU does not fit {} on up to {max_gpus} GPUs", spec.display_name(), dist.strategy, config.batch, format_bytes(capacity, unit))?,
    }
    Ok(o)
}

/// One row of `vramcalc strategies`: a strategy with the precision people run it in.
struct Row {
    label: &'static str,
    precision: vramcalc_core::Precision,
    dist: DistConfig,
}

fn rows() -> Vec<Row> {
    use vramcalc_core::Precision::{AmpBf16, Bf16, Fp32};
    let d = |strategy, tp, offload| DistConfig { strategy, tp, offload, ..DistConfig::default() };
    let fsdp_mp = DistConfig { strategy: Strategy::Fsdp, fsdp_param_dtype: Some(MpDtype::Bf16), fsdp_reduce_dtype: Some(MpDtype::Fp32), ..DistConfig::default() };
    vec![
        Row { label: "DDP, AMP bf16", precision: AmpBf16, dist: d(Strategy::Ddp, 1, Offload::None) },
        Row { label: "ZeRO-1, bf16 + fp32 master", precision: Bf16, dist: d(Strategy::Zero1, 1, Offload::None) },
        Row { label: "ZeRO-2, bf16 + fp32 master", precision: Bf16, dist: d(Strategy::Zero2, 1, Offload::None) },
        Row { label: "ZeRO-3, bf16 + fp32 master", precision: Bf16, dist: d(Strategy::Zero3, 1, Offload::None) },
        Row { label: "ZeRO-3 + offload optimizer", precision: Bf16, dist: d(Strategy::Zero3, 1, Offload::Optimizer) },
        Row { label: "ZeRO-3 + offload params", precision: Bf16, dist: d(Strategy::Zero3, 1, Offload::Params) },
        Row { label: "FSDP2, fp32 + MP(bf16, fp32)", precision: Fp32, dist: fsdp_mp },
        Row { label: "FSDP2 × TP 8, fp32 + MP(bf16, fp32)", precision: Fp32, dist: DistConfig { tp: 8, ..fsdp_mp } },
        Row { label: "TP 8 × DDP, AMP bf16", precision: AmpBf16, dist: d(Strategy::Tp, 8, Offload::None) },
        Row { label: "TP 8 + sequence parallelism × DDP, AMP bf16", precision: AmpBf16, dist: DistConfig { sequence_parallel: true, ..d(Strategy::Tp, 8, Offload::None) } },
    ]
}

/// A Markdown table of rank 0's peak for each strategy and world size, with the fewest GPUs of
/// `gpu` that fit, and what each figure rests on.
pub fn strategies(spec: &ModelSpec, config: &TrainConfig, world_sizes: &[u64], gpu: &vramcalc_core::Gpu, unit: ByteUnit) -> Result<String> {
    let mut o = String::new();
    let f = |b: u64| format_bytes(b, unit);
    write!(o, "| {} ({} params), batch {} per GPU, seq {}{} | ", spec.display_name(), vramcalc_core::thousands(vramcalc_core::estimate(spec, &TrainConfig { batch: 1, ..*config })?.params),
        config.batch, config.seq_len.map_or("-".into(), |s| s.to_string()), if config.checkpointing { ", checkpointing" } else { "" })?;
    for n in world_sizes {
        write!(o, "N = {n} | ")?;
    }
    writeln!(o, "fewest {} | what it rests on |", gpu.id)?;
    writeln!(o, "|---|{}---|---|", "---:|".repeat(world_sizes.len()))?;
    for r in rows() {
        let c = TrainConfig { precision: r.precision, ..*config };
        write!(o, "| {} | ", r.label)?;
        let mut basis = String::new();
        for &n in world_sizes {
            let d = DistConfig { gpus: n, ..r.dist };
            match distributed::estimate(spec, &c, &d) {
                Ok(e) => {
                    let host = e.distributed.as_ref().map_or(0, |d| d.host_bytes);
                    basis = e.distributed.map(|d| d.basis).unwrap_or_default();
                    let host = if host > 0 { format!(" + host {}", f(host)) } else { String::new() };
                    write!(o, "{}{host} | ", f(e.estimate.peak_bytes))?;
                }
                Err(e) => write!(o, "— ({e}) | ")?,
            }
        }
        let fewest = distributed::fewest_gpus(spec, &c, &r.dist, gpu.bytes, 4096)?;
        let fewest = fewest.map_or("> 4096".to_string(), |(n, b)| format!("{n} (batch ≤ {b})"));
        writeln!(o, "{fewest} | {basis} |")?;
    }
    Ok(o)
}

/// The job's what-ifs (`--what-if` with `--gpus`): each change alone on this job, against its
/// rank 0's device total; only the changes that lower it.
pub fn what_if_text(w: &vramcalc_core::whatif::job::JobWhatIfs, unit: ByteUnit) -> Result<String> {
    let mut o = String::new();
    let f = |b: u64| format_bytes(b, unit);
    writeln!(o)?;
    writeln!(o, "what if (each change alone, on this job; rank 0's device total {})", f(w.device_total))?;
    if w.items.is_empty() {
        writeln!(o, "  no change lowers this job's memory")?;
    }
    for i in &w.items {
        let fits = match i.fits {
            Some(true) => ", fits alone",
            Some(false) => ", does not fit alone",
            None => "",
        };
        let pct = i.saves as f64 * 100.0 / w.device_total.max(1) as f64;
        writeln!(o, "  {:<58}{:>12}   saves {} ({pct:.0}%){fits}", i.describe, f(i.device_total), f(i.saves))?;
    }
    Ok(o)
}
