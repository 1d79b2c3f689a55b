//! `--safetensors-index` / `--safetensors`: the checkpoint's size as stored beside the modelled
//! weights (`vramcalc_core::safetensors`), both shown, flagged when they disagree by more than 1 %;
//! and the skip patterns of a `--hf-config`'s `quantization_config` the formats do not model.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramcalc_core::safetensors::{disagreement, header_extent, read_header, read_index, DISAGREE_ABOVE};
use vramcalc_core::units::{format_bytes, ByteUnit};
use vramcalc_core::Estimate;

#[derive(Args, Default)]
pub struct CheckpointArgs {
    /// A sharded checkpoint's `model.safetensors.index.json`: its `metadata.total_size` is shown
    /// as the checkpoint as stored, beside the modelled weights.
    #[arg(long)]
    pub safetensors_index: Option<PathBuf>,
    /// A `.safetensors` file (repeat for several shards): the tensor bytes its header lists (only
    /// the header is read).
    #[arg(long)]
    pub safetensors: Vec<PathBuf>,
}

/// A checkpoint's stored tensor bytes and where they were read.
pub struct Stored {
    pub bytes: u64,
    pub source: String,
    /// Data bytes per safetensors dtype (headers only: an index names no dtypes).
    pub by_dtype: Vec<(&'static str, u64)>,
}

impl CheckpointArgs {
    /// The stored bytes: the index's `total_size`, else the sum of the files' headers.
    pub fn stored(&self) -> Result<Option<Stored>> {
        if let Some(path) = &self.safetensors_index {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let index = read_index(&text).with_context(|| format!("in {}", path.display()))?;
            let files = index.files.len();
            let source = format!("{}: metadata.total_size, {files} files", path.display());
            return Ok(Some(Stored { bytes: index.total_size, source, by_dtype: Vec::new() }));
        }
        if self.safetensors.is_empty() {
            return Ok(None);
        }
        let (mut bytes, mut by_dtype) = (0u64, Vec::<(&'static str, u64)>::new());
        for path in &self.safetensors {
            let header = read_header(&read_safetensors_header(path)?).with_context(|| format!("in {}", path.display()))?;
            bytes = bytes.saturating_add(header.data_bytes());
            for (d, b) in header.bytes_by_dtype() {
                match by_dtype.iter_mut().find(|(n, _)| *n == d) {
                    Some((_, t)) => *t = t.saturating_add(b),
                    None => by_dtype.push((d, b)),
                }
            }
        }
        let n = self.safetensors.len();
        Ok(Some(Stored { bytes, source: format!("{n} safetensors header{}", if n == 1 { "" } else { "s" }), by_dtype }))
    }
}

/// The first `8 + n` bytes of a safetensors file: its header, without its data.
fn read_safetensors_header(path: &PathBuf) -> Result<Vec<u8>> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut first = [0u8; 8];
    f.read_exact(&mut first).with_context(|| format!("{}: shorter than a safetensors length field", path.display()))?;
    let extent = header_extent(&first).with_context(|| format!("in {}", path.display()))?;
    let mut bytes = first.to_vec();
    f.take(extent - 8).read_to_end(&mut bytes).with_context(|| format!("reading {}", path.display()))?;
    Ok(bytes)
}

/// Adds the comparison (and the skip notes) to an estimate's text or JSON.
pub fn annotate(mut text: String, args: &CheckpointArgs, notes: &[String], est: &Estimate, unit: ByteUnit, json: bool) -> Result<String> {
    let stored = args.stored()?;
    if stored.is_none() && notes.is_empty() {
        return Ok(text);
    }
    let modelled = est.param_bytes;
    if json {
        let mut v: serde_json::Value = serde_json::from_str(&text)?;
        if let Some(o) = v.as_object_mut() {
            if let Some(s) = &stored {
                let rel = disagreement(s.bytes, modelled);
                o.insert(
                    "checkpoint".into(),
                    serde_json::json!({"stored_bytes": s.bytes, "source": s.source, "stored_bytes_by_dtype": s.by_dtype.iter().map(|(d, b)| (d.to_string(), serde_json::json!(b))).collect::<serde_json::Map<_, _>>(), "modelled_weight_bytes": modelled, "disagree": rel.is_some(), "relative_difference": rel}),
                );
            }
            if !notes.is_empty() {
                o.insert("quantization_notes".into(), serde_json::json!(notes));
            }
        }
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    if let Some(s) = stored {
        text += &format!("\ncheckpoint as stored: {} ({})\n", format_bytes(s.bytes, unit), s.source);
        if !s.by_dtype.is_empty() {
            let parts: Vec<String> = s.by_dtype.iter().map(|(d, b)| format!("{d} {}", format_bytes(*b, unit))).collect();
            text += &format!("  by dtype:           {}\n", parts.join(", "));
        }
        let format = est.config.weights.map_or_else(|| format!("{:?}", est.config.precision).to_lowercase(), |w| w.name());
        text += &format!("modelled weights:     {} ({format})\n", format_bytes(modelled, unit));
        match disagreement(s.bytes, modelled) {
            Some(rel) => {
                text += &format!(
                    "they disagree by {:+.1} % (more than {:.0} %): check --weights / the config's quantization_config against the checkpoint\n",
                    rel * 100.0,
                    DISAGREE_ABOVE * 100.0
                )
            }
            None => text += &format!("they agree within {:.0} %\n", DISAGREE_ABOVE * 100.0),
        }
    }
    for n in notes {
        text += &format!("note: {n}\n");
    }
    Ok(text)
}

/// What a `--hf-config`'s `quantization_config` keeps unquantised that the weights figure counts
/// quantised, one sentence each: the skip list is applied by module name (the spec's
/// `unquantised`), so only where the importer gives the layers no names
/// (`formats::skip::unmodelled` then says what the patterns would keep).
pub fn notes(hf_config: Option<&PathBuf>, weights: Option<vramcalc_core::formats::WeightFormat>, spec: &vramcalc_core::ModelSpec) -> Result<Vec<String>> {
    let (Some(path), Some(format)) = (hf_config, weights) else { return Ok(Vec::new()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let Some(q) = v.get("quantization_config").filter(|q| !q.is_null()) else { return Ok(Vec::new()) };
    let unnamed = if spec.names.is_empty() { vramcalc_core::formats::skip::unmodelled(q, format) } else { Vec::new() };
    Ok(unnamed
        .into_iter()
        .map(|(p, what)| format!("quantization_config keeps `{p}` ({what}) unquantised; this model's layers have no module names here, so the weights figure counts it as {format}"))
        .collect())
}
