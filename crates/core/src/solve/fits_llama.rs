//! The `llama-cpp` rows of "what fits my GPUs": a model's `config.json` quantized as
//! `llama-quantize` would (`llama_cpp::synth`: the GGUF tensor list without the file), loaded by
//! llama.cpp with every layer on the GPUs (`-ngl all`, split over mixed cards by their memory as
//! llama.cpp splits by free memory), sized by llama.cpp's own allocation (`llama_cpp::estimate`);
//! the reverse figure is the longest context (`-c`) that fits (`llama_cpp::fit::max_context`, up
//! to the model's training context).

use super::fits_row::{FitsOptions, Row};
use super::Variable;
use crate::error::{Error, Result};
use crate::llama_cpp::{fit, synth, GpuDevice, Params};

/// The six `llama-quantize` types the rows try, largest first.
pub const QUANTS: [&str; 6] = ["q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k"];

fn llama(e: crate::llama_cpp::LlamaError) -> Error {
    Error::Config(format!("llama.cpp: {e}"))
}

/// One row: the model of `config` (a Hugging Face `config.json`: llama, mistral, qwen2, qwen3,
/// qwen3_moe) in `quant` on `gpus` (bytes of each card, in order). `device_total_bytes` is what
/// the GPUs hold together, `margin_bytes` the smallest card's room left (negative: that card
/// overflows); the host's RAM is not checked.
pub fn row(id: &str, config: &serde_json::Value, quant: &str, gpus: &[u64], o: &FitsOptions) -> Result<Row> {
    let recipe = synth::recipe(quant).ok_or_else(|| Error::Config(format!("llama-quantize type {quant}")))?;
    let header = synth::header_from_config(config, recipe).map_err(llama)?;
    let devices: Vec<GpuDevice> = gpus.iter().enumerate().map(|(i, &capacity)| GpuDevice { name: format!("GPU{i}"), capacity }).collect();
    let p = Params { n_ctx: o.seq_len.unwrap_or(4096), n_parallel: o.batch.max(1), ..Params::default() };
    let e = crate::llama_cpp::estimate(&header, &p, &devices, None).map_err(llama)?;
    let margin = e.gpus().map(|d| d.capacity.unwrap_or(u64::MAX) as i128 - d.total() as i128).min().unwrap_or(0);
    let held: u64 = e.gpus().map(|d| d.total()).sum();
    let train = config.get("max_position_embeddings").and_then(serde_json::Value::as_u64).unwrap_or(4096);
    let longest = if e.fits() { fit::max_context(&header, &p, &devices, None, train).map_err(llama)? } else { None };
    Ok(Row {
        model: id.to_string(),
        format: quant.to_string(),
        method: "llama-cpp".into(),
        fits: e.fits(),
        device_total_bytes: held,
        peak_bytes: held,
        margin_bytes: margin.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        reverse_of: Variable::Context,
        reverse_value: longest,
    })
}

/// The rows of every model whose `config.json` is known (a preset's own, `presets::hf_config`)
/// and that llama.cpp's tensor list covers; other models and pairs are left out.
pub fn rows(models: &[(&str, &serde_json::Value)], gpus: &[u64], o: &FitsOptions) -> Vec<Row> {
    let mut out = Vec::new();
    for &(id, config) in models {
        for q in QUANTS {
            if let Ok(r) = row(id, config, q, gpus, o) {
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(id: &str) -> serde_json::Value {
        serde_json::from_str(crate::presets::hf_config(id).unwrap()).unwrap()
    }

    /// The row is llama.cpp's estimate at the row's settings, and its longest context is the
    /// edge: it fits, 256 tokens more do not (or it is the training context).
    #[test]
    fn a_row_is_llama_cpp_s_estimate_and_its_longest_context_is_the_edge() {
        let c = config("llama-3.1-8b");
        let gpus = [24_564u64 << 20];
        let o = FitsOptions::default();
        let r = row("llama-3.1-8b", &c, "q4_k_m", &gpus, &o).unwrap();
        assert!(r.fits && r.margin_bytes > 0, "{r:?}");
        let h = synth::header_from_config(&c, synth::recipe("q4_k_m").unwrap()).unwrap();
        let dev = [GpuDevice { name: "GPU0".into(), capacity: gpus[0] }];
        let at = |n_ctx: u64| crate::llama_cpp::estimate(&h, &Params { n_ctx, ..Params::default() }, &dev, None).unwrap();
        assert_eq!(r.device_total_bytes, at(4096).gpus().map(|d| d.total()).sum::<u64>());
        let longest = r.reverse_value.unwrap();
        assert!(at(longest).fits());
        assert!(longest == 131_072 || !at(longest + 256).fits(), "{longest}");
        // Q8_0 of a 70B model does not fit one 24 GB card, and two cards hold more than one
        let big = config("llama-3.1-70b");
        let one = row("llama-3.1-70b", &big, "q2_k", &gpus, &o).unwrap();
        assert!(!row("llama-3.1-70b", &big, "q8_0", &gpus, &o).unwrap().fits);
        let two = row("llama-3.1-70b", &big, "q2_k", &[gpus[0], 16_311 << 20], &o).unwrap();
        assert!(two.margin_bytes > one.margin_bytes, "{} vs {}", two.margin_bytes, one.margin_bytes);
    }

    #[test]
    fn models_llama_cpp_cannot_list_are_left_out() {
        let t5 = config("t5-base");
        assert!(rows(&[("t5-base", &t5)], &[24 << 30], &FitsOptions::default()).is_empty());
        let q = config("qwen2.5-0.5b");
        assert_eq!(rows(&[("qwen2.5-0.5b", &q)], &[24 << 30], &FitsOptions::default()).len(), 6);
    }
}
