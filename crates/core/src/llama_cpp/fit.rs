//! Reverse answers: the largest context that fits, the most layers on the GPUs, and the
//! `llama-server` command line that runs it.

use crate::gguf::{GgmlType, Header};

use super::estimate::{estimate, Estimate};
use super::params::{FlashAttn, GpuDevice, Params, SplitMode, Target};
use super::error::LlamaError;

/// The largest `x` in `lo..=hi` with `fits(x)`, for a `fits` that holds up to some point and not
/// after it (memory grows with `x`); `None` when `fits(lo)` fails. O(log(hi − lo)) calls.
pub fn largest_fitting(lo: u64, hi: u64, fits: impl Fn(u64) -> bool) -> Option<u64> {
    if lo > hi || !fits(lo) {
        return None;
    }
    if fits(hi) {
        return Some(hi);
    }
    // fits(good) and !fits(bad) throughout.
    let (mut good, mut bad) = (lo, hi);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if fits(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

/// The largest `-c` (a multiple of 256, as llama.cpp pads it) at which every device fits, up to
/// `max_ctx` (e.g. the model's training context); `None` when 256 does not fit.
pub fn max_context(h: &Header, p: &Params, gpus: &[GpuDevice], host_ram: Option<u64>, max_ctx: u64) -> Result<Option<u64>, LlamaError> {
    // Errors other than not fitting (bad flags) show at the smallest context.
    estimate(h, &Params { n_ctx: 256, ..p.clone() }, gpus, host_ram)?;
    let fits = |k: u64| estimate(h, &Params { n_ctx: k * 256, ..p.clone() }, gpus, host_ram).is_ok_and(|e| e.fits());
    Ok(largest_fitting(1, (max_ctx / 256).max(1), fits).map(|k| k * 256))
}

/// The most layers (`-ngl`, of `n_layer + 1` counting the output layer) whose buffers fit the
/// GPUs; the host takes the rest (its RAM checked only if given). `None` when not even 0 fits.
pub fn max_gpu_layers(h: &Header, p: &Params, gpus: &[GpuDevice], host_ram: Option<u64>) -> Result<Option<(u64, Estimate)>, LlamaError> {
    let e = estimate(h, &Params { n_gpu_layers: Some(0), ..p.clone() }, gpus, host_ram)?;
    let n = u64::from(e.n_layer) + 1;
    let at = |ngl: u64| estimate(h, &Params { n_gpu_layers: Some(ngl), ..p.clone() }, gpus, host_ram);
    let Some(best) = largest_fitting(0, n, |ngl| at(ngl).is_ok_and(|e| e.fits())) else { return Ok(None) };
    Ok(Some((best, at(best)?)))
}

fn type_name(t: GgmlType) -> &'static str {
    t.name
}

/// A `llama-server` command line for these settings (flags at llama.cpp's defaults left out).
pub fn server_command(model_path: &str, p: &Params, n_layer: u32) -> String {
    let d = Params::default();
    let mut out = vec!["llama-server".to_string(), "-m".into(), shell_quote(model_path)];
    out.extend(["-c".into(), p.n_ctx.to_string()]);
    match p.n_gpu_layers {
        Some(n) if n <= u64::from(n_layer) => out.extend(["-ngl".into(), n.to_string()]),
        _ => out.extend(["-ngl".into(), "all".into()]),
    }
    out.extend(["-fa".into(), match p.flash_attn { FlashAttn::On => "on", FlashAttn::Off => "off", FlashAttn::Auto => "auto" }.into()]);
    if p.type_k != d.type_k {
        out.extend(["-ctk".into(), type_name(p.type_k).into()]);
    }
    if p.type_v != d.type_v {
        out.extend(["-ctv".into(), type_name(p.type_v).into()]);
    }
    if p.n_batch != d.n_batch {
        out.extend(["-b".into(), p.n_batch.to_string()]);
    }
    if p.n_ubatch != d.n_ubatch {
        out.extend(["-ub".into(), p.n_ubatch.to_string()]);
    }
    if p.n_parallel != 1 {
        out.extend(["-np".into(), p.n_parallel.to_string()]);
    }
    if p.kv_unified {
        out.push("--kv-unified".into());
    }
    if p.n_cpu_moe > 0 {
        out.extend(["--n-cpu-moe".into(), p.n_cpu_moe.to_string()]);
    }
    for o in &p.overrides {
        let t = match o.target {
            Target::Cpu => "CPU".to_string(),
            Target::Gpu(i) => format!("CUDA{i}"),
        };
        out.extend(["-ot".into(), shell_quote(&format!("{}={t}", o.pattern))]);
    }
    if !p.tensor_split.is_empty() {
        out.extend(["-ts".into(), p.tensor_split.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")]);
    }
    match p.split_mode {
        SplitMode::Layer => {}
        SplitMode::None => out.extend(["-sm".into(), "none".into()]),
        SplitMode::Row => out.extend(["-sm".into(), "row".into()]),
    }
    if p.swa_full {
        out.push("--swa-full".into());
    }
    if !p.mmap {
        out.push("--no-mmap".into());
    }
    if !p.op_offload {
        out.push("--no-op-offload".into());
    }
    out.join(" ")
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_fitting_finds_the_edge() {
        for edge in [0u64, 1, 5, 99, 100] {
            assert_eq!(largest_fitting(0, 100, |x| x <= edge), Some(edge));
        }
        assert_eq!(largest_fitting(3, 100, |x| x <= 2), None);
        assert_eq!(largest_fitting(0, u64::MAX, |x| x <= 1 << 40), Some(1 << 40));
        assert_eq!(largest_fitting(0, u64::MAX, |_| true), Some(u64::MAX));
        let calls = std::cell::Cell::new(0);
        largest_fitting(0, 1 << 20, |x| {
            calls.set(calls.get() + 1);
            x < 777
        });
        assert!(calls.get() <= 23, "{}", calls.get());
    }

    #[test]
    fn quotes_what_the_shell_would_split() {
        assert_eq!(shell_quote("a/b.gguf"), "a/b.gguf");
        assert_eq!(shell_quote("my model.gguf"), "'my model.gguf'");
        assert_eq!(shell_quote(r"blk\.(\d+)\.ffn=CPU"), r"'blk\.(\d+)\.ffn=CPU'");
    }
}
