//! Human and JSON output. Formats `Estimate`s; computes no memory.

use anyhow::Result;
use serde_json::json;
use std::fmt::Write as _;
use vramcalc_core::memory::Prepared;
use vramcalc_core::units::{format_bytes, thousands, ByteUnit};
use vramcalc_core::whatif::WhatIf;
use vramcalc_core::{Estimate, ModelSpec, TrainConfig, GPUS};

pub fn presets(as_json: bool) -> Result<String> {
    let mut o = String::new();
    let list = vramcalc_core::presets::list();
    if as_json {
        writeln!(o, "{}", serde_json::to_string_pretty(list)?)?;
    } else {
        for p in list {
            writeln!(
                o,
                "{:<20} {:<12} {}",
                p.id,
                format!("{:?}", p.family).to_lowercase(),
                p.title
            )?;
        }
    }
    Ok(o)
}

pub fn gpus(as_json: bool) -> Result<String> {
    let mut o = String::new();
    if as_json {
        writeln!(o, "{}", serde_json::to_string_pretty(GPUS)?)?;
    } else {
        for g in GPUS {
            writeln!(
                o,
                "{:<18} {:>10}  {}",
                g.id,
                format_bytes(g.bytes, ByteUnit::Mib),
                g.name
            )?;
        }
    }
    Ok(o)
}

pub fn show(spec: &ModelSpec, est: &Estimate, as_json: bool) -> Result<String> {
    let mut o = String::new();
    if as_json {
        let layers: Vec<_> = est
            .layers
            .iter()
            .map(|l| json!({"path": l.info.path, "kind": l.info.kind, "output_shape": l.info.output_shape, "params": l.info.params, "activation_values": l.info.activation_values}))
            .collect();
        writeln!(
            o,
            "{}",
            serde_json::to_string_pretty(
                &json!({"model": spec.display_name(), "params": est.params, "layers": layers})
            )?
        )?;
        return Ok(o);
    }
    writeln!(
        o,
        "{}: {} parameters",
        spec.display_name(),
        thousands(est.params)
    )?;
    writeln!(
        o,
        "{:<48} {:<26} {:<22} {:>14} {:>14}",
        "path", "kind", "output shape", "params", "activations"
    )?;
    for l in &est.layers {
        let indent = "  ".repeat(l.info.depth as usize);
        writeln!(
            o,
            "{:<48} {:<26} {:<22} {:>14} {:>14}",
            format!("{indent}{}", l.info.path),
            l.info.kind,
            l.info.output_shape.to_string(),
            thousands(l.info.params),
            thousands(l.info.activation_values)
        )?;
    }
    Ok(o)
}

pub fn estimate(spec: &ModelSpec, est: &Estimate, what_ifs: Option<&[WhatIf]>, unit: ByteUnit, as_json: bool) -> Result<String> {
    let mut o = String::new();
    if as_json {
        let mut v = serde_json::to_value(est)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("model".into(), json!(spec.display_name()));
            if let Some(w) = what_ifs {
                o.insert("what_ifs".into(), serde_json::to_value(w)?);
            }
        }
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(o);
    }
    let c = &est.config;
    let f = |b: u64| format_bytes(b, unit);
    writeln!(
        o,
        "{} — {} parameters",
        spec.display_name(),
        thousands(est.params)
    )?;
    writeln!(
        o,
        "batch {} (micro-batch {}), {}, {} ({}), {}{}{}{}",
        c.batch,
        c.micro_batch(),
        c.precision,
        c.optimizer,
        c.optimizer_impl,
        c.mode,
        if c.checkpointing {
            ", checkpointing"
        } else {
            ""
        },
        c.seq_len
            .map(|s| format!(", seq len {s}"))
            .unwrap_or_default(),
        c.weights
            .map(|w| format!(", weights {w} ({})", f(est.param_bytes)))
            .unwrap_or_default()
    )?;
    writeln!(o)?;
    writeln!(
        o,
        "peak allocated   {:>12}   ({} bytes) in {}",
        f(est.peak_bytes),
        thousands(est.peak_bytes),
        est.peak_at
    )?;
    for (k, b) in est.breakdown.entries() {
        if b > 0 {
            writeln!(o, "  {:<15}{:>12}", k.key().replace('_', " "), f(b))?;
        }
    }
    writeln!(o, 
        "device total  ≈ {:>12}   (reserved {} + CUDA context {} + cuBLAS workspace {}; approximate)",
        f(est.device_total_bytes),
        f(est.device.reserved),
        f(est.device.cuda_context),
        f(est.device.cublas_workspace)
    )?;
    writeln!(
        o,
        "rule of thumb    {:>12}   (params × n + batch × outputs × 2 + input, for comparison)",
        f(est.rule_of_thumb_bytes)
    )?;
    if let Some(items) = what_ifs {
        what_if_table(&mut o, items, est.peak_bytes, unit)?;
    }
    Ok(o)
}

/// Each trick's peak against `base`, the current peak.
fn what_if_table(o: &mut String, items: &[WhatIf], base: u64, unit: ByteUnit) -> Result<()> {
    let f = |b: u64| format_bytes(b, unit);
    writeln!(o)?;
    writeln!(o, "what if (each trick alone)")?;
    if items.is_empty() {
        writeln!(o, "  no trick applies to this setup")?;
    }
    for w in items {
        let effect = match w.peak.cmp(&base) {
            std::cmp::Ordering::Less => {
                let saved = base - w.peak;
                format!("saves {} ({:.0}%)", f(saved), saved as f64 * 100.0 / base.max(1) as f64)
            }
            std::cmp::Ordering::Greater => format!("adds {}", f(w.peak - base)),
            std::cmp::Ordering::Equal => "no change".to_string(),
        };
        writeln!(o, "  {:<30}{:>12}   {effect}", w.trick.describe(), f(w.peak))?;
    }
    Ok(())
}

pub fn max_batch(
    spec: &ModelSpec,
    config: &TrainConfig,
    capacity: u64,
    unit: ByteUnit,
    as_json: bool,
) -> Result<String> {
    let mut o = String::new();
    let prepared = Prepared::new(spec, config)?;
    let best = prepared.max_batch(capacity);
    let at = best.map(|b| prepared.peak_at(b));
    if as_json {
        writeln!(
            o,
            "{}",
            serde_json::to_string_pretty(&json!({
                "model": spec.display_name(),
                "capacity_bytes": capacity,
                "max_batch": best,
                "peak_bytes": at.map(|a| a.0),
                "device_total_bytes": at.map(|a| a.1),
            }))?
        )?;
        return Ok(o);
    }
    match (best, at) {
        (Some(b), Some((peak, total))) => writeln!(
            o,
            "{}: largest batch that fits {}: {b} (peak allocated {}, device total ≈ {})",
            spec.display_name(),
            format_bytes(capacity, unit),
            format_bytes(peak, unit),
            format_bytes(total, unit)
        ),
        _ => writeln!(
            o,
            "{}: even batch 1 does not fit {}",
            spec.display_name(),
            format_bytes(capacity, unit)
        ),
    }?;
    Ok(o)
}
