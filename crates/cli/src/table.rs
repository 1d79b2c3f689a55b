//! Human and JSON output. Formats `Estimate`s; computes no memory.

use anyhow::Result;
use serde_json::json;
use std::fmt::Write as _;
use vramcalc_core::memory::Prepared;
use vramcalc_core::units::{format_bytes, thousands, ByteUnit};
use vramcalc_core::whatif::finetune::FineTuneWhatIf;
use vramcalc_core::memory::generate::GenerationReport;
use vramcalc_core::whatif::WhatIf;
use vramcalc_core::whatif_gen::GenWhatIf;
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

/// `vramcalc presets --table`: every preset's parameters, its weights in fp16 and the peak of
/// one full training step at one stated setting, as a Markdown table (the README's).
pub fn presets_table() -> Result<String> {
    use vramcalc_core::{AttentionImpl, OptimizerKind, Precision};
    let mut o = String::new();
    writeln!(o, "Training peak: one step of full training, batch 1 at the preset's default sequence length, AMP bf16 (fp32 weights, gradients and AdamW state), SDPA attention, no checkpointing; `max_memory_allocated`, in GB (10^9 B).")?;
    writeln!(o)?;
    writeln!(o, "| preset | family | sequence | parameters | fp16 weights | training peak |")?;
    writeln!(o, "|---|---|---:|---:|---:|---:|")?;
    for p in vramcalc_core::presets::list() {
        let spec = vramcalc_core::import::preset(p.id)?;
        let cfg = TrainConfig {
            batch: 1,
            precision: Precision::AmpBf16,
            optimizer: OptimizerKind::Adamw,
            attention: AttentionImpl::Sdpa,
            ..TrainConfig::default()
        };
        let est = Prepared::new(&spec, &cfg)?.estimate();
        let seq = spec.seq_len(None).map_or("–".to_string(), |s| s.to_string());
        let gb = |b: u64| format!("{:.2}", b as f64 / 1e9);
        writeln!(
            o,
            "| {} | {} | {seq} | {} | {} GB | {} GB |",
            p.title,
            format!("{:?}", p.family).to_lowercase(),
            thousands(est.params),
            gb(est.params.saturating_mul(2)),
            gb(est.peak_bytes),
        )?;
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

pub fn estimate(spec: &ModelSpec, est: &Estimate, what_ifs: Option<&[WhatIf]>, tuning: &[FineTuneWhatIf], gen_what_ifs: &[GenWhatIf], unit: ByteUnit, as_json: bool) -> Result<String> {
    let mut o = String::new();
    if as_json {
        let mut v = serde_json::to_value(est)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("model".into(), json!(spec.display_name()));
            o.insert("engine".into(), json!(est.config.engine()));
            if let Some(w) = what_ifs {
                let mut list = serde_json::to_value(w)?;
                if let Some(list) = list.as_array_mut() {
                    for t in tuning {
                        list.push(serde_json::to_value(t)?);
                    }
                    list.extend(gen_what_ifs.iter().filter_map(|g| serde_json::to_value(g).ok()));
                }
                o.insert("what_ifs".into(), list);
            }
        }
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(o);
    }
    let c = &est.config;
    let f = |b: u64| format_bytes(b, unit);
    writeln!(o, "{} — {} parameters (engine: {})", spec.display_name(), thousands(est.params), c.engine())?;
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
    if est.trainable_params != est.params && c.mode == vramcalc_core::Mode::Train {
        let pct = est.trainable_params as f64 / est.params.max(1) as f64 * 100.0;
        writeln!(
            o,
            "{}: trainable params: {} || all params: {} || trainable%: {pct:.4}{}",
            c.finetune.method.name(),
            thousands(est.trainable_params),
            thousands(est.params),
            est.quantised_base.map(|f| format!(" (base in {}: modelled from bitsandbytes, not measured)", f.name())).unwrap_or_default()
        )?;
    }
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
        if k == vramcalc_core::Category::Parameters {
            for (label, part) in [("of which frozen", est.breakdown.frozen_parameters), ("of which adapters", est.breakdown.adapter_parameters)] {
                if part > 0 {
                    writeln!(o, "    {label:<18}{:>9}", f(part))?;
                }
            }
        }
        if k == vramcalc_core::Category::Activations && est.breakdown.weight_casts > 0 {
            writeln!(
                o,
                "    {:<22}{:>9}   autocast's half copies of the weights, cached until the forward ends (whole, even under FSDP); --autocast-cache off or FSDP's --fsdp-param-dtype avoid them",
                "of which weight casts",
                f(est.breakdown.weight_casts)
            )?;
        }
    }
    if est.breakdown.kv_cache > 0 {
        writeln!(o, "  {:<15}{:>12}", "kv cache", f(est.breakdown.kv_cache))?;
    }
    if let Some(g) = &est.generation {
        generation(&mut o, est, g, unit)?;
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
        let rows = items.iter().map(|w| (w.trick.describe(), w.peak)).chain(tuning.iter().map(|w| (w.trick.describe(), w.peak)));
        let rows: Vec<(&str, u64)> = rows.chain(gen_what_ifs.iter().map(|w| (w.trick.describe(), w.peak))).collect();
        what_if_table(&mut o, &rows, est.peak_bytes, unit)?;
    }
    Ok(o)
}

/// The prefill and decode peaks, the KV cache and a few points of memory over the decode steps.
fn generation(o: &mut String, est: &Estimate, g: &GenerationReport, unit: ByteUnit) -> Result<()> {
    let f = |b: u64| format_bytes(b, unit);
    let c = &est.config.generate;
    writeln!(o)?;
    writeln!(
        o,
        "generate: prompt {} + {} new tokens, {} KV cache{}, logits_to_keep {}",
        g.prompt_len,
        g.new_tokens,
        c.cache,
        c.kv_dtype.map(|d| format!(" ({d})")).unwrap_or_default(),
        c.logits_to_keep
    )?;
    writeln!(o, "  prefill peak   {:>12}", f(g.prefill_peak_bytes))?;
    if g.new_tokens > 1 {
        writeln!(o, "  decode peak    {:>12}   (the last step)", f(g.decode_peak_bytes))?;
    }
    writeln!(o, "  KV cache       {:>12}   at the end ({} after the prefill)", f(g.kv_cache_bytes), f(g.kv_cache_bytes_after_prefill))?;
    if g.decode_series.len() > 1 {
        let picks = [0, g.decode_series.len() / 4, g.decode_series.len() / 2, 3 * g.decode_series.len() / 4, g.decode_series.len() - 1];
        let points: Vec<String> = picks.iter().map(|&i| g.decode_series[i]).map(|(t, b)| format!("step {t}: {}", f(b))).collect();
        writeln!(o, "  decode steps   {}", points.join(", "))?;
    }
    Ok(())
}

/// Each trick's peak (`(what the trick does, its peak)`) against `base`, the current peak.
fn what_if_table(o: &mut String, rows: &[(&str, u64)], base: u64, unit: ByteUnit) -> Result<()> {
    let f = |b: u64| format_bytes(b, unit);
    writeln!(o)?;
    writeln!(o, "what if (each trick alone)")?;
    if rows.is_empty() {
        writeln!(o, "  no trick applies to this setup")?;
    }
    for &(describe, peak) in rows {
        let effect = match peak.cmp(&base) {
            std::cmp::Ordering::Less => {
                let saved = base - peak;
                format!("saves {} ({:.0}%)", f(saved), saved as f64 * 100.0 / base.max(1) as f64)
            }
            std::cmp::Ordering::Greater => format!("adds {}", f(peak - base)),
            std::cmp::Ordering::Equal => "no change".to_string(),
        };
        writeln!(o, "  {describe:<48}{:>12}   {effect}", f(peak))?;
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
