//! `vramcalc-verify`: runs a real training step with candle and holds vramcalc's candle-profile
//! estimate to the measured peak; lists and probes CUDA devices.
//!
//! ```text
//! vramcalc-verify run (--preset NAME | --spec FILE) --batch N [--optimizer sgd|adam|adamw]
//!     [--precision fp32] [--device cpu|cuda[:i]] [--steps 3] [--tolerance 5] [--input-size N]
//!     [--seq-len N] [--json]
//! vramcalc-verify gpus [--json]
//! vramcalc-verify probe [--device cuda[:i]]
//! ```

mod alloc;
mod gpu;
mod model;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap};
use serde_json::json;
use std::process::ExitCode;
use vramcalc_core::memory::candle::unsupported;
use vramcalc_core::spec::InputDType;
use vramcalc_core::{format_bytes, ByteUnit, Framework, ModelSpec, OptimizerKind, Precision, TrainConfig};

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vramcalc-verify: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else { bail!("usage: vramcalc-verify run|gpus|probe [options] (see --help)") };
    let raw = RawArgs::parse(&args[1..])?;
    match cmd.as_str() {
        "run" => verify(&RunArgs::from_raw(raw)?),
        "gpus" => {
            let list = gpu::list()?;
            if raw.json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for g in &list {
                    let f = |b: u64| format_bytes(b, ByteUnit::Mib);
                    println!("[{}] {:<28} total {:>12}  used {:>12}  free {:>12}", g.index, g.name, f(g.total_bytes), f(g.used_bytes), f(g.free_bytes));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        "probe" => {
            let dev = raw.device.as_deref().unwrap_or("cuda");
            let i = dev.strip_prefix("cuda:").map(str::parse).transpose().context("--device cuda:N")?.unwrap_or(0);
            println!("{}", serde_json::to_string_pretty(&gpu::probe(i)?)?);
            Ok(ExitCode::SUCCESS)
        }
        "-h" | "--help" | "help" => {
            println!("{}", include_str!("main.rs").lines().take_while(|l| l.starts_with("//!")).map(|l| l.trim_start_matches("//!").trim_start_matches(' ')).collect::<Vec<_>>().join("\n"));
            Ok(ExitCode::SUCCESS)
        }
        other => bail!("unknown command `{other}` (run, gpus, probe)"),
    }
}

/// Flags as written.
#[derive(Default)]
struct RawArgs {
    preset: Option<String>,
    spec: Option<String>,
    batch: Option<String>,
    optimizer: Option<String>,
    precision: Option<String>,
    device: Option<String>,
    steps: Option<String>,
    tolerance: Option<String>,
    input_size: Option<String>,
    seq_len: Option<String>,
    json: bool,
}

impl RawArgs {
    fn parse(args: &[String]) -> Result<RawArgs> {
        let mut r = RawArgs::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (a.as_str(), None),
            };
            if flag == "--json" {
                r.json = true;
                continue;
            }
            let slot = match flag {
                "--preset" => &mut r.preset,
                "--spec" => &mut r.spec,
                "--batch" => &mut r.batch,
                "--optimizer" => &mut r.optimizer,
                "--precision" => &mut r.precision,
                "--device" => &mut r.device,
                "--steps" => &mut r.steps,
                "--tolerance" => &mut r.tolerance,
                "--input-size" => &mut r.input_size,
                "--seq-len" => &mut r.seq_len,
                _ => bail!("unknown option `{a}`"),
            };
            *slot = Some(match inline {
                Some(v) => v,
                None => it.next().cloned().with_context(|| format!("{flag} needs a value"))?,
            });
        }
        Ok(r)
    }
}

/// Validated `run` options.
struct RunArgs {
    spec: ModelSpec,
    name: String,
    config: TrainConfig,
    device: String,
    steps: u32,
    tolerance: f64,
    json: bool,
}

impl RunArgs {
    fn from_raw(r: RawArgs) -> Result<RunArgs> {
        let (mut spec, name) = match (&r.preset, &r.spec) {
            (Some(p), None) => (vramcalc_core::presets::build(p)?, p.clone()),
            (None, Some(f)) => {
                let text = std::fs::read_to_string(f).with_context(|| format!("reading {f}"))?;
                (ModelSpec::from_json(&text)?, f.clone())
            }
            _ => bail!("give exactly one of --preset NAME or --spec FILE"),
        };
        let num = |v: &Option<String>, what: &str, default: u64| -> Result<u64> {
            match v {
                None => Ok(default),
                Some(s) => s.parse().with_context(|| format!("{what}: expected a positive integer, got `{s}`")),
            }
        };
        let batch = num(&r.batch, "--batch", 0)?;
        if batch == 0 {
            bail!("--batch N (at least 1) is required");
        }
        if let Some(n) = &r.input_size {
            let n: u64 = n.parse().context("--input-size")?;
            if spec.input.shape.len() != 3 || spec.input.dtype != InputDType::Float32 {
                bail!("--input-size applies to [C, H, W] image inputs");
            }
            spec.input.shape[1] = n;
            spec.input.shape[2] = n;
        }
        let optimizer = match r.optimizer.as_deref().unwrap_or("adamw") {
            "sgd" => OptimizerKind::Sgd,
            "adam" => OptimizerKind::Adam,
            "adamw" => OptimizerKind::Adamw,
            o => bail!("optimizer `{o}` is not in candle-nn (sgd, adam, adamw)"),
        };
        let precision = match r.precision.as_deref().unwrap_or("fp32") {
            "fp32" => Precision::Fp32,
            p => bail!("precision `{p}`: the verifier runs fp32 only"),
        };
        let seq_len = r.seq_len.as_deref().map(str::parse).transpose().context("--seq-len")?;
        if let Some((kind, path)) = unsupported(&spec.layers, "layers") {
            bail!("not supported by the verifier: {kind} at {path}");
        }
        let device = r.device.unwrap_or_else(|| "cpu".into());
        let config = TrainConfig {
            batch,
            seq_len,
            optimizer,
            precision,
            device: if device == "cpu" { vramcalc_core::Device::Cpu } else { vramcalc_core::Device::Cuda },
            framework: Framework::Candle,
            ..TrainConfig::default()
        };
        let tolerance: f64 = r.tolerance.as_deref().unwrap_or("5").parse().context("--tolerance")?;
        Ok(RunArgs { spec, name, config, device, steps: num(&r.steps, "--steps", 3)?.max(1) as u32, tolerance, json: r.json })
    }
}

/// Live bytes at a moment, for the device in use.
fn live(dev: &Device) -> Result<u64> {
    Ok(match dev {
        Device::Cpu => alloc::live(),
        _ => {
            let (free, total) = gpu::mem_info()?;
            total - free
        }
    })
}

struct Measured {
    /// Peak of the measured step, heap not owned by tensors taken out.
    peak: u64,
    raw_peak: u64,
    baseline: u64,
    persistent: u64,
    phase_peaks: [u64; 3],
}

fn verify(a: &RunArgs) -> Result<ExitCode> {
    let est = vramcalc_core::estimate(&a.spec, &a.config).context("the core's candle-profile estimate")?;
    let dev = model::device(&a.device)?;
    let on_cpu = matches!(dev, Device::Cpu);
    let m = measure(a, &dev)?;
    let diff = m.peak as f64 / est.peak_bytes.max(1) as f64 * 100.0 - 100.0;
    let ok = diff.abs() <= a.tolerance;
    let est_persistent = est.breakdown.parameters + est.breakdown.buffers + est.breakdown.optimizer_state + est.breakdown.input;
    let pct = |x: u64, y: u64| x as f64 / y.max(1) as f64 * 100.0 - 100.0;
    if a.json {
        let v = json!({
            "model": a.name, "batch": a.config.batch, "optimizer": a.config.optimizer.name(), "device": a.device,
            "input_shape": a.spec.input.shape,
            "measured_peak_bytes": m.peak, "estimated_peak_bytes": est.peak_bytes, "difference_percent": diff,
            "within_tolerance": ok, "tolerance_percent": a.tolerance,
            "measured_raw_peak_bytes": m.raw_peak, "non_tensor_baseline_bytes": m.baseline,
            "measured_persistent_bytes": m.persistent, "estimated_persistent_bytes": est_persistent,
            "measured_phase_peaks_bytes": m.phase_peaks, "estimated_phase_peaks_bytes": est.phase_peaks,
            "estimated_peak_phase": est.peak_phase, "estimated_peak_at": est.peak_at, "estimated_breakdown": est.breakdown,
            "exact": on_cpu,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let f = |b: u64| format_bytes(b, ByteUnit::Mib);
        println!("{} · batch {} · {} · {} · input {:?}", a.name, a.config.batch, a.config.optimizer, a.device, a.spec.input.shape);
        println!("{:<26} {:>14} {:>14} {:>8}", "", "measured", "estimated", "diff");
        println!("{:<26} {:>14} {:>14} {:>+7.1}%", "peak", f(m.peak), f(est.peak_bytes), diff);
        println!("{:<26} {:>14} {:>14} {:>+7.1}%", "persistent (params, state, batch)", f(m.persistent), f(est_persistent), pct(m.persistent, est_persistent));
        for (i, ph) in ["forward", "backward", "optimizer"].iter().enumerate() {
            println!("{:<26} {:>14} {:>14} {:>+7.1}%", format!("peak in {ph}"), f(m.phase_peaks[i]), f(est.phase_peaks[i]), pct(m.phase_peaks[i], est.phase_peaks[i]));
        }
        println!("estimated peak at {} ({})", est.peak_at, est.peak_phase.name());
        for (k, v) in est.breakdown.entries() {
            if v > 0 {
                println!("  {k:<18} {:>14}", f(v));
            }
        }
        println!(
            "raw {} peak {} (non-tensor heap {} subtracted){}",
            if on_cpu { "allocator" } else { "device" },
            f(m.raw_peak),
            f(m.baseline),
            if on_cpu { "" } else { " — device figures include the caching allocator's rounding" }
        );
        println!("{} (tolerance {}%)", if ok { "OK" } else { "FAIL: beyond tolerance" }, a.tolerance);
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn measure(a: &RunArgs, dev: &Device) -> Result<Measured> {
    let vm = VarMap::new();
    let vb = VarBuilder::from_varmap(&vm, DType::F32, dev);
    let blocks = model::build(&a.spec.layers, vb)?;
    let params = model::trainable(&vm);
    let b = a.config.batch as usize;
    let mut shape: Vec<usize> = a.spec.input.shape.iter().map(|&d| d as usize).collect();
    let tokens = a.spec.input.dtype == InputDType::Int64;
    if let (Some(s), true) = (a.config.seq_len, tokens || shape.len() == 2) {
        shape[0] = s as usize;
    }
    let mut full = vec![b];
    full.extend(&shape);
    let x = if tokens {
        let vocab = a.spec.input.vocab_size.unwrap_or(2).max(1) as u32;
        let n: usize = full.iter().product();
        Tensor::from_vec((0..n as u32).map(|i| i.wrapping_mul(2654435761) % vocab).collect::<Vec<_>>(), full.as_slice(), dev)?
    } else {
        Tensor::randn(0f32, 1f32, full.as_slice(), dev)?
    };
    // the loss' rows: the output without its last dimension
    let probe = model::forward_all(&blocks, &x, false)?;
    let dims = probe.dims().to_vec();
    drop(probe);
    let classes = *dims.last().context("model output is a scalar")?;
    let rows: usize = dims[..dims.len() - 1].iter().product();
    let target = Tensor::from_vec((0..rows as u32).map(|i| i % classes as u32).collect::<Vec<_>>(), rows, dev)?;
    let mut sgd;
    let mut adam;
    let opt: &mut dyn FnMut(&candle_core::backprop::GradStore) -> Result<()> = match a.config.optimizer {
        OptimizerKind::Sgd => {
            sgd = candle_nn::SGD::new(params.clone(), 0.01)?;
            &mut move |g| Ok(sgd.step(g)?)
        }
        kind => {
            let wd = if kind == OptimizerKind::Adam { 0.0 } else { 0.01 };
            adam = candle_nn::AdamW::new(params.clone(), candle_nn::ParamsAdamW { weight_decay: wd, ..Default::default() })?;
            &mut move |g| Ok(adam.step(g)?)
        }
    };
    let state_bytes = if a.config.optimizer == OptimizerKind::Sgd { 0 } else { 2 * params.iter().map(|v| v.elem_count() as u64 * 4).sum::<u64>() };
    let persistent = model::var_bytes(&vm) + state_bytes + (x.elem_count() * x.dtype().size_in_bytes()) as u64 + (rows * 4) as u64;
    let mut out = Measured { peak: 0, raw_peak: 0, baseline: 0, persistent, phase_peaks: [0; 3] };
    for step in 0..a.steps {
        let last = step + 1 == a.steps;
        let start = live(dev)?;
        alloc::reset_peak();
        let logits = model::forward_all(&blocks, &x, true)?;
        let l2 = if logits.rank() == 2 { logits.clone() } else { logits.reshape((rows, classes))? };
        let loss = candle_nn::loss::cross_entropy(&l2, &target)?;
        drop((logits, l2));
        let p_fwd = alloc::peak();
        alloc::reset_peak();
        let grads = loss.backward()?;
        let p_bwd = alloc::peak();
        alloc::reset_peak();
        opt(&grads)?;
        let p_opt = alloc::peak();
        drop(grads);
        let loss_value = loss.to_scalar::<f32>()?;
        drop(loss);
        if !loss_value.is_finite() {
            bail!("the loss is not finite ({loss_value}) at step {step}");
        }
        if last {
            out.baseline = start.saturating_sub(persistent);
            let adj = |p: u64| p.saturating_sub(out.baseline);
            out.phase_peaks = [adj(p_fwd), adj(p_bwd), adj(p_opt)];
            out.raw_peak = p_fwd.max(p_bwd).max(p_opt);
            out.peak = adj(out.raw_peak);
        }
    }
    if !matches!(dev, Device::Cpu) {
        bail!("CUDA measurement: driver memory sampling around phases is not implemented in this build");
    }
    Ok(out)
}
